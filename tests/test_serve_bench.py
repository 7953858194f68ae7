"""The serving benchmark, run tiny the way ``python -m jobs.benchmark serve`` runs it: a real Milvus Lite server, Ray
Serve on loopback, and the three passes it reports side by side (direct retrieval calls, one client, N clients)."""

from __future__ import annotations

import pytest

from jobs.bench import serve as bench

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def test_overhead_is_single_client_minus_direct() -> None:
    single = {"latency_ms": {"p50": 30.0, "p95": 41.5, "p99": 50.0}}
    direct = {"retrieval_ms": {"p50": 12.0, "p95": 20.0, "p99": 21.0}}
    assert bench.overhead(single, direct) == {"p50": 18.0, "p95": 21.5, "p99": 29.0}
    assert bench.overhead(single, {}) == {}


def test_single_pass_is_bounded() -> None:
    ns = bench.parse_args(["--duration", "5", "--single-duration", "600"])
    assert ns.single_duration == 5  # never longer than the N-client pass
    ns = bench.parse_args(["--duration", "600"])
    assert ns.single_duration == bench.MAX_SINGLE_S


def test_tiny_run_reports_store_single_and_concurrent_latency(capsys: pytest.CaptureFixture[str]) -> None:
    ns = bench.parse_args(["--chunks", "300", "--clients", "3", "--duration", "3", "--single-duration", "2"])
    r = bench.run(ns)
    # N clients, as before.
    assert r["clients"] == 3 and r["ok"] > 0 and not r["errors"]
    assert r["latency_ms"]["p50"] > 0
    # One client alone against the same endpoint.
    one = r["single_client"]
    assert one["clients"] == 1 and one["ok"] > 0 and not one["errors"]
    assert 0 < one["latency_ms"]["p50"] <= one["latency_ms"]["p99"]
    # The retrieval call straight on the store, same query mix, no HTTP.
    d = r["direct"]
    assert d["queries"] > 0 and not d["errors"]
    assert d["duration_s"] <= ns.single_duration + 5  # bounded (the last call may overrun the deadline)
    assert 0 < d["search_ms"]["p50"] <= d["retrieval_ms"]["p50"]
    assert d["embed_ms"]["p50"] > 0  # hybrid mode embeds the question
    # The endpoint's own cost, per percentile, is the single client's latency minus the direct call's.
    assert set(r["endpoint_overhead_ms"]) == {"p50", "p95", "p99"}
    assert r["endpoint_overhead_ms"]["p50"] == round(one["latency_ms"]["p50"] - d["retrieval_ms"]["p50"], 1)
    bench.print_report(r)
    out = capsys.readouterr().out
    assert "direct (no HTTP, 1 caller)" in out and "endpoint, 1 client" in out
