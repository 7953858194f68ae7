"""The serve benchmark's HTTP side: clients that post the query mix to an endpoint for a bounded time, and what
they measured (latency percentiles, errors, the replica's own timings, the endpoint's own share per request).

Split from :mod:`jobs.bench.serve`, which starts the store and the apps and runs the passes.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections import Counter
from typing import Any

import numpy as np

from jobs.bench.serve_data import query_bodies

MAX_REQUESTS_PER_CLIENT_S = 500  # request cap per client-second, in case latency collapses to ~0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _client(
    base: str, bodies: list[dict[str, Any]], offset: int, deadline: float, cap: int, lat: list[float],
    codes: Counter[str], server: list[dict[str, float]],
) -> None:
    import httpx

    async with httpx.AsyncClient(base_url=base, timeout=30.0) as http:
        i = offset
        while time.perf_counter() < deadline and i - offset < cap:
            body = bodies[i % len(bodies)]
            i += 1
            t = time.perf_counter()
            try:
                r = await http.post("/v1/query", json=body)
                code = str(r.status_code)
                if r.status_code == 200:
                    ms = (time.perf_counter() - t) * 1000.0
                    data = r.json()
                    server.append(dict(data["timings_ms"], batch_size=float(data.get("batch_size", 1)), latency=ms))
                    lat.append(ms)
            except Exception as exc:  # noqa: BLE001 - a failed request is a data point, not a crash
                code = type(exc).__name__
                await asyncio.sleep(0.1)  # a dead endpoint fails in microseconds: do not spin on it
            codes[code] += 1


async def drive(base: str, clients: int, duration_s: float) -> dict[str, Any]:
    bodies = query_bodies()
    lat: list[float] = []
    codes: Counter[str] = Counter()
    server: list[dict[str, float]] = []
    cap = int(duration_s * MAX_REQUESTS_PER_CLIENT_S)
    t0 = time.perf_counter()
    deadline = t0 + duration_s
    await asyncio.gather(*(_client(base, bodies, c * 17, deadline, cap, lat, codes, server) for c in range(clients)))
    wall = time.perf_counter() - t0
    # Latency of answered requests only: a refused connection is fast and would flatter the percentiles.
    arr = np.asarray(lat) if lat else np.zeros(1)
    ok = codes.get("200", 0)
    report: dict[str, Any] = {
        "clients": clients, "duration_s": round(wall, 2), "requests": sum(codes.values()), "ok": ok,
        "errors": {k: v for k, v in codes.items() if k != "200"},
        "requests_per_s": round(ok / wall, 2),
        "latency_ms": {p: round(float(np.percentile(arr, q)), 1) for p, q in (("p50", 50), ("p95", 95), ("p99", 99))},
        "latency_ms_max": round(float(arr.max()), 1),
    }
    if server:
        report.update(server_breakdown(server))
    return report


SERVER_KEYS = ("embed", "search", "rerank", "queue", "wait", "total")
# The store's and the models' share of a request, as the replica reports it; the rest of the client's latency is
# the endpoint's own (HTTP, Serve's proxy and router when on that path, the hand-off, queueing, validation).
WORK_KEYS = ("embed", "search", "rerank", "context")


def server_breakdown(server: list[dict[str, float]]) -> dict[str, Any]:
    """Replica-side timings of answered requests: mean and p50/p99 per step, and the batch sizes seen."""
    cols = {key: np.asarray([s.get(key, 0.0) for s in server]) for key in (*SERVER_KEYS, "batch_size")}
    own = [s["latency"] - sum(s.get(k, 0.0) for k in WORK_KEYS) for s in server if "latency" in s]
    return {
        "endpoint_own_ms": percentiles(own) if own else {},
        "server_ms_mean": {k: round(float(cols[k].mean()), 1) for k in SERVER_KEYS},
        "server_ms_p50": {k: round(float(np.percentile(cols[k], 50)), 1) for k in SERVER_KEYS},
        "server_ms_p99": {k: round(float(np.percentile(cols[k], 99)), 1) for k in SERVER_KEYS},
        "batch_size_mean": round(float(cols["batch_size"].mean()), 2),
        "batch_size_max": int(cols["batch_size"].max()),
    }


def percentiles(values: list[float], digits: int = 1) -> dict[str, float]:
    arr = np.asarray(values) if values else np.zeros(1)
    return {p: round(float(np.percentile(arr, q)), digits) for p, q in (("p50", 50), ("p95", 95), ("p99", 99))}
