"""One dry run: the real ``jobs.ingest`` pipeline on a blank-PDF corpus with the instant stages (:mod:`jobs.bench.instant`),
on a local Ray runtime or a ``ray.cluster_utils.Cluster`` of several nodes, with its corpus, run folder and ledger on
local disk or on the loopback S3 server (:mod:`jobs.bench.s3_server`, a process of its own), and Milvus as a
``milvus-lite server`` process (the driver is then a client, as with a Milvus server: the store's own CPU is never
counted as the driver's).

:func:`dryrun_step` is what the benchmark runs, in a fresh process each time (:mod:`jobs.bench.isolate`); it returns
the raw measurements (JSON values), and :mod:`jobs.bench.dryrun` turns them into figures.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Iterator

from chunker.config import Config
from chunker.run.layout import AREAS, BATCHES, CHUNKS, DOCUMENTS, ELEMENTS, RunStore

BUCKET = "dryrun"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def lite_server(data_dir: Path, timeout_s: float = 120.0) -> Iterator[tuple[str, subprocess.Popen]]:
    """A ``milvus-lite server`` on a free loopback port over ``data_dir``; stopped (by its pid) on exit."""
    exe = Path(sys.executable).with_name("milvus-lite")
    cli = str(exe) if exe.exists() else shutil.which("milvus-lite")
    if cli is None:
        raise RuntimeError("the milvus-lite command is not installed (pip install milvus-lite)")
    port = _free_port()
    proc = subprocess.Popen([cli, "server", "--data-dir", str(data_dir), "--host", "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"milvus-lite server did not listen on port {port}") from None
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}", proc
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=20)


def proc_cpu_s(pid: int) -> float:
    """user + system CPU seconds of a process (0 when unreadable)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _upload(server: Any, corpus: Path) -> str:
    """The corpus under ``s3://dryrun/corpus/`` (16 uploads at a time: the store's latency is not the benchmark)."""
    client = server.client()
    client.create_bucket(Bucket=BUCKET)
    files = sorted(corpus.glob("*.pdf"))
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda p: client.put_object(Bucket=BUCKET, Key=f"corpus/{p.name}", Body=p.read_bytes()),
                      files))
    return f"s3://{BUCKET}/corpus/"


def area_of(key: str) -> str:
    """Which part of the run an object key (or a listing's prefix) belongs to: the inputs, an area of the run
    folder (:mod:`chunker.run.layout`), another file of the run (summary, reports), or the bucket."""
    if key.startswith("corpus/"):
        return "inputs"
    parts = key.split("/")
    if len(parts) > 2 and parts[2] in AREAS:  # runs/{label}/{area}/...
        return parts[2]
    return "run" if key.startswith("runs/") else "bucket"


@contextmanager
def _cluster(nodes: int, cpus_per_node: int) -> Iterator[Any]:
    """A head and ``nodes`` worker nodes in this host, joined by this process; its processes stopped on exit
    (``Cluster.shutdown`` kills the processes it started, no ``ray stop``)."""
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=False)
    try:
        cluster.add_node(num_cpus=cpus_per_node, include_dashboard=False)
        for _ in range(nodes - 1):
            cluster.add_node(num_cpus=cpus_per_node)
        cluster.wait_for_nodes(timeout=180)
        ray.init(address=cluster.address, log_to_driver=False, logging_level="WARNING")
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


def prepare(cfg: dict[str, Any], workdir: str, label: str) -> tuple[Config, Path]:
    """A step's config and a fresh work folder of its own; Ray without auth and the hub offline, for its children."""
    os.environ["RAY_AUTH_MODE"] = "disabled"
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    work = Path(workdir) / label
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    return Config.model_validate(cfg), work


def dryrun_step(cfg: dict[str, Any], corpus: str, workdir: str, storage: str, runtime: str, nodes: int = 3,
                cpus_per_node: int = 2, latency_ms: float = 0.0, delay_s: float = 0.0,
                label: str = "run") -> dict[str, Any]:
    """One pipeline run; returns its summary, timing, CPU by process and object-store requests by operation."""
    import ray

    from jobs.bench.cpu import CpuSampler, ThreadSampler
    from jobs.bench.instant import InstantEmbedStage, delayed_convert_stage
    from jobs.ingest import run_ingest

    config, work = prepare(cfg, workdir, label)
    out: dict[str, Any] = {"label": label, "storage": storage, "runtime": runtime, "latency_ms": latency_ms,
                           "delay_s": delay_s, "load_avg_before": [round(x, 2) for x in os.getloadavg()]}
    with ExitStack() as stack:
        uri, milvus = stack.enter_context(lite_server(work / "milvus"))
        config.milvus.uri = uri
        server = None
        if storage == "s3":
            from jobs.bench.s3_server import S3Process

            server = stack.enter_context(S3Process(latency_s=latency_ms / 1000))
            os.environ.update(server.env())  # before Ray starts: its workers inherit them
            inputs, output = _upload(server, Path(corpus)), f"s3://{BUCKET}/runs/{label}"
            server.clear()
        else:
            inputs, output = corpus, f"file://{work / 'run'}"
        if runtime == "cluster":
            stack.enter_context(_cluster(nodes, cpus_per_node))
            out["nodes"] = [{k: n["Resources"].get(k, 0) for k in ("CPU", "GPU")} for n in ray.nodes() if n["Alive"]]
        milvus_cpu0 = proc_cpu_s(milvus.pid)
        s3_cpu0 = server.cpu_s() if server is not None else 0.0
        t0 = time.perf_counter()
        # A first run into a fresh output (no --force): intake asks the ledger about every document, as it would.
        with CpuSampler(interval_s=2.0) as cpu, ThreadSampler() as threads:
            try:
                summary = run_ingest(config, inputs, output, verbose=False,
                                     convert_stage=delayed_convert_stage(delay_s), embed_stage=InstantEmbedStage)
                cpu.sample()  # before the workers exit
                by_name = threads.read(by_name=True)
                out["driver_threads_cpu_s"] = dict(sorted(((k, round(v, 2)) for k, v in by_name.items() if v >= 0.05),
                                                          key=lambda kv: -kv[1]))
            finally:
                if runtime != "cluster":
                    ray.shutdown()
        t = summary.timing
        if t.get("first_segment_s") is not None:
            # The driver's CPU by thread kind while rows flowed (RunTiming's t0 is within microseconds of t0 here).
            out["driver_threads_window_cpu_s"] = threads.between(t0 + t["first_segment_s"], t0 + t["last_segment_s"])
            out["driver_threads_window_cpu_s_by_name"] = threads.between(t0 + t["first_segment_s"],
                                                                         t0 + t["last_segment_s"], by_name=True)
            out["driver_threads_sampling_s"] = threads.interval_s  # what the window's length is judged against
        out["wall_s"] = round(time.perf_counter() - t0, 2)
        out["load_avg_after"] = [round(x, 2) for x in os.getloadavg()]
        out["milvus_server_cpu_s"] = round(proc_cpu_s(milvus.pid) - milvus_cpu0, 2)
        out["summary"] = {k: getattr(summary, k) for k in (
            "documents", "ok", "partial", "failed", "skipped", "pages", "chunks", "seconds", "pages_per_s",
            "collection_rows", "load_mode", "settings", "cluster", "timing", "problems_total")}
        out["summary"]["problems"] = summary.problems[:5]
        out["cpu"] = cpu.report()
        if server is not None:
            ops = server.ops(BUCKET)
            out["s3_server_cpu_s"] = round(server.cpu_s() - s3_cpu0, 2)
            out["requests"] = {"total": len(ops), "by_op": dict(Counter(r.op for r in ops)),
                               "by_area": dict(Counter(area_of(r.key or r.prefix) for r in ops)),
                               "by_area_op": dict(Counter(f"{area_of(r.key or r.prefix)}:{r.op}" for r in ops))}
        else:
            store = RunStore(output)
            out["run_files"] = {a: store.count(a) for a in (BATCHES, ELEMENTS, CHUNKS, DOCUMENTS)}
    return out
