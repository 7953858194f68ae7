"""The Serve floor benchmark: a real local Ray Serve app and a bare HTTP server, answered over loopback."""
from __future__ import annotations

import re

import pytest

from jobs.bench import serve_floor


def test_bare_http_pass_answers_every_request():
    r = serve_floor.bare_http(20)
    assert set(r) == {"p50", "p95", "p99"} and 0 < r["p50"] <= r["p95"] <= r["p99"]


def test_requests_must_be_positive(capsys):
    with pytest.raises(SystemExit):
        serve_floor.main(["--requests", "0"])
    assert "--requests must be >= 1" in capsys.readouterr().err


@pytest.mark.slow
def test_floor_report_has_all_three_rows(capsys):
    assert serve_floor.main(["--requests", "20"]) == 0
    out = capsys.readouterr().out
    rows = {m.group(1): float(m.group(2)) for m in re.finditer(r"^\| ([^|]+?) \| ([\d.]+) \|", out, re.M)}
    assert set(rows) == {"bare HTTP server, this process", "no-op Serve app (proxy, router, replica)",
                         "no-op Serve app, direct ingress (the replica's own port)"}
    assert all(v > 0 for v in rows.values())


@pytest.mark.slow
def test_a_serve_started_without_direct_ingress_is_reported():
    import ray
    from ray import serve

    from jobs.bench.serve import free_port
    from serving.ingress import DirectIngressError, replica_urls

    @serve.deployment(ray_actor_options={"num_cpus": 0.5})
    def hello(request):  # noqa: ANN001, ANN202 - a Serve function deployment
        return "hi"

    started = not ray.is_initialized()
    if started:
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": free_port()})
        serve.run(hello.bind(), name="plain", route_prefix="/plain")
        # A caller that asked for direct ingress is told, rather than handed the proxy's address to measure.
        with pytest.raises(DirectIngressError, match="through its proxy: its controller runs without"):
            replica_urls("plain", "127.0.0.1", wait_s=1)
    finally:
        serve.shutdown()
        if started:
            ray.shutdown()
