"""The dry run with several drivers in one job (``jobs.ingest --drivers N``, :mod:`jobs.drivers`) on one head.

Each driver is a process of its own running the same pipeline as the single-driver runs (the instant stages of
:mod:`jobs.bench.instant`, 10-page documents on the loopback S3 server, a ``milvus-lite server``), so each one's CPU
per document is read the same way: its process's CPU clock between its first and its last segment
(:class:`chunker.run.timing.RunTiming`'s window). Set against the single-driver runs' fit (:func:`job_fit`) this says
whether two drivers on one head slow each other beyond the cores they share: CPU per page is work, which sharing
cores does not change; contention would show as more of it. The job's ceiling with N drivers
(``fit.pages_per_s_job``) is N drivers each at the rate that fills a core at the cost measured beside the others.

:func:`drivers_step` runs in a fresh process (:mod:`jobs.bench.isolate`); each driver is ``python -m
jobs.bench.dryrun_drivers SPEC`` (:func:`main`), started by :func:`jobs.drivers.run_drivers`.
"""

from __future__ import annotations

import json
import os
import sys
import time
from contextlib import ExitStack
from dataclasses import asdict
from pathlib import Path
from typing import Any

# Above this cost ratio, the drivers slowed each other (below it: the noise of runs on a shared machine).
CONTENTION_TOLERANCE = 0.15


def bench_argv(delay_s: float):  # noqa: ANN201 - Callable[[DriverSpec], list[str]]
    """The command of one benchmark driver: the instant stages, ``delay_s`` per batch."""

    def argv(spec: Any) -> list[str]:
        d = asdict(spec)
        d["shard"] = [spec.shard.index, spec.shard.count]
        return [sys.executable, "-m", "jobs.bench.dryrun_drivers", json.dumps({**d, "delay_s": delay_s})]

    return argv


def main(argv: list[str] | None = None) -> int:
    """One driver of the benchmark's job: ``run_ingest`` for its shard with the instant stages."""
    from chunker.config import load_config
    from chunker.run.drivers import DriverRole
    from chunker.run.listing import Shard
    from jobs.bench.instant import InstantEmbedStage, delayed_convert_stage
    from jobs.ingest import run_ingest

    spec = json.loads((argv if argv is not None else sys.argv[1:])[0])
    cfg = load_config(spec["config_path"])
    run_ingest(cfg, spec["input_path"], spec["output"], force=spec["force"], verbose=False,
               shard=Shard(*spec["shard"]), role=DriverRole(spec["started_file"]),
               convert_stage=delayed_convert_stage(spec["delay_s"]), embed_stage=InstantEmbedStage)
    return 0


def drivers_step(cfg: dict[str, Any], corpus: str, workdir: str, drivers: int = 2, latency_ms: float = 0.0,
                 delay_s: float = 0.0, label: str = "drivers") -> dict[str, Any]:
    """One job of ``drivers`` drivers on a local runtime, S3 storage; returns the merged summary and each driver's."""
    import ray

    from chunker.run.layout import SUMMARY, RunStore
    from jobs.bench.dryrun_run import BUCKET, _upload, lite_server, prepare
    from jobs.bench.s3_server import S3Process
    from jobs.drivers import run_drivers

    config, work = prepare(cfg, workdir, label)
    out: dict[str, Any] = {"label": label, "drivers": drivers,
                           "load_avg_before": [round(x, 2) for x in os.getloadavg()]}
    with ExitStack() as stack:
        uri, _milvus = stack.enter_context(lite_server(work / "milvus"))
        config.milvus.uri = uri
        server = stack.enter_context(S3Process(latency_s=latency_ms / 1000))
        os.environ.update(server.env())  # before Ray starts: its workers and the drivers inherit them
        inputs, output = _upload(server, Path(corpus)), f"s3://{BUCKET}/runs/{label}"
        t0 = time.perf_counter()
        try:
            merged = run_drivers(config, inputs, output, drivers, driver_argv=bench_argv(delay_s))
        finally:
            ray.shutdown()
        out["wall_s"] = round(time.perf_counter() - t0, 2)
        out["summary"] = {k: merged[k] for k in ("documents", "ok", "failed", "pages", "chunks", "seconds",
                                                 "pages_per_s", "collection_rows", "cluster", "timing")}
        out["per_driver"] = [RunStore(f"{output}/shard-{i}-of-{drivers}").read_json(SUMMARY)
                             for i in range(1, drivers + 1)]
    out["load_avg_after"] = [round(x, 2) for x in os.getloadavg()]
    return out


def drivers_figures(raw: dict[str, Any]) -> dict[str, Any]:
    """Each driver's CPU-ms per document, its CPU share (core-seconds per second) and pages/s while its rows flowed
    (its first segment to its last), from its own summary."""
    per = []
    for s in raw["per_driver"]:
        win = s["timing"].get("driver_cpu_window") or {}
        pages_per_doc = s["pages"] / s["documents"] if s["documents"] else 0.0
        wpages, wall, cpu = win.get("pages", 0), win.get("wall_s", 0.0), win.get("process_cpu_s", 0.0)
        per.append({"output": Path(s["output"]).name, "documents": s["documents"], "pages": s["pages"],
                    "cpu_ms_per_doc": round(1000 * cpu / wpages * pages_per_doc, 3) if wpages else None,
                    "cpu_share": round(cpu / wall, 4) if wall else None,
                    "pages_per_s": round(wpages / wall, 1) if wall else None})
    m = raw["summary"]
    # "failed_documents", not "failed": a "failed" key marks a run that did not happen (see jobs.bench.dryrun).
    return {"label": raw["label"], "drivers": raw["drivers"], "documents": m["documents"],
            "failed_documents": m["failed"], "pages": m["pages"], "collection_rows": m["collection_rows"], "chunks": m["chunks"],
            "job_pages_per_s": m["pages_per_s"], "per_driver": per,
            "load_avg": [raw["load_avg_before"][0], raw["load_avg_after"][0]]}


def job_fit(fit: dict[str, Any], single: dict[str, Any] | None, multi: dict[str, Any] | None) -> dict[str, Any]:
    """``fit.pages_per_s_job``: the job's ceiling with the measured number of drivers, beside one driver's fitted
    ``pages_per_s``, and whether the drivers slowed each other beyond the cores they share.

    A driver's CPU share is a base it spends whatever the rate plus a cost per page (:func:`jobs.bench.dryrun.
    ceiling_fit`'s line, fitted on single-driver runs). Each of N drivers runs at about 1/N of the rate one would,
    so its CPU per document is higher by the base alone: comparing per-document costs would call that contention.
    So each driver's cost per page beyond the base, at its own rate, is set against the fitted cost per page: 1 when
    the drivers do not slow each other (sharing cores changes when work runs, not how much there is; contention,
    e.g. on a lock or a cache, shows as more CPU per page). The job's ceiling is then N drivers each at the rate that
    fills one core at that cost: N cores of the head for the drivers. Without a fit, the per-document ratio to the
    single ten-page run stands in (an upper bound on the contention)."""
    per = [d for d in (multi or {}).get("per_driver", []) if d.get("cpu_ms_per_doc")]
    if not per or "pages_per_s" not in fit:
        return {"note": "needs the fit (runs of 10-page documents at two rates or more) and the drivers run"}
    n, base, per_page = multi["drivers"], fit["base_cores"], fit["cpu_ms_per_page"] / 1000
    costs = [(d["cpu_share"] - base) / (per_page * d["pages_per_s"]) for d in per
             if d.get("cpu_share") and d.get("pages_per_s")]
    alone = (single or {}).get("driver_cpu_ms_per_doc")
    if costs:
        ratio, basis = sum(costs) / len(costs), "cost per page beyond the base, against the fit's"
    elif alone:
        ratio, basis = sum(d["cpu_ms_per_doc"] for d in per) / len(per) / alone, "CPU per document, against one alone"
    else:
        return {"note": "no driver's window of rows to measure"}
    ratio = round(ratio, 3)
    one = (1 - base) / (per_page * max(1.0, ratio))  # one driver on a core of its own, at the measured cost
    return {"drivers": n, "cpu_ms_per_doc_alone": alone,
            "cpu_ms_per_doc_per_driver": [d["cpu_ms_per_doc"] for d in per],
            "cpu_ratio": ratio, "ratio_basis": basis, "slow_each_other": ratio > 1 + CONTENTION_TOLERANCE,
            "pages_per_s": fit["pages_per_s"], "pages_per_s_job": round(n * min(one, fit["pages_per_s"]), 1),
            "head_cores_for_drivers": n}


def drivers_markdown(rep: dict[str, Any]) -> list[str]:
    d = rep.get("drivers_run")
    if not d:
        return []
    if "failed" in d:
        return ["", f"## Drivers in one job: failed: {d['failed']}"]
    j = (rep.get("fit") or {}).get("job") or {}
    lines = ["", f"## {d['drivers']} drivers in one job (one head)", "",
             f"{d['documents']} documents, {d['pages']} pages, {d['failed_documents']} failed; collection rows "
             f"{d['collection_rows']} (chunks {d['chunks']}); the job: {d['job_pages_per_s']} pages/s; load avg "
             f"{d['load_avg'][0]} / {d['load_avg'][1]}.", "",
             "| driver | documents | CPU-ms / doc | pages/s |", "| --- | --- | --- | --- |"]
    lines += [f"| {p['output']} | {p['documents']} | {p['cpu_ms_per_doc']} | {p['pages_per_s']} |"
              for p in d["per_driver"]]
    if "pages_per_s_job" in j:
        verdict = ("slowed each other beyond the cores they share" if j["slow_each_other"]
                   else "did not slow each other beyond the cores they share")
        lines += ["", f"One driver alone (ten-page): {j['cpu_ms_per_doc_alone']} CPU-ms / doc; each of {j['drivers']} "
                  f"beside each other: {j['cpu_ms_per_doc_per_driver']} (more per document at a lower rate each: "
                  f"the base). Cost ratio {j['cpu_ratio']} ({j['ratio_basis']}): the drivers {verdict}. Fitted "
                  f"ceiling of one driver **{j['pages_per_s']:,} pages/s**; of the job with {j['drivers']} drivers "
                  f"(fit.pages_per_s_job, {j['head_cores_for_drivers']} cores of the head for the drivers) "
                  f"**{j['pages_per_s_job']:,} pages/s**."]
    else:
        lines += ["", f"fit.pages_per_s_job: {j.get('note', 'not computed')}."]
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
