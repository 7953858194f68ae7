"""Load benchmark of the query endpoint, on loopback only, bounded in rows, clients, time and requests.

It starts a ``milvus-lite server`` on 127.0.0.1 with a fresh collection of N synthetic chunks (random unit vectors,
texts from a synthetic vocabulary so the BM25 leg has work too), serves :mod:`serving.app` on a free loopback port,
runs C concurrent clients of ``POST /v1/query`` for D seconds, prints latency percentiles, throughput and errors,
and tears everything down. It reports; it never asserts.

Beside the C-client figures, measured in the same run against the same collection and query mix: one client alone
(the endpoint's latency without queueing), and the retrieval call straight on the store, in this process with no
HTTP and no Serve (:meth:`Retriever.search_many` one question at a time: query embedding plus the Milvus Lite
searches, and the searches alone). What the single client waits beyond the direct call is the endpoint's own
overhead (HTTP, proxy, replica hand-off).

    python -m jobs.bench.serve --quick                 # 5k chunks, 10 s
    python -m jobs.bench.serve --chunks 100000 --clients 8 --duration 60
    python -m jobs.bench.serve --chunks 100000 --db /tmp/bench100k.db   # keep the collection, reuse it next time

The query-embedding cache is off unless ``--set retrieval.query_cache_size=N`` turns it on: the bench cycles
through 200 questions, and a cache would measure the cache.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from chunker.config import Config
from chunker.types import Chunk

MAX_DURATION_S = 600.0  # hard bound whatever the flags say: this is a benchmark, not a soak test
MAX_CLIENTS = 64
MAX_REQUESTS_PER_CLIENT_S = 500  # request cap per client-second, in case latency collapses to ~0
MAX_SINGLE_S = 30.0  # the single-client and direct-store passes each run at most this long (and at most --duration)
_MODALITIES = ("text", "text", "text", "table", "figure")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def vocabulary(size: int = 3000, seed: int = 7) -> list[str]:
    """Pronounceable fake words: distinct enough for BM25, no real corpus needed."""
    rng = np.random.default_rng(seed)
    cons, vows = list("bcdfghklmnprstvz"), list("aeiou")
    words: set[str] = set()
    while len(words) < size:
        n = int(rng.integers(2, 5))
        words.add("".join(str(rng.choice(cons)) + str(rng.choice(vows)) for _ in range(n)))
    return sorted(words)


def synthetic_chunks(start: int, count: int, vocab: list[str], rng: np.random.Generator) -> list[Chunk]:
    out = []
    for i in range(start, start + count):
        words = rng.choice(vocab, size=int(rng.integers(40, 120)))
        doc = f"benchdoc{i // 40:06d}"
        page = (i % 40) // 2 + 1
        crumb = f"Manual {i // 40} > Section {(i % 40) // 8}"
        out.append(
            Chunk(
                chunk_id=f"bench-{i:08d}", doc_id=doc, element_ids=[f"{doc}:{i % 40}"],
                text=f"{crumb}\n\n" + " ".join(words), breadcrumb=crumb, page_start=page, page_end=page,
                modality=_MODALITIES[i % len(_MODALITIES)],  # type: ignore[arg-type]
                planner="synthetic", config_hash="bench", source=f"bench/{doc}.pdf", source_uri=f"bench/{doc}.pdf",
            )
        )
    return out


def load_collection(cfg: Config, n: int, dim: int, batch: int = 2000) -> float:
    """Insert n synthetic chunks; returns seconds taken. Vectors are random unit rows: setup speed over meaning.

    Meant for a Milvus Lite path in a child process: in-process Lite inserts ran ~5x faster than through
    `milvus-lite server` (measured), and the child's exit releases the data-dir lock for the server.
    """
    from chunker.index.collection import chunk_row
    from chunker.index.store import ChunkStore

    rng = np.random.default_rng(11)
    vocab = vocabulary()
    store = ChunkStore(cfg.milvus, dim)
    t0 = time.perf_counter()
    for start in range(0, n, batch):
        count = min(batch, n - start)
        vecs = rng.standard_normal((count, dim)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        rows = [chunk_row(c, v) for c, v in zip(synthetic_chunks(start, count, vocab, rng), vecs)]
        # Plain insert, not ChunkStore.upsert: the collection is fresh and the IDs unique, and upsert slows down
        # as the collection grows (measured ~100 rows/s past 40k rows), which would make setup the benchmark.
        store.client.insert(store.collection, rows)
        if (start // batch) % 10 == 0:
            print(f"  loaded {start + count:,}/{n:,} chunks", flush=True)
    print(f"  collection holds {store.count():,} chunks", flush=True)
    store.close()
    return time.perf_counter() - t0


def _load_child(cfg_data: dict[str, Any], n: int, dim: int, out: Any) -> None:
    out.put(load_collection(Config.model_validate(cfg_data), n, dim))


def load_in_child(cfg: Config, n: int, dim: int, timeout_s: float = 1800.0) -> float:
    """Run :func:`load_collection` in a spawned process, so the Lite lock is gone when it returns."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")  # no fork: this process may already hold gRPC threads
    out = ctx.Queue()
    proc = ctx.Process(target=_load_child, args=(cfg.model_dump(mode="json"), n, dim, out))
    proc.start()
    try:
        secs = float(out.get(timeout=timeout_s))
    finally:
        proc.join(timeout=60)
        if proc.is_alive():
            proc.kill()
    if proc.exitcode != 0:
        raise RuntimeError(f"loading process exited with {proc.exitcode}")
    return secs


def query_bodies(n: int = 200, seed: int = 3) -> list[dict[str, Any]]:
    """Varied requests: short and long questions, some with filters, k from 3 to 20."""
    rng = np.random.default_rng(seed)
    vocab = vocabulary()
    bodies = []
    for i in range(n):
        q = " ".join(rng.choice(vocab, size=int(rng.integers(2, 16))))
        body: dict[str, Any] = {"query": f"what does the manual say about {q}?", "k": int(rng.choice([3, 5, 10, 20]))}
        if i % 5 == 1:
            body["filters"] = {"modality": "table"}
        elif i % 5 == 3:
            body["filters"] = {"page_min": 2, "page_max": 10}
        bodies.append(body)
    return bodies


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
                    data = r.json()
                    server.append(dict(data["timings_ms"], batch_size=float(data.get("batch_size", 1))))
                    lat.append((time.perf_counter() - t) * 1000.0)
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


def server_breakdown(server: list[dict[str, float]]) -> dict[str, Any]:
    """Replica-side timings of answered requests: mean and p50/p99 per step, and the batch sizes seen."""
    cols = {key: np.asarray([s.get(key, 0.0) for s in server]) for key in (*SERVER_KEYS, "batch_size")}
    return {
        "server_ms_mean": {k: round(float(cols[k].mean()), 1) for k in SERVER_KEYS},
        "server_ms_p50": {k: round(float(np.percentile(cols[k], 50)), 1) for k in SERVER_KEYS},
        "server_ms_p99": {k: round(float(np.percentile(cols[k], 99)), 1) for k in SERVER_KEYS},
        "batch_size_mean": round(float(cols["batch_size"].mean()), 2),
        "batch_size_max": int(cols["batch_size"].max()),
    }


def _percentiles(values: list[float]) -> dict[str, float]:
    arr = np.asarray(values) if values else np.zeros(1)
    return {p: round(float(np.percentile(arr, q)), 1) for p, q in (("p50", 50), ("p95", 95), ("p99", 99))}


def direct_store(cfg: Config, duration_s: float, max_queries: int | None = None) -> dict[str, Any]:
    """The same query mix through :meth:`Retriever.search_many`, one question per call, in this process: what a
    query costs without HTTP, Serve or batching. ``retrieval_ms`` is a call's whole wall time (query embedding,
    every Milvus call of the mode, fusion); ``search_ms`` the Milvus calls alone, ``embed_ms`` the embedding alone.
    Bounded by ``duration_s`` and by one pass over the mix (or ``max_queries``)."""
    from chunker.index.filters import QueryFilters
    from chunker.index.retrieval import Query, Retriever

    bodies = query_bodies()
    limit = len(bodies) if max_queries is None else max(1, min(max_queries, len(bodies)))
    retriever = Retriever(cfg)
    total: list[float] = []
    search: list[float] = []
    embed: list[float] = []
    errors: Counter[str] = Counter()
    try:
        retriever.search_many([Query("warm up the direct path", k=1)])  # model load and first searches: not timed
        t0 = time.perf_counter()
        deadline = t0 + duration_s
        for body in bodies[:limit]:
            if time.perf_counter() >= deadline:
                break
            filters = QueryFilters(**body["filters"]) if body.get("filters") else None
            t = time.perf_counter()
            (res,) = retriever.search_many([Query(body["query"], body["k"], filters)])
            dt = (time.perf_counter() - t) * 1000.0
            if isinstance(res, BaseException):
                errors[type(res).__name__] += 1
                continue
            total.append(dt)
            search.append(float(res.timings_ms.get("search", 0.0)))
            embed.append(float(res.timings_ms.get("embed", 0.0)))
        wall = time.perf_counter() - t0
    finally:
        retriever.close()
    return {"queries": len(total), "duration_s": round(wall, 2), "errors": dict(errors),
            "queries_per_s": round(len(total) / wall, 2) if wall else 0.0,
            "retrieval_ms": _percentiles(total), "search_ms": _percentiles(search), "embed_ms": _percentiles(embed)}


def overhead(single: dict[str, Any], direct: dict[str, Any]) -> dict[str, float]:
    """The endpoint's own cost per query: one client's latency minus the direct retrieval call's, per percentile."""
    lat, ret = single.get("latency_ms") or {}, direct.get("retrieval_ms") or {}
    return {p: round(lat[p] - ret[p], 1) for p in ("p50", "p95", "p99") if p in lat and p in ret}


def _wait_port(port: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout_s:.0f} s")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m jobs.bench.serve", description=__doc__.split("\n")[0])
    p.add_argument("--config", default=None, help="YAML config for the app (defaults when omitted).")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="Config override; repeatable.")
    p.add_argument("--chunks", type=int, default=100_000, help="Synthetic chunks in the collection.")
    p.add_argument("--clients", type=int, default=8, help="Concurrent HTTP clients.")
    p.add_argument("--duration", type=float, default=60.0, help="Seconds of load.")
    p.add_argument("--single-duration", type=float, default=None,
                   help=f"Seconds of the single-client pass and at most as long for the direct store pass (default and "
                   f"cap: --duration, at most {MAX_SINGLE_S:.0f} s).")
    p.add_argument("--replicas", type=int, default=1, help="Query replicas.")
    p.add_argument("--quick", action="store_true", help="5,000 chunks and 10 s of load.")
    p.add_argument("--json", default=None, help="Also write the report to this file.")
    p.add_argument("--db", default=None, help="Milvus Lite directory to keep: loaded when missing, reused as is when "
                   "it exists (loading 100k chunks takes minutes).")
    ns = p.parse_args(argv)
    if ns.quick:
        ns.chunks, ns.duration = min(ns.chunks, 5_000), min(ns.duration, 10.0)
    ns.chunks = max(1, ns.chunks)
    ns.clients = max(1, min(ns.clients, MAX_CLIENTS))
    ns.duration = max(1.0, min(ns.duration, MAX_DURATION_S))
    single = ns.duration if ns.single_duration is None else ns.single_duration
    ns.single_duration = max(1.0, min(single, ns.duration, MAX_SINGLE_S))
    return ns


def run(ns: argparse.Namespace) -> dict[str, Any]:
    import ray
    from ray import serve

    from jobs.common import init_ray
    from serving.app import build_app, config_from_args

    work = Path(tempfile.mkdtemp(prefix="serve_bench_"))
    milvus_port, http_port = free_port(), free_port()
    uri = f"http://127.0.0.1:{milvus_port}"
    overrides = ["retrieval.query_cache_size=0", *ns.set, f"milvus.uri={uri}", f"serve.replicas={ns.replicas}",
                 "serve.autoscaling=false"]
    app_args = {"config": ns.config, "set": overrides}
    cfg = config_from_args(app_args)
    lite_dir = Path(ns.db).resolve() if ns.db else work / "milvus.db"
    s = cfg.serve
    report: dict[str, Any] = {
        "chunks": ns.chunks, "replicas": ns.replicas, "mode": cfg.retrieval.mode, "num_cpus": s.num_cpus,
        "max_batch_size": s.max_batch_size, "batch_wait_timeout_s": s.batch_wait_timeout_s,
        "torch_threads": s.torch_threads, "query_cache_size": cfg.retrieval.query_cache_size,
        "load_avg_before": [round(x, 2) for x in os.getloadavg()],
    }
    server: subprocess.Popen[bytes] | None = None
    try:
        from chunker.index.embed import Embedder

        dim = Embedder(cfg.embed).dim
        if lite_dir.exists():
            print(f"reusing the collection in {lite_dir} (--chunks is not checked against it)", flush=True)
        else:
            print(f"loading {ns.chunks:,} synthetic chunks (dim {dim}) into {lite_dir}", flush=True)
            lite_cfg = cfg.model_copy(update={"milvus": cfg.milvus.model_copy(update={"uri": str(lite_dir)})})
            load_s = load_in_child(lite_cfg, ns.chunks, dim)
            report["load_s"] = round(load_s, 1)
            report["load_rows_per_s"] = round(ns.chunks / load_s, 1)
        # The replicas reach the same directory through a server: several processes may then share it.
        exe = Path(sys.executable).with_name("milvus-lite")
        server = subprocess.Popen(
            [str(exe), "server", "--data-dir", str(lite_dir), "--host", "127.0.0.1", "--port", str(milvus_port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        _wait_port(milvus_port, 120)
        init_ray(cfg)
        serve.start(http_options={"host": "127.0.0.1", "port": http_port})
        t0 = time.perf_counter()
        # Access logs off: one line per request would cost the CPU being measured and flood the terminal.
        serve.run(build_app(app_args), name="bench", route_prefix="/", logging_config={"enable_access_log": False})
        report["serve_start_s"] = round(time.perf_counter() - t0, 1)
        base = f"http://127.0.0.1:{http_port}"
        asyncio.run(drive(base, 1, 2.0))  # warm-up: first searches load the collection and JIT paths
        # The store alone first, while the replica is idle: the same collection, server and query mix, no HTTP.
        print(f"direct retrieval calls for up to {ns.single_duration:.0f} s (no HTTP)", flush=True)
        report["direct"] = direct_store(cfg, ns.single_duration)
        print(f"driving 1 client for {ns.single_duration:.0f} s against {base}/v1/query", flush=True)
        report["single_client"] = asyncio.run(drive(base, 1, ns.single_duration))
        report["endpoint_overhead_ms"] = overhead(report["single_client"], report["direct"])
        print(f"driving {ns.clients} clients for {ns.duration:.0f} s against {base}/v1/query", flush=True)
        report.update(asyncio.run(drive(base, ns.clients, ns.duration)))
        report["load_avg_after"] = [round(x, 2) for x in os.getloadavg()]
    finally:
        if ray.is_initialized():
            try:
                serve.shutdown()
            finally:
                ray.shutdown()
        if server is not None:
            server.terminate()
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                server.kill()
        shutil.rmtree(work, ignore_errors=True)
    return report


def print_report(r: dict[str, Any]) -> None:
    lat = r.get("latency_ms", {})
    print("\n== serve benchmark ==")
    print(f"chunks {r['chunks']:,}  replicas {r['replicas']}  mode {r['mode']}  clients {r.get('clients')}")
    print(f"load {r.get('load_s')} s ({r.get('load_rows_per_s')} rows/s); serve start {r.get('serve_start_s')} s")
    d, one = r.get("direct") or {}, r.get("single_client") or {}
    if d:
        print(f"direct (no HTTP, 1 caller): {d.get('queries')} queries, {d.get('queries_per_s')} q/s; retrieval ms "
              f"{d.get('retrieval_ms')}; searches alone {d.get('search_ms')}; embedding {d.get('embed_ms')}")
    if one:
        print(f"endpoint, 1 client: {one.get('ok')} ok = {one.get('requests_per_s')} req/s; latency ms "
              f"{one.get('latency_ms')}; overhead over direct {r.get('endpoint_overhead_ms')}")
    print(f"endpoint, {r.get('clients')} clients:")
    print(f"requests {r.get('requests')} in {r.get('duration_s')} s; ok {r.get('ok')} = {r.get('requests_per_s')} req/s")
    print(f"latency ms (ok requests)  p50 {lat.get('p50')}  p95 {lat.get('p95')}  p99 {lat.get('p99')}  max {r.get('latency_ms_max')}")
    print(f"server-side ms  mean {r.get('server_ms_mean')}")
    print(f"                p50  {r.get('server_ms_p50')}")
    print(f"                p99  {r.get('server_ms_p99')}")
    print(f"batch size mean {r.get('batch_size_mean')} max {r.get('batch_size_max')}; num_cpus {r.get('num_cpus')}; "
          f"load average before {r.get('load_avg_before')} after {r.get('load_avg_after')}")
    print(f"errors {r.get('errors') or 'none'}")
    print(json.dumps(r, sort_keys=True))


def main(argv: list[str] | None = None) -> int:
    ns = parse_args(argv)
    report = run(ns)
    print_report(report)
    if ns.json:
        Path(ns.json).write_text(json.dumps(report, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
