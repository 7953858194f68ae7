"""``python -m jobs.benchmark dryrun``: how fast can everything that passes through one place go?

The GPU stage scales by adding GPUs; the driver (row decoding, assembly, verdict, writer), the ledger and status
writes, the plan stage and the commits to Milvus do not. The dry run puts a blank-PDF corpus (many short documents
and a tail of long ones, :func:`jobs.bench.corpus.blank_corpus`) through the real pipeline (``jobs.ingest``'s
:func:`run_ingest`) with a converter that answers ready Markdown at once and an embedder that hashes
(:mod:`jobs.bench.instant`), so every other step runs for real, and measures it (:mod:`jobs.bench.dryrun_run`):

* ``local-disk``, ``local-s3``: a local Ray runtime; corpus, run folder and ledger on local disk, or on the loopback
  S3 server with ``--latency-ms`` added to every request (a real store's PUT takes tens of milliseconds);
* ``cluster-s3``: the same on a ``ray.cluster_utils.Cluster`` of ``--nodes`` nodes in this host;
* ``ten-page``: documents of exactly 10 pages on S3, the headline ceiling;
* ``flight-N``: 10-page documents whose batches each hold ``--delay-s`` (a GPU's time, no CPU), with N documents in
  flight (conversion actors x chains per actor): the ceiling against documents in flight;
* ``drivers``: 10-page documents on S3 through one job of two drivers (``jobs.ingest --drivers 2``) on one head: each
  driver's CPU-ms per document beside the other's, and the job's ceiling (:mod:`jobs.bench.dryrun_drivers`).

Figures (:func:`figures`): driver CPU-ms per document and per segment (the driver process, every thread, while
rows flow), where the driver thread's time goes (decode, assembly, Milvus load, stale deletes, ledger, status), the
writer and ledger wall time, object-store requests per document by operation and area, Milvus rows/s (a
``milvus-lite server``: the store's rate here, not a Milvus cluster's), the plan stage's CPU per segment, and the
ceiling each implies in pages/s and in GPUs kept busy at 5 pages/s each. The ceiling of a step that runs in one
place is what one core (the driver's GIL) or the stage's actors can do: CPU seconds, which the machine's load
distorts far less than wall seconds; load averages are printed beside.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
from pathlib import Path
from typing import Any

from chunker.config import ConfigError, load_config
from jobs.bench.corpus import REPO_ROOT, blank_corpus, dryrun_counts
from jobs.bench.dryrun_drivers import drivers_figures, job_fit
from jobs.bench.isolate import run_step
from jobs.bench.sizing import GPU_PAGES_PER_S, TARGET_PAGES_PER_S
SIZES: dict[str, dict[str, Any]] = {
    # docs: the heavy-tailed corpus; ten: 10-page documents; flight: documents in flight of the sweep (flight_docs
    # 10-page documents each); runs: which runs by default; sweep_storage: where the sweep's run folder lives
    "full": dict(docs=1200, ten=1200, flight=[4, 16, 64], flight_docs=300, max_pages=600, nodes=3,
                 runs="local-disk,local-s3,cluster-s3,ten-page,flight,drivers", sweep_storage="s3"),
    "quick": dict(docs=300, ten=300, flight=[4, 16, 64], flight_docs=120, max_pages=300, nodes=3,
                  runs="local-disk,local-s3,cluster-s3,ten-page,flight,drivers", sweep_storage="s3"),
    # the test suite's: every kind of run once (local and cluster runtime, local disk and S3), a handful of pages
    "tiny": dict(docs=10, ten=8, flight=[4], flight_docs=8, max_pages=70, nodes=2, runs="cluster-s3,flight,drivers",
                 sweep_storage="local"),
}
PYTHON_KINDS = ("driver thread", "ray data", "writer threads")  # thread kinds of jobs.bench.cpu.thread_kind
# The thread kinds each run reports (jobs.bench.cpu.THREAD_KINDS less the benchmark's own samplers), every one of
# them in every run, 0.0 where none of its threads was read in the window.
REPORTED_KINDS = ("driver thread", "ray data", "writer threads", "other")
# A window shorter than this many of the thread sampler's periods is split by thread from readings taken mostly
# outside it: reported, but said to be too short to measure.
MIN_SAMPLING_PERIODS = 3
INTAKE_SLOTS = 6  # intake tasks a local runtime can run beside the actors: they wait on the store, not on a CPU


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m jobs.benchmark dryrun", description=__doc__.split("\n")[0])
    p.add_argument("--config", default=str(REPO_ROOT / "configs" / "local.yaml"))
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--output", default="output/dryrun", help="report folder (corpora and runs go under it)")
    p.add_argument("--size", default="full", choices=list(SIZES))
    p.add_argument("--runs", default=None, help="which runs, comma-separated, of local-disk, local-s3, cluster-s3, "
                   "ten-page, flight (the in-flight sweep), drivers (two drivers in one job); default: the size's")
    p.add_argument("--latency-ms", type=float, default=20.0, help="added to every S3 request")
    p.add_argument("--nodes", type=int, default=None, help="nodes of the cluster run (default: the size's)")
    p.add_argument("--delay-s", type=float, default=1.0, help="seconds each batch holds in the in-flight sweep")
    p.add_argument("--docs", type=int, default=None, help="documents of the mixed and ten-page corpora (default: "
                   "the size's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout-s", type=float, default=3600.0, help="per run")
    p.add_argument("--resume", action="store_true",
                   help="keep the runs already measured in --output (raw-<run>.json); run only the others")
    p.add_argument("--report-only", action="store_true",
                   help="run nothing: the report of the runs already measured in --output")
    return p.parse_args(argv)


def segments_of(counts: list[int], segment_pages: int) -> int:
    return sum(max(1, math.ceil(n / segment_pages)) for n in counts)


def _ms(seconds: float, n: int) -> float:
    return round(1000 * seconds / n, 3) if n else 0.0


def _per_s(n: float, seconds: float) -> float:
    return round(n / seconds, 1) if seconds > 0 else float("inf")


def figures(raw: dict[str, Any], counts: list[int], segment_pages: int, plan_actors: int) -> dict[str, Any]:
    """The figures of one run (see the module docstring) from what :func:`dryrun_step` measured.

    The driver's CPU is read between the first segment's arrival and the last (the window): Ray Data starting its
    actors costs the driver CPU once per run, not per document. It is the process's CPU by thread kind (the driver
    thread, the writer's threads, Ray Data's, the rest), the benchmark's own samplers left out. Per document means
    per page in the window times the corpus's pages per document; per segment, over the segments in the window.

    A window shorter than ``MIN_SAMPLING_PERIODS`` of the thread sampler's period (the tiny run's lasts milliseconds)
    cannot be split by thread: the driver's total and its driver thread then come from the process's and the thread's
    own CPU clocks read at the window's ends (RunTiming), every kind is still reported (interpolated, 0.0 where
    nothing was read) and ``driver_threads_note`` says the split was too short to measure."""
    s = raw["summary"]
    t = s["timing"]
    docs, pages, chunks = s["documents"], s["pages"], s["chunks"]
    segs = segments_of(counts, segment_pages)
    wall, cpu = dict(t["driver_steps_s"]), dict(t["driver_steps_cpu_s"])
    if "ledger_and_status" in wall:  # the writer before its commit thread: one step for both, in the driver thread
        wall["ledger"], cpu["ledger"] = wall["ledger_and_status"], cpu["ledger_and_status"]
    threaded = "commit_wait" in wall  # commits in a thread of their own (else in the driver thread)
    in_thread = ("decode", "assemble") if threaded else ("decode", "assemble", "load", "delete_stale", "ledger")
    win = t.get("driver_cpu_window") or {}
    sampled = {k: v for k, v in (raw.get("driver_threads_window_cpu_s") or {}).items() if k != "benchmark"}
    kinds = {**dict.fromkeys(REPORTED_KINDS, 0.0), **sampled}  # raw files of earlier runs may lack a kind
    period = raw.get("driver_threads_sampling_s", 1.0)  # ThreadSampler's default, for raw files written before
    measured = bool(sampled) and win.get("wall_s", 0.0) >= MIN_SAMPLING_PERIODS * period
    window_cpu = sum(kinds.values()) if measured else win.get("process_cpu_s", 0.0)
    wpages, wsegs = win.get("pages", 0), win.get("segments", 0)
    pages_per_doc = pages / docs if docs else 0.0
    per_page = window_cpu / wpages if wpages else 0.0  # driver CPU seconds per page while rows flow

    def per_doc(seconds: float) -> float:
        return round(1000 * seconds / wpages * pages_per_doc, 3) if wpages else 0.0

    steps = {k: _ms(cpu.get(k, 0.0), docs) for k in ("decode", "assemble", "load", "delete_stale", "ledger",
                                                       "status")}
    driver_thread = kinds["driver thread"] if measured else win.get("thread_cpu_s", 0.0)
    out: dict[str, Any] = {
        "label": raw["label"], "storage": raw["storage"], "runtime": raw["runtime"],
        "documents": docs, "segments": segs, "pages": pages, "chunks": chunks, "failed_documents": s["failed"],
        "collection_rows": s["collection_rows"], "pages_per_doc": round(pages_per_doc, 2),
        "chunks_per_page": round(chunks / pages, 2) if pages else 0.0,
        "pipeline_wall_s": round(wall.get("pipeline", 0.0), 2), "window_s": win.get("wall_s"),
        "pages_per_s": _per_s(wpages, win.get("wall_s", 0.0)),
        "load_avg": [raw["load_avg_before"][0], raw["load_avg_after"][0]],
        "driver_cpu_ms_per_doc": per_doc(window_cpu),
        "driver_cpu_ms_per_segment": _ms(window_cpu, wsegs),
        "driver_cpu_ms_per_page": round(1000 * per_page, 3),
        "driver_cpu_ms_per_doc_by_thread": {k: per_doc(v) for k, v in sorted(kinds.items())},
        "driver_threads_measured": measured,
        # core-seconds per second while rows flowed: what the fit across rates (ceiling_fit) is made of
        "driver_cpu_share": round(window_cpu / win["wall_s"], 4) if win.get("wall_s") else None,
        "driver_cpu_share_by_thread": {k: round(v / win["wall_s"], 4) for k, v in sorted(kinds.items())}
        if win.get("wall_s") else {},
        # The writer's steps (each in the thread that runs it), ms of CPU per document over the whole run; what
        # else the driver thread did is Ray Data's iterator handing rows over.
        "driver_cpu_ms_per_doc_by_step": {
            **steps, "iterate": round(max(0.0, per_doc(driver_thread) - sum(steps[k] for k in in_thread)), 3)},
        "writer_wall_ms_per_doc": {k: _ms(wall.get(k, 0.0), docs) for k in ("load", "delete_stale", "ledger",
                                                                               "status", "commit_wait")},
        "commits_threaded": threaded,
        "milvus_rows_per_s": _per_s(chunks, wall.get("load", 0.0)),
        "milvus_server_cpu_ms_per_row": _ms(raw.get("milvus_server_cpu_s", 0.0), chunks),
    }
    if not measured:
        out["driver_threads_note"] = (
            f"window {win.get('wall_s', 0.0)} s, shorter than {MIN_SAMPLING_PERIODS} sampling periods of {period} s: "
            "too short to measure by thread (split interpolated; totals from the process's CPU clock)")
    if "requests" in raw:
        r = raw["requests"]
        out["requests_per_doc"] = round(r["total"] / docs, 2) if docs else 0.0
        out["requests_per_doc_by_area"] = {k: round(v / docs, 2) for k, v in sorted(r["by_area"].items())}
        out["requests_per_doc_by_op"] = {k: round(v / docs, 2) for k, v in sorted(r["by_op"].items())}
        out["s3_server_cpu_ms_per_doc"] = _ms(raw.get("s3_server_cpu_s", 0.0), docs)
    by = raw.get("cpu", {}).get("cpu_s_by_process", {})
    plan_cpu = by.get("actor:PlanStage", 0.0)
    out["plan_cpu_ms_per_segment"] = _ms(plan_cpu, segs)
    out["cpu_s_by_process"] = by
    # Ceilings, in pages/s of this corpus's documents: what each one-place step could pass at most. The driver
    # process gets one core's worth of Python (the GIL); the driver thread's own path is serial, waits on the
    # stores included (with commits in the driver thread, every Milvus and ledger round trip is on it).
    serial_s = sum(wall.get(k, 0.0) for k in in_thread) + max(
        0.0, driver_thread * docs / wpages * pages_per_doc - sum(cpu.get(k, 0.0) for k in in_thread)) if wpages else 0
    ceilings = {
        "driver CPU (1 core)": 1.0 / per_page if per_page else None,
        "driver thread, wall (waits included)": pages / serial_s if serial_s > 0 else None,
        "plan stage CPU": plan_actors * pages / plan_cpu if plan_cpu else None,
        "Milvus load (lite server)": out["milvus_rows_per_s"] / out["chunks_per_page"]
        if chunks and wall.get("load") else None,
    }
    out["ceilings_pages_per_s"] = {k: round(v, 1) for k, v in ceilings.items() if v is not None}
    driver = {k: v for k, v in out["ceilings_pages_per_s"].items() if k.startswith("driver")}
    cap_step = min(driver, key=driver.get) if driver else None
    out["driver_ceiling"] = {"step": cap_step, "pages_per_s": driver.get(cap_step),
                             "gpus_at_5": round(driver[cap_step] / GPU_PAGES_PER_S) if cap_step else None}
    return out


def _cfg_for(base: Any, in_flight: int | None = None) -> dict[str, Any]:
    """The run's config: ``in_flight`` chains over conversion actors of at most 32 each; a local runtime with
    ``INTAKE_SLOTS`` task slots beside the actors, and small intake tasks, so intake (a few round trips to the
    store per document) keeps up with what the driver is measured at."""
    cfg = base.model_copy(deep=True)
    r = cfg.ray
    if in_flight:
        r.convert_actors = max(1, math.ceil(in_flight / 32))
        r.convert_concurrency = math.ceil(in_flight / r.convert_actors)
    r.intake_block_rows = 2
    actors = r.convert_actors * r.convert_cpus() + (r.plan_actors + r.embed_actors) * r.stage_num_cpus
    r.local_num_cpus = math.ceil(actors - 1e-9) + INTAKE_SLOTS
    return cfg.model_dump(mode="json")


def run_all(ns: argparse.Namespace) -> dict[str, Any]:
    base = load_config(ns.config, ["milvus.load_mode=upsert", *ns.overrides])
    size = dict(SIZES[ns.size])
    if ns.docs:
        size["docs"] = size["ten"] = ns.docs
    nodes = ns.nodes or size["nodes"]
    out = Path(ns.output).resolve()
    work = out / "work"
    mixed = dryrun_counts(size["docs"], ns.seed, max_pages=size["max_pages"])
    ten = [10] * size["ten"]
    corpora = {"mixed": mixed, "ten": ten}
    wanted = [r.strip() for r in (ns.runs or size["runs"]).split(",") if r.strip()]
    plan = []  # (label, corpus, step kwargs, config)
    if "local-disk" in wanted:
        plan.append(("local-disk", "mixed", dict(storage="local", runtime="local"), _cfg_for(base)))
    if "local-s3" in wanted:
        plan.append(("local-s3", "mixed", dict(storage="s3", runtime="local"), _cfg_for(base)))
    if "cluster-s3" in wanted:
        plan.append(("cluster-s3", "mixed", dict(storage="s3", runtime="cluster", nodes=nodes), _cfg_for(base)))
    if "ten-page" in wanted:
        plan.append(("ten-page", "ten", dict(storage="s3", runtime="local"), _cfg_for(base)))
    if "flight" in wanted:
        for n in size["flight"]:
            corpora[f"flight{n}"] = [10] * size["flight_docs"]
            plan.append((f"flight-{n}", f"flight{n}", dict(storage=size["sweep_storage"], runtime="local",
                                                           delay_s=ns.delay_s, in_flight=n), _cfg_for(base, n)))
    if "drivers" in wanted:
        corpora["drivers"] = [10] * size["ten"]
    for name, counts in corpora.items():
        if name == "drivers" or any(p[1] == name for p in plan):
            # each corpus its own bytes (seed), so no two runs share a doc_id
            blank_corpus(work / f"corpus-{name}", counts, ns.seed + sum(map(ord, name)))
    report: dict[str, Any] = {"meta": {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "size": ns.size, "latency_ms": ns.latency_ms, "nodes": nodes, "delay_s": ns.delay_s,
        "corpus": {"mixed": _describe(mixed), "ten": _describe(ten)}, "intake_slots": INTAKE_SLOTS}, "runs": []}
    for label, corpus, kwargs, cfg in plan:
        in_flight = kwargs.pop("in_flight", None)
        counts = corpora[corpus]
        print(f"dry run {label}: {len(counts)} documents, {sum(counts)} pages ({kwargs})", flush=True)
        kept = out / f"raw-{label}.json"
        for attempt in range(3):
            if (ns.resume or ns.report_only) and kept.is_file():  # measured by an earlier invocation
                raw = json.loads(kept.read_text())
                break
            if ns.report_only:
                raw = {"failed": f"{label}: not measured in {out}"}
                break
            raw = run_step(f"dryrun-{label}", "jobs.bench.dryrun_run:dryrun_step",
                           dict(cfg=cfg, corpus=str(work / f"corpus-{corpus}"), workdir=str(work / "runs"),
                                latency_ms=ns.latency_ms if kwargs["storage"] == "s3" else 0.0, label=label,
                                **kwargs), out, timeout_s=ns.timeout_s)
            # Ray gives a node a fixed 30 s to register (ray/_private/node.py); a loaded machine can miss it.
            if "timed out during startup" not in str(raw.get("failed", "")):
                break
            print(f"  Ray did not start in time (attempt {attempt + 1}); again", flush=True)
        if "failed" in raw:
            if ns.report_only:
                continue
            report["runs"].append({"label": label, "failed": raw["failed"], "log": raw.get("log")})
            print(f"  failed: {raw['failed']}", flush=True)
            continue
        if not kept.is_file():
            kept.write_text(json.dumps(raw, indent=2, default=str))
        ray_cfg = cfg["ray"]
        fig = figures(raw, counts, cfg["intake"]["segment_pages"], ray_cfg.get("plan_actors", 1))
        fig["in_flight"] = in_flight or ray_cfg["convert_actors"] * ray_cfg["convert_concurrency"]
        report["runs"].append(fig)
        c = fig["driver_ceiling"]
        print(f"  {fig['pages_per_s']} pages/s through; driver {fig['driver_cpu_ms_per_doc']} CPU-ms/doc; "
              f"ceiling {c['pages_per_s']} pages/s ({c['step']}), {c['gpus_at_5']} GPUs", flush=True)
    report["fit"] = ceiling_fit(report["runs"])
    if "drivers" in wanted:
        report["drivers_run"] = _drivers_run(ns, base, work, out, len(corpora["drivers"]))
        single = next((r for r in report["runs"] if r.get("label") == "ten-page" and "failed" not in r), None)
        job = job_fit(report["fit"], single, report["drivers_run"] if "failed" not in report["drivers_run"] else None)
        report["fit"]["job"] = job
        report["fit"]["pages_per_s_job"] = job.get("pages_per_s_job")
    return report


def _drivers_run(ns: argparse.Namespace, base: Any, work: Path, out: Path, docs: int) -> dict[str, Any]:
    """Two drivers in one job over the drivers corpus (see jobs.bench.dryrun_drivers), or why it failed."""
    kept = out / "raw-drivers-2.json"
    print(f"dry run drivers-2: {docs} documents of 10 pages, two drivers in one job", flush=True)
    if (ns.resume or ns.report_only) and kept.is_file():
        raw = json.loads(kept.read_text())
    elif ns.report_only:
        return {"failed": f"drivers-2: not measured in {out}"}
    else:
        raw = run_step("dryrun-drivers-2", "jobs.bench.dryrun_drivers:drivers_step",
                       dict(cfg=_cfg_for(base), corpus=str(work / "corpus-drivers"), workdir=str(work / "runs"),
                            drivers=2, latency_ms=ns.latency_ms, label="drivers-2"), out, timeout_s=ns.timeout_s)
        if "failed" in raw:
            print(f"  failed: {raw['failed']}", flush=True)
            return {"failed": raw["failed"], "log": raw.get("log")}
        kept.write_text(json.dumps(raw, indent=2, default=str))
    fig = drivers_figures(raw)
    print(f"  the job {fig['job_pages_per_s']} pages/s; per driver CPU-ms/doc "
          f"{[d['cpu_ms_per_doc'] for d in fig['per_driver']]}", flush=True)
    return fig


def _line(points: list[tuple[float, float]]) -> tuple[float, float] | None:
    """Least-squares (intercept, slope) of y on x; None with fewer than two distinct x."""
    if len({x for x, _ in points}) < 2:
        return None
    n = len(points)
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    b = sum((x - mx) * (y - my) for x, y in points) / sxx
    return my - b * mx, b


def ceiling_fit(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The driver's CPU share (core-seconds per second) against pages/s over the runs of 10-page documents: a base
    the driver spends whatever the rate (Ray Data's executor polls, the clients' threads tick) plus a cost per page.
    One core (the GIL) is reached at (1 - base) / per-page: the ceiling, in pages/s of 10-page documents. The same
    line per thread kind says where the per-page cost goes."""
    ten = [r for r in runs if "failed" not in r and r["pages_per_doc"] == 10 and r.get("driver_cpu_share")]
    total = _line([(r["pages_per_s"], r["driver_cpu_share"]) for r in ten])
    out: dict[str, Any] = {"runs": [r["label"] for r in ten], "points": [
        [r["pages_per_s"], r["driver_cpu_share"]] for r in ten]}
    if total is None or total[1] <= 0:
        out["note"] = "fewer than two rates of 10-page documents (or no cost per page): no fit"
        return out
    base, per_page = total
    ceiling = (1 - base) / per_page
    out.update(base_cores=round(base, 4), cpu_ms_per_page=round(1000 * per_page, 3),
               cpu_ms_per_10_page_doc=round(10_000 * per_page, 2), pages_per_s=round(ceiling, 1),
               gpus_at_5=round(ceiling / GPU_PAGES_PER_S), meets_target=ceiling >= TARGET_PAGES_PER_S)
    # Python threads only: the driver thread, Ray Data's and the writer's hold the GIL while they work; the rest
    # (Ray's core worker, gRPC and object-store clients, native threads) can run beside them on another core.
    py = _line([(r["pages_per_s"], sum(v for k, v in r["driver_cpu_share_by_thread"].items() if k in PYTHON_KINDS))
                for r in ten])
    if py is not None and py[1] > 0:
        out["python_threads"] = {"base_cores": round(py[0], 4), "cpu_ms_per_10_page_doc": round(10_000 * py[1], 2),
                                 "pages_per_s": round((1 - py[0]) / py[1], 1)}
    kinds = sorted({k for r in ten for k in r["driver_cpu_share_by_thread"]})
    by_kind = {}
    for k in kinds:
        fit = _line([(r["pages_per_s"], r["driver_cpu_share_by_thread"].get(k, 0.0)) for r in ten])
        if fit is not None:
            by_kind[k] = {"base_cores": round(fit[0], 4), "cpu_ms_per_10_page_doc": round(10_000 * fit[1], 2)}
    out["by_thread"] = by_kind
    return out


def _describe(counts: list[int]) -> dict[str, Any]:
    s = sorted(counts)
    return {"documents": len(s), "pages": sum(s), "median": s[len(s) // 2] if s else 0, "max": s[-1] if s else 0}


def main(argv: list[str] | None = None) -> int:
    ns = parse_args(list(sys.argv[1:] if argv is None else argv))
    try:
        report = run_all(ns)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from jobs.bench.dryrun_drivers import drivers_markdown
    from jobs.bench.dryrun_report import markdown, plot

    out = Path(ns.output)
    try:
        report["plot"] = plot(report, out / "dryrun_ceiling.png")
    except Exception as exc:  # noqa: BLE001 - the figures still get written
        report["plot"] = f"failed: {type(exc).__name__}: {exc}"
    (out / "dryrun.json").write_text(json.dumps(report, indent=2, default=str))
    md = markdown(report) + "\n".join(drivers_markdown(report)) + "\n"
    (out / "dryrun.md").write_text(md)
    print(md)
    return 0 if all("failed" not in r for r in [*report["runs"], report.get("drivers_run") or {}]) else 1
