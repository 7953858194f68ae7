"""The dry run with several drivers in one job (``jobs.ingest --drivers N``, :mod:`jobs.drivers`) on one head.

Each driver is a process of its own running the same pipeline as the single-driver runs (the instant stages of
:mod:`jobs.bench.instant`, 10-page documents on the loopback S3 server, a ``milvus-lite server``), so each one's CPU
per document is read the same way: its process's CPU clock between its first and its last segment
(:class:`chunker.run.timing.RunTiming`'s window). Against the single-driver ``ten-page`` run this says whether two
drivers on one head slow each other beyond the cores they share: CPU-ms per document is work, which sharing cores
does not change; contention would show as more of it. The job's ceiling with N drivers (``fit.pages_per_s_job``) is
N times one driver's fitted ceiling, divided by that cost ratio where above 1.

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
    """Each driver's CPU-ms per document and pages/s while its rows flowed, from its own summary."""
    per = []
    for s in raw["per_driver"]:
        win = s["timing"].get("driver_cpu_window") or {}
        pages_per_doc = s["pages"] / s["documents"] if s["documents"] else 0.0
        wpages = win.get("pages", 0)
        per.append({"output": Path(s["output"]).name, "documents": s["documents"], "pages": s["pages"],
                    "cpu_ms_per_doc": round(1000 * win.get("process_cpu_s", 0.0) / wpages * pages_per_doc, 3)
                    if wpages else None,
                    "pages_per_s": round(wpages / win["wall_s"], 1) if win.get("wall_s") else None})
    m = raw["summary"]
    return {"label": raw["label"], "drivers": raw["drivers"], "documents": m["documents"], "failed": m["failed"],
            "pages": m["pages"], "collection_rows": m["collection_rows"], "chunks": m["chunks"],
            "job_pages_per_s": m["pages_per_s"], "per_driver": per,
            "load_avg": [raw["load_avg_before"][0], raw["load_avg_after"][0]]}


def job_fit(fit: dict[str, Any], single: dict[str, Any] | None, multi: dict[str, Any] | None) -> dict[str, Any]:
    """``fit.pages_per_s_job``: the job's ceiling with the measured number of drivers, beside one driver's fitted
    ``pages_per_s``; and the CPU-per-document ratio of a driver beside another against one alone (same corpus)."""
    costs = [d["cpu_ms_per_doc"] for d in (multi or {}).get("per_driver", []) if d.get("cpu_ms_per_doc")]
    alone = (single or {}).get("driver_cpu_ms_per_doc")
    if not costs or not alone or "pages_per_s" not in fit:
        return {"note": "needs the fit, the ten-page run and the drivers run"}
    ratio = sum(costs) / len(costs) / alone
    n = multi["drivers"]
    return {"drivers": n, "cpu_ms_per_doc_alone": alone, "cpu_ms_per_doc_per_driver": costs,
            "cpu_ratio": round(ratio, 3), "pages_per_s": fit["pages_per_s"],
            "pages_per_s_job": round(n * fit["pages_per_s"] / max(1.0, ratio), 1)}


def drivers_markdown(rep: dict[str, Any]) -> list[str]:
    d = rep.get("drivers_run")
    if not d:
        return []
    if "failed" in d:
        return ["", f"## Drivers in one job: failed: {d['failed']}"]
    j = (rep.get("fit") or {}).get("job") or {}
    lines = ["", f"## {d['drivers']} drivers in one job (one head)", "",
             f"{d['documents']} documents, {d['pages']} pages, {d['failed']} failed; collection rows "
             f"{d['collection_rows']} (chunks {d['chunks']}); the job: {d['job_pages_per_s']} pages/s; load avg "
             f"{d['load_avg'][0]} / {d['load_avg'][1]}.", "",
             "| driver | documents | CPU-ms / doc | pages/s |", "| --- | --- | --- | --- |"]
    lines += [f"| {p['output']} | {p['documents']} | {p['cpu_ms_per_doc']} | {p['pages_per_s']} |"
              for p in d["per_driver"]]
    if "pages_per_s_job" in j:
        lines += ["", f"One driver alone (ten-page): {j['cpu_ms_per_doc_alone']} CPU-ms / doc; beside another: "
                  f"{j['cpu_ms_per_doc_per_driver']} (ratio {j['cpu_ratio']}). Fitted ceiling of one driver "
                  f"**{j['pages_per_s']:,} pages/s**; of the job with {j['drivers']} drivers "
                  f"(fit.pages_per_s_job) **{j['pages_per_s_job']:,} pages/s**."]
    else:
        lines += ["", f"fit.pages_per_s_job: {j.get('note', 'not computed')}."]
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
