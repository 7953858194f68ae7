"""Ray Serve's own floor on this machine: what an HTTP request through Serve's proxy and router to a replica that
answers at once costs, beside the same request to the replica's own port (direct ingress, serving/ingress.py) and to
a bare HTTP server in this process.

Why: issue 24 asks that the endpoint add at most 10 ms p50 over the store. The endpoint's time outside the replica
is Serve's HTTP proxy, its router and the hand-off (jobs.bench.serve measures it as client p50 minus replica p50).
This says how much of that any Serve app pays here, before a line of ours runs. It reports; it never asserts.

    python -m jobs.bench.serve_floor [--requests 300] [--cpus 2]
    python -m jobs.benchmark serve-floor ...
"""

from __future__ import annotations

import argparse
import json
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

from jobs.bench.serve_http import free_port, percentiles

BODY = json.dumps({"query": "how do I file a warranty claim", "k": 5}).encode()


def _post(url: str) -> float:
    t = time.perf_counter()
    req = urllib.request.Request(url, data=BODY, headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        resp.read()
    return (time.perf_counter() - t) * 1000


def _timed(call: Callable[[], float], n: int, warm: int = 30) -> dict[str, float]:
    for _ in range(warm):
        call()
    return percentiles([call() for _ in range(n)])


class _Bare(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        self.rfile.read(int(self.headers.get("content-length", 0)))
        out = b'{"hits": []}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def log_message(self, *args: Any) -> None:
        return None


def bare_http(n: int) -> dict[str, float]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Bare)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        return _timed(lambda: _post(f"http://127.0.0.1:{srv.server_address[1]}/"), n)
    finally:
        srv.shutdown()
        srv.server_close()


def serve_noop(n: int, cpus: int, replica_cpus: float, direct: bool = False) -> dict[str, float]:
    """One client's latency to a no-op Serve app: through the proxy, or (``direct``) to the replica's own port."""
    import ray
    from ray import serve

    from chunker.config import Config
    from serving.ingress import controller_options, replica_urls

    cfg = Config.model_validate({"serve": {"direct_ingress": direct}})

    @serve.deployment(ray_actor_options={"num_cpus": replica_cpus})
    class Noop:
        async def __call__(self, request: Any) -> dict[str, Any]:
            body = await request.json()
            return {"query": body.get("query", ""), "hits": []}

    port = free_port()
    started = not ray.is_initialized()  # a caller's Ray (a test session's) is used and left running
    if started:
        # address="local": a cluster of its own, never one another process started with `ray start`.
        ray.init(address="local", num_cpus=cpus, include_dashboard=False, log_to_driver=False)
    try:
        # A Serve of its own (shut down below): the controller reads the direct-ingress flag only when it starts.
        serve.start(http_options={"host": "127.0.0.1", "port": port}, controller_options=controller_options(cfg))
        serve.run(Noop.bind(), name="floor", route_prefix="/v1/query")
        url = replica_urls("floor", "127.0.0.1")[0] if direct else f"http://127.0.0.1:{port}/v1/query"
        return _timed(lambda: _post(url), n)
    finally:
        serve.shutdown()
        if started:
            ray.shutdown()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m jobs.benchmark serve-floor", description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=300, help="timed requests per pass (after 30 untimed)")
    p.add_argument("--cpus", type=int, default=2, help="CPUs of the local Ray cluster")
    p.add_argument("--replica-cpus", type=float, default=0.5, help="the replica's CPU reservation (the app's own)")
    args = p.parse_args(argv)
    if args.requests < 1:
        p.error("--requests must be >= 1")
    rows = {"bare HTTP server, this process": bare_http(args.requests),
            "no-op Serve app (proxy, router, replica)": serve_noop(args.requests, args.cpus, args.replica_cpus),
            "no-op Serve app, direct ingress (the replica's own port)":
                serve_noop(args.requests, args.cpus, args.replica_cpus, direct=True)}
    print(f"| 1 client, {args.requests} requests | p50 ms | p95 ms | p99 ms |\n| --- | --- | --- | --- |")
    for name, r in rows.items():
        print(f"| {name} | {r['p50']:.1f} | {r['p95']:.1f} | {r['p99']:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
