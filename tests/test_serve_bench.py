"""The serving benchmark, run tiny the way ``python -m jobs.benchmark serve`` runs it: a real Milvus Lite server, Ray
Serve on loopback, and the passes it reports side by side per mode (the store alone with its split, one client, N
clients)."""

from __future__ import annotations

import pytest

from jobs.bench import serve as bench

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def test_overhead_is_single_client_minus_direct() -> None:
    single = {"latency_ms": {"p50": 30.0, "p95": 41.5, "p99": 50.0}}
    direct = {"retrieval_ms": {"p50": 12.0, "p95": 20.0, "p99": 21.0}}
    assert bench.overhead(single, direct) == {"p50": 18.0, "p95": 21.5, "p99": 29.0}
    assert bench.overhead(single, {}) == {}


def test_hybrid_over_dense_is_the_ratio_of_store_p50s() -> None:
    by_mode = {"dense": {"direct": {"search_ms": {"p50": 20.0}, "retrieval_ms": {"p50": 25.0}}},
               "hybrid": {"direct": {"search_ms": {"p50": 30.0}, "retrieval_ms": {"p50": 35.0}}}}
    assert bench.ratios(by_mode) == {"search_ms_p50": 1.5, "retrieval_ms_p50": 1.4}
    by_mode["dense"]["direct"]["store_cpu_ms_mean"], by_mode["hybrid"]["direct"]["store_cpu_ms_mean"] = 10.0, 25.0
    assert bench.ratios(by_mode)["store_cpu_ms_mean"] == 2.5
    assert bench.ratios({"hybrid": by_mode["hybrid"]}) == {}


def test_process_cpu_is_read_from_proc() -> None:
    import os

    used = bench.process_cpu_s(os.getpid())
    assert used is not None and used > 0
    assert bench.process_cpu_s(None) is None and bench.process_cpu_s(2**31 - 1) is None  # no such process


def test_single_pass_is_bounded_and_modes_are_checked() -> None:
    ns = bench.parse_args(["--duration", "5", "--single-duration", "600"])
    assert ns.single_duration == 5  # never longer than the N-client pass
    assert ns.modes == ["dense", "hybrid"] and ns.direct_duration == 10  # the single pass's length per mode
    ns = bench.parse_args(["--duration", "600", "--modes", "hybrid, sparse,hybrid"])
    assert ns.single_duration == bench.MAX_SINGLE_S and ns.modes == ["hybrid", "sparse"]
    with pytest.raises(SystemExit):
        bench.parse_args(["--modes", "dense,fuzzy"])


def test_tiny_run_reports_store_single_and_concurrent_latency(capsys: pytest.CaptureFixture[str]) -> None:
    ns = bench.parse_args(["--chunks", "300", "--clients", "3", "--duration", "3", "--single-duration", "2"])
    r = bench.run(ns)
    assert set(r["by_mode"]) == {"dense", "hybrid"}
    for mode, m in r["by_mode"].items():
        # N clients.
        many = m["concurrent"]
        assert many["clients"] == 3 and many["ok"] > 0 and not many["errors"]
        assert many["latency_ms"]["p50"] > 0
        # One client alone against the same endpoint.
        one = m["single_client"]
        assert one["clients"] == 1 and one["ok"] > 0 and not one["errors"]
        assert 0 < one["latency_ms"]["p50"] <= one["latency_ms"]["p99"]
        # The retrieval call straight on the store, same query mix, no HTTP.
        d = m["direct"]
        assert d["queries"] > 0 and not d["errors"]
        assert d["duration_s"] <= ns.direct_duration + 5  # bounded (the last call may overrun the deadline)
        assert 0 < d["search_ms"]["p50"] <= d["retrieval_ms"]["p50"]
        assert d["embed_ms"]["p50"] > 0  # both modes embed the question
        # The split of the search: one store call for dense; the common words left out of the BM25 query, each
        # leg and fusion for hybrid (on Milvus Lite the legs bring the fields: no fetch by key).
        steps = {"dense", "duplicates"} if mode == "dense" else {"common_terms", "dense", "sparse", "legs", "fuse",
                                                                 "duplicates"}
        assert set(d["split_ms_p50"]) == steps
        # A repeated question is answered by the result cache, far below a search.
        assert d["repeats_cached"] > 0 and d["repeat_ms"]["p50"] < d["search_ms"]["p50"]
        assert d["store_cpu_ms_mean"] is not None and d["store_cpu_ms_mean"] >= 0  # the Lite server's own CPU time
        # The endpoint's own cost, per percentile, is the single client's latency minus the direct call's.
        assert set(m["endpoint_overhead_ms"]) == {"p50", "p95", "p99"}
        assert m["endpoint_overhead_ms"]["p50"] == round(one["latency_ms"]["p50"] - d["retrieval_ms"]["p50"], 1)
        # The same passes straight to the replica's own port (direct ingress, on by default in the bench), answered
        # by the same replica under the same route prefix, without the proxy.
        # Per request: the client's latency minus the replica's own embedding and store time, never negative.
        assert 0 < one["endpoint_own_ms"]["p50"] < one["latency_ms"]["p50"]
        di = m["direct_ingress"]
        assert di["base"].endswith(f"/{mode}") and di["base"].split(":")[2] != m["base"].split(":")[2]
        assert di["single_client"]["ok"] > 0 and not di["single_client"]["errors"]
        assert di["concurrent"]["ok"] > 0 and not di["concurrent"]["errors"]
    # The CPU ratio only where both modes' server CPU means are above zero: /proc counts 10 ms ticks, and a tiny run
    # on a quiet core can spend less than one per question.
    cpu = [r["by_mode"][m]["direct"]["store_cpu_ms_mean"] for m in ("hybrid", "dense")]
    assert set(r["hybrid_over_dense"]) == {"search_ms_p50", "retrieval_ms_p50"} | (
        {"store_cpu_ms_mean"} if all(cpu) else set())
    bench.print_report(r)
    out = capsys.readouterr().out
    assert "store alone (no HTTP, 1 caller)" in out and "endpoint through the proxy, 1 client" in out and "endpoint direct ingress, 1 client" in out and "hybrid / dense" in out
