"""Load benchmark of the query endpoint, on loopback only, bounded in rows, clients, time and requests.

It starts a ``milvus-lite server`` on 127.0.0.1 with a collection of N synthetic chunks (random unit vectors, texts
from a synthetic vocabulary so the BM25 leg has work too; :mod:`jobs.bench.serve_data`), serves :mod:`serving.app`
once per retrieval mode (``--modes``, default dense and hybrid; one app per mode, under /<mode>), and measures each
mode in turn, against the same collection and query mix:

- the store alone: :meth:`Retriever.search_many` one question at a time in this process, no HTTP and no Serve
  (query embedding plus the store calls; the store calls alone; and the split of the search into its steps: each
  leg's store call, both legs' wall time, fusion, the fetch of fields by key, the duplicate step), then a repeated
  question with the result cache on;
- one client against the endpoint (its latency without queueing; minus the store alone: the endpoint's own
  overhead: HTTP, proxy, replica hand-off; and per request, the latency minus the replica's own embedding and store
  time, which does not depend on the store-alone pass running as fast as the replica's calls);
- C concurrent clients of ``POST /v1/query`` for D seconds (latency percentiles, throughput, errors).

The endpoint passes run through Serve's proxy and/or straight to the replica's own port (``--ingress``, default
both: ``serve.direct_ingress``, serving/ingress.py), against the same replica.

It prints the figures and the hybrid / dense ratio of the store's p50, and tears everything down. It reports; it
never asserts.

    python -m jobs.bench.serve --quick                 # 5k chunks, 10 s
    python -m jobs.bench.serve --chunks 100000 --clients 8 --duration 60
    python -m jobs.bench.serve --chunks 100000 --db /tmp/bench100k.db   # keep the collection, reuse it next time
    python -m jobs.benchmark serve ...                 # the same, through the benchmark entry point

Both caches (query embeddings, results) are off for the timed passes unless ``--set`` turns them on: the bench
cycles through 200 questions, and a cache would measure the cache.
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
from jobs.bench.serve_data import load_in_child, query_bodies
from jobs.bench.serve_http import drive, free_port, percentiles

MAX_DURATION_S = 600.0  # hard bound whatever the flags say: this is a benchmark, not a soak test
MAX_CLIENTS = 64
INGRESS = ("proxy", "direct", "both")
MAX_SINGLE_S = 30.0  # the single-client and direct-store passes each run at most this long (and at most --duration)


def process_cpu_s(pid: int | None) -> float | None:
    """CPU seconds (user + system) a process has used so far, from /proc (Linux); None where unknown. Its clock
    ticks are 10 ms, so it is read over many calls: a mean per call, robust to a machine shared with other work."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def direct_store(cfgs: dict[str, Config], duration_s: float, max_queries: int | None = None,
                 repeats: int = 50, server_pid: int | None = None) -> dict[str, dict[str, Any]]:
    """The same query mix through :meth:`Retriever.search_many`, one question per call, in this process, for each
    mode of ``cfgs``: what a query costs without HTTP, Serve or batching. The modes take turns question by question
    (the order rotating), so a change of machine load over the pass weighs on each alike. ``retrieval_ms`` is a
    call's whole wall time (query embedding, every store call, fusion); ``search_ms`` the store calls with fusion and
    field fetch; ``embed_ms`` the embedding alone; ``split_ms_p50`` each step of the search
    (:attr:`SearchResult.split_ms`: each leg's store call, both legs' wall time, fusion, the fetch of fields by key,
    the duplicate step). Bounded by ``duration_s`` and by one pass over the mix (or ``max_queries``); the result
    cache is off for it (as the bench builds ``cfgs``).

    ``store_cpu_ms_mean``: the CPU time the Milvus Lite server process (``server_pid``) spent per question, on
    average: what the store's work costs whatever else runs on the machine (wall times grow with the load).

    Then ``repeats`` questions of the mix asked twice with the result cache on: ``repeat_ms`` is the second asking,
    what a repeated question costs."""
    from chunker.index.filters import QueryFilters
    from chunker.index.retrieval import Query, Retriever

    bodies = query_bodies()
    limit = len(bodies) if max_queries is None else max(1, min(max_queries, len(bodies)))
    modes = list(cfgs)
    first = Retriever(cfgs[modes[0]])
    retrievers = {m: Retriever(c, store=first.store, embedder=first.embedder) for m, c in cfgs.items()}
    cols: dict[str, dict[str, list[float]]] = {m: {"total": [], "search": [], "embed": [], "repeat": [], "cpu": []}
                                               for m in modes}
    split: dict[str, dict[str, list[float]]] = {m: {} for m in modes}
    errors: dict[str, Counter[str]] = {m: Counter() for m in modes}

    def ask(r: Retriever, body: dict[str, Any]) -> tuple[Any, float]:
        filters = QueryFilters(**body["filters"]) if body.get("filters") else None
        t = time.perf_counter()
        (res,) = r.search_many([Query(body["query"], body["k"], filters)])
        return res, (time.perf_counter() - t) * 1000.0

    try:
        for r in retrievers.values():  # model load and first searches (Lite builds its BM25 index): not timed
            r.search_many([Query("warm up the direct path", k=1)])
        t0 = time.perf_counter()
        deadline = t0 + duration_s
        for n, body in enumerate(bodies[:limit]):
            if time.perf_counter() >= deadline:
                break
            for j in range(len(modes)):
                m = modes[(n + j) % len(modes)]
                cpu0 = process_cpu_s(server_pid)
                res, dt = ask(retrievers[m], body)
                cpu1 = process_cpu_s(server_pid)
                if isinstance(res, BaseException):
                    errors[m][type(res).__name__] += 1
                    continue
                c = cols[m]
                c["total"].append(dt)
                c["search"].append(float(res.timings_ms.get("search", 0.0)))
                c["embed"].append(float(res.timings_ms.get("embed", 0.0)))
                if cpu0 is not None and cpu1 is not None:
                    c["cpu"].append((cpu1 - cpu0) * 1000.0)
                for step, ms in res.split_ms.items():
                    split[m].setdefault(step, []).append(ms)
        wall = time.perf_counter() - t0
        for m, cfg in cfgs.items():
            on = cfg.model_copy(deep=True)
            on.retrieval.result_cache_size = max(repeats, 1)
            cached = Retriever(on, store=first.store, embedder=first.embedder)
            for body in bodies[:repeats]:
                ask(cached, body)
                res, dt = ask(cached, body)
                if not isinstance(res, BaseException) and res.cached:
                    cols[m]["repeat"].append(dt)
    finally:
        first.close()
    out = {}
    for m in modes:
        c = cols[m]
        out[m] = {"queries": len(c["total"]), "duration_s": round(wall, 2), "errors": dict(errors[m]),
                  "queries_per_s": round(len(c["total"]) / (sum(c["total"]) / 1000), 2) if c["total"] else 0.0,
                  "retrieval_ms": percentiles(c["total"]), "search_ms": percentiles(c["search"]),
                  "embed_ms": percentiles(c["embed"]),
                  "split_ms_p50": {k: round(float(np.percentile(v, 50)), 2) for k, v in split[m].items()},
                  "store_cpu_ms_mean": round(float(np.mean(c["cpu"])), 1) if c["cpu"] else None,
                  "repeat_ms": percentiles(c["repeat"], digits=3), "repeats_cached": len(c["repeat"])}
    return out


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


MODES = ("dense", "sparse", "hybrid")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m jobs.benchmark serve", description=__doc__.split("\n")[0])
    p.add_argument("--config", default=None, help="YAML config for the app (defaults when omitted).")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="Config override; repeatable.")
    p.add_argument("--modes", default="dense,hybrid",
                   help="Retrieval modes measured in this run, comma-separated (each gets its own app and passes; "
                   "overrides retrieval.mode).")
    p.add_argument("--chunks", type=int, default=100_000, help="Synthetic chunks in the collection.")
    p.add_argument("--clients", type=int, default=8, help="Concurrent HTTP clients.")
    p.add_argument("--duration", type=float, default=60.0, help="Seconds of load.")
    p.add_argument("--single-duration", type=float, default=None,
                   help=f"Seconds of the single-client pass and at most as long for the direct store pass (default and "
                   f"cap: --duration, at most {MAX_SINGLE_S:.0f} s).")
    p.add_argument("--direct-duration", type=float, default=None,
                   help="Seconds of the store-alone pass, all modes together (default: the single-client pass's "
                   f"length per mode; at most {MAX_DURATION_S:.0f} s). At 100k chunks on Milvus Lite a hybrid question "
                   "takes a quarter of a second or more: give it enough for ~50 questions per mode.")
    p.add_argument("--replicas", type=int, default=1, help="Query replicas.")
    p.add_argument("--ingress", choices=INGRESS, default="both",
                   help="Endpoint passes through Serve's proxy, straight to the replica's own port (serve.direct_ingress), "
                   "or both, proxy first (default).")
    p.add_argument("--quick", action="store_true", help="5,000 chunks and 10 s of load.")
    p.add_argument("--json", default=None, help="Also write the report to this file.")
    p.add_argument("--db", default=None, help="Milvus Lite directory to keep: loaded when missing, reused as is when "
                   "it exists (loading 100k chunks takes minutes).")
    ns = p.parse_args(argv)
    ns.modes = list(dict.fromkeys(m.strip() for m in ns.modes.split(",") if m.strip()))
    bad = [m for m in ns.modes if m not in MODES]
    if bad or not ns.modes:
        p.error(f"--modes: unknown or no mode {bad}; known: {', '.join(MODES)}")
    if ns.quick:
        ns.chunks, ns.duration = min(ns.chunks, 5_000), min(ns.duration, 10.0)
    ns.chunks = max(1, ns.chunks)
    ns.clients = max(1, min(ns.clients, MAX_CLIENTS))
    ns.duration = max(1.0, min(ns.duration, MAX_DURATION_S))
    single = ns.duration if ns.single_duration is None else ns.single_duration
    ns.single_duration = max(1.0, min(single, ns.duration, MAX_SINGLE_S))
    direct = ns.single_duration * len(ns.modes) if ns.direct_duration is None else ns.direct_duration
    ns.direct_duration = max(1.0, min(direct, MAX_DURATION_S))
    return ns


def _load_avg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def endpoint_passes(mode: str, base: str, ns: argparse.Namespace, direct: dict[str, Any]) -> dict[str, Any]:
    """One client, then N clients, against ``base``; the overhead over the store-alone call."""
    r: dict[str, Any] = {"base": base}
    asyncio.run(drive(base, 1, 2.0))  # warm-up
    print(f"[{mode}] 1 client for {ns.single_duration:.0f} s against {base}/v1/query", flush=True)
    r["single_client"] = asyncio.run(drive(base, 1, ns.single_duration))
    r["endpoint_overhead_ms"] = overhead(r["single_client"], direct)
    print(f"[{mode}] {ns.clients} clients for {ns.duration:.0f} s against {base}/v1/query", flush=True)
    r["concurrent"] = asyncio.run(drive(base, ns.clients, ns.duration))
    return r


def measure_endpoint(mode: str, bases: dict[str, str], ns: argparse.Namespace, direct: dict[str, Any]) -> dict[str, Any]:
    """One mode's endpoint passes against its own app: through the proxy (``single_client``, ``concurrent``,
    ``endpoint_overhead_ms`` at the top) and/or the replica's own port (the same keys under ``direct_ingress``)."""
    r: dict[str, Any] = {"load_avg_before": _load_avg(), "direct": direct}
    if "proxy" in bases:
        r.update(endpoint_passes(mode, bases["proxy"], ns, direct))
    if "direct" in bases:
        r["direct_ingress"] = endpoint_passes(mode, bases["direct"], ns, direct)
    r["load_avg_after"] = _load_avg()
    return r


def ratios(by_mode: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Hybrid's store cost over dense's from the same run: p50 of the searches alone and of the whole retrieval
    call, and the mean CPU time of the store's server per question."""
    h, d = (by_mode.get(m, {}).get("direct") or {} for m in ("hybrid", "dense"))
    out = {}
    for key in ("search_ms", "retrieval_ms"):
        num, den = (h.get(key) or {}).get("p50"), (d.get(key) or {}).get("p50")
        if num and den:
            out[f"{key}_p50"] = round(num / den, 2)
    if h.get("store_cpu_ms_mean") and d.get("store_cpu_ms_mean"):
        out["store_cpu_ms_mean"] = round(h["store_cpu_ms_mean"] / d["store_cpu_ms_mean"], 2)
    return out


def run(ns: argparse.Namespace) -> dict[str, Any]:
    import ray
    from ray import serve

    from jobs.common import init_ray
    from serving.app import build_app, config_from_args
    from serving.ingress import controller_options, replica_urls

    work = Path(tempfile.mkdtemp(prefix="serve_bench_"))
    milvus_port, http_port = free_port(), free_port()
    uri = f"http://127.0.0.1:{milvus_port}"
    # Both caches off: the bench cycles through 200 questions, and a cache would measure the cache (the direct pass
    # measures a repeated question on its own, with the result cache on).
    overrides = ["retrieval.query_cache_size=0", "retrieval.result_cache_size=0", *ns.set, f"milvus.uri={uri}",
                 f"serve.replicas={ns.replicas}", "serve.autoscaling=false",
                 f"serve.direct_ingress={str(ns.ingress != 'proxy').lower()}"]
    app_args = {m: {"config": ns.config, "set": [*overrides, f"retrieval.mode={m}"]} for m in ns.modes}
    cfgs = {m: config_from_args(a) for m, a in app_args.items()}
    cfg = cfgs[ns.modes[0]]
    lite_dir = Path(ns.db).resolve() if ns.db else work / "milvus.db"
    s, rc = cfg.serve, cfg.retrieval
    report: dict[str, Any] = {
        "chunks": ns.chunks, "replicas": ns.replicas, "modes": ns.modes, "clients": ns.clients,
        "num_cpus": s.num_cpus, "max_batch_size": s.max_batch_size, "batch_wait_timeout_s": s.batch_wait_timeout_s,
        "torch_threads": s.torch_threads, "fusion": rc.fusion, "candidates": rc.candidates,
        "concurrent_legs": rc.concurrent_legs, "duplicate_threshold": rc.duplicate_threshold,
        "ingress": ns.ingress, "load_avg_before": _load_avg(),
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
        # Ray first: its node must register within 30 s (ray/_private/node.py), which a Lite server opening 100k rows
        # beside it on a busy machine can make it miss.
        init_ray(cfg)
        serve.start(http_options={"host": "127.0.0.1", "port": http_port}, controller_options=controller_options(cfg))
        # The replicas reach the same directory through a server: several processes may then share it.
        exe = Path(sys.executable).with_name("milvus-lite")
        server = subprocess.Popen(
            [str(exe), "server", "--data-dir", str(lite_dir), "--host", "127.0.0.1", "--port", str(milvus_port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        _wait_port(milvus_port, 120)
        t0 = time.perf_counter()
        # One app per mode, each with its own replica(s), measured in turn (the idle one costs next to nothing).
        # Access logs off: one line per request would cost the CPU being measured and flood the terminal.
        for m in ns.modes:
            serve.run(build_app(app_args[m]), name=f"bench-{m}", route_prefix=f"/{m}",
                      logging_config={"enable_access_log": False})
        report["serve_start_s"] = round(time.perf_counter() - t0, 1)
        base = f"http://127.0.0.1:{http_port}"
        for m in ns.modes:
            asyncio.run(drive(f"{base}/{m}", 1, 2.0))  # warm-up: first searches load the collection and JIT paths
        # The store alone first, while the replicas are idle: the same collection, server and query mix, no HTTP.
        print(f"direct retrieval calls for up to {ns.direct_duration:.0f} s, modes in turn (no HTTP)", flush=True)
        report["direct_load_avg"] = _load_avg()
        direct = direct_store(cfgs, ns.direct_duration, server_pid=server.pid)
        bases = {m: {} for m in ns.modes}
        for m in ns.modes:
            if ns.ingress != "direct":
                bases[m]["proxy"] = f"{base}/{m}"
            if ns.ingress != "proxy":
                bases[m]["direct"] = replica_urls(f"bench-{m}", "127.0.0.1")[0]
        report["by_mode"] = {m: measure_endpoint(m, bases[m], ns, direct[m]) for m in ns.modes}
        report["hybrid_over_dense"] = ratios(report["by_mode"])
        report["load_avg_after"] = _load_avg()
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
    print("\n== serve benchmark ==")
    print(f"chunks {r['chunks']:,}  replicas {r['replicas']}  modes {','.join(r['modes'])}  clients {r['clients']}  "
          f"fusion {r.get('fusion')}  candidates {r.get('candidates')}  concurrent legs {r.get('concurrent_legs')}")
    print(f"load {r.get('load_s')} s ({r.get('load_rows_per_s')} rows/s); serve start {r.get('serve_start_s')} s; "
          f"store-alone pass (modes in turn) began at load average {r.get('direct_load_avg')}")
    for mode, m in (r.get("by_mode") or {}).items():
        d = m.get("direct") or {}
        print(f"\n-- {mode} (endpoint passes: load average {m.get('load_avg_before')} -> {m.get('load_avg_after')})")
        print(f"store alone (no HTTP, 1 caller): {d.get('queries')} queries, {d.get('queries_per_s')} q/s; retrieval "
              f"ms {d.get('retrieval_ms')}; search {d.get('search_ms')}; embedding {d.get('embed_ms')}")
        print(f"  split of the search, p50 ms: {d.get('split_ms_p50')}; store server CPU per question, mean ms: "
              f"{d.get('store_cpu_ms_mean')}")
        print(f"  a repeated question (result cache on), ms: {d.get('repeat_ms')} ({d.get('repeats_cached')} cached)")
        for how, e in (("through the proxy", m if "single_client" in m else None),
                       ("direct ingress", m.get("direct_ingress"))):
            if e:
                _print_passes(how, e)
    if r.get("hybrid_over_dense"):
        print(f"\nhybrid / dense, store p50: {r['hybrid_over_dense']}")
    print(f"load average before {r.get('load_avg_before')} after {r.get('load_avg_after')}; num_cpus {r.get('num_cpus')}")
    print(json.dumps(r, sort_keys=True))


def _print_passes(how: str, e: dict[str, Any]) -> None:
    one, many = e.get("single_client") or {}, e.get("concurrent") or {}
    print(f"endpoint {how}, 1 client: {one.get('ok')} ok = {one.get('requests_per_s')} req/s; latency ms "
          f"{one.get('latency_ms')}; overhead over the store-alone pass {e.get('endpoint_overhead_ms')}; "
          f"per request, latency minus the replica's embedding and store time {one.get('endpoint_own_ms')}")
    print(f"endpoint {how}, {many.get('clients')} clients: {many.get('ok')} ok of {many.get('requests')} in "
          f"{many.get('duration_s')} s = {many.get('requests_per_s')} req/s; latency ms {many.get('latency_ms')} "
          f"max {many.get('latency_ms_max')}; errors {many.get('errors') or 'none'}")
    print(f"  replica ms p50 {many.get('server_ms_p50')}; batch size mean {many.get('batch_size_mean')} "
          f"max {many.get('batch_size_max')}")


def main(argv: list[str] | None = None) -> int:
    ns = parse_args(argv)
    report = run(ns)
    print_report(report)
    if ns.json:
        Path(ns.json).write_text(json.dumps(report, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
