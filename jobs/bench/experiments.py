"""The benchmark's experiments: (a) efficiency, (b) scaling, (c) document length, (d) long documents on engines
(simulated or real), and the CPU stage costs; each returns a section of the report."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from chunker.backends.simulated import EngineSpec, SimulatedBackend
from chunker.config import Config
from chunker.eval.synthetic import SyntheticDoc, make_corpus
from jobs.bench.engine import EngineRun, Order, run_engines

TARGETS = {
    "efficiency": ">= 0.95 of engine capacity",
    "scaling": ">= 0.90 of linear at 8 actors",
    "doc_length": "per-page time flat within +-10 % from 10 to 1,000 pages",
    "long_doc": "2,000-page document within 3x the 64-page one's wall time",
    "stages": "<= 30 ms CPU per page for render+encode+parse+plan; >= 10 pages/s end to end on 2 cores, and at least "
              "the naive pipeline's whole-run pages/s",
}

# Sizes per run size. (a) a heavy-tailed corpus of ``eff_docs`` documents (longest ``eff_max`` pages) on one engine,
# in arrival order and longest-first; (b) weak scaling with ``per_actor`` documents per engine and strong scaling on
# the (a) corpus, over ``actors`` engines; (c) probes of each length among ``bg_docs`` background documents, about
# ``per_length`` probe pages per length; (d) the long and the short document alone; (e) the embedding sample, the
# embedding micro-benchmark's (passages, repeats), and how many CloudWay copies the end-to-end runs ingest.
# The engines see the full render's token load, but nothing is rendered (``render``) when the corpus is thousands of
# pages: only engine time is wanted here, and the stages section times rendering. "tiny" is for the smoke test only.
SIZES: dict[str, dict[str, Any]] = {
    "full": dict(eff_docs=400, eff_max=1000, per_actor=200, actors=[1, 2, 4, 8], lengths=[10, 32, 100, 316, 1000],
                 bg_docs=200, per_length=1000, long=2000, short=64, embed_sample=512, ts=0.02, render="sizes",
                 embed_passages=(600, 3), copies=5),
    "quick": dict(eff_docs=96, eff_max=400, per_actor=48, actors=[1, 2, 4, 8], lengths=[10, 32, 100, 316, 1000],
                  bg_docs=64, per_length=320, long=2000, short=64, embed_sample=64, ts=0.01, render="sizes",
                  embed_passages=(200, 2), copies=1),
    "tiny": dict(eff_docs=6, eff_max=40, per_actor=3, actors=[1, 2], lengths=[10, 40], bg_docs=3, per_length=40,
                 long=136, short=16, embed_sample=16, ts=0.004, render="proxy", embed_passages=(32, 1), copies=1),
}


def _sim_factory(cfg: Config, spec: EngineSpec, ts: float, seed: int) -> Any:
    return lambda i: SimulatedBackend(cfg.converter.model, spec=spec, seed=seed + i, time_scale=ts)


def _scaled(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    base = rows[0]
    for row in rows:
        row["speedup"] = round(row["pages_per_s"] / (base["pages_per_s"] or 1.0), 3)
        row["of_linear"] = round(row["speedup"] / row["actors"], 3)
        # Steady state: the rate while every engine held its full set of chains, against one engine's.
        row["steady_of_linear"] = round(row["steady_efficiency"] / (base["steady_efficiency"] or 1.0), 3)
    return rows


def _first_pages(docs: list[SyntheticDoc], pages: float) -> list[str]:
    """The shortest prefix of ``docs`` holding at least ``pages`` pages."""
    out, total = [], 0
    for d in docs:
        if total >= pages - 0.5:
            break
        out.append(d.path)
        total += d.pages
    return out


def experiments(cfg: Config, size: dict[str, Any], out: Path, seed: int, make: Any, ts: float,
                concurrency: int, order: Order = "longest") -> dict[str, Any]:
    """(a)-(d) on engines built by ``make(time_scale)(i)``; returns the report sections."""
    corpus, render = out / "corpus", size["render"]
    rep: dict[str, Any] = {}
    t0 = time.perf_counter()

    def run(paths: list[str], n: int, how: Order, slow: int | None = None) -> EngineRun:
        # Stretch time with the engine count so the wall-clock page rate (host CPU load) stays that of one full
        # engine; a fixed corpus on many engines converts far fewer pages per second, so it needs less (``slow``).
        sts = ts * (n if slow is None else slow)
        return run_engines(cfg, paths, n, concurrency, make(sts), render, sts, how)

    docs = make_corpus(corpus, size["eff_docs"], seed, max_pages=size["eff_max"])
    a_paths = [d.path for d in docs]
    by_order = {how: run(a_paths, 1, how) for how in ("arrival", "longest")}
    rep["efficiency"] = {**by_order[order].row(), "page_counts": sorted((d.pages for d in docs), reverse=True)}
    rep["order"] = [r.row() for r in by_order.values()]
    print(f"(a) efficiency done in {time.perf_counter() - t0:.0f} s", flush=True)
    weak, strong = [], []
    # One pool for every weak-scaling point (written once): n engines get its first documents up to n engines'
    # share of its pages, so the load per engine stays the same in pages, not just in documents.
    pool = make_corpus(corpus, size["per_actor"] * max(size["actors"]), seed + 1, max_pages=size["eff_max"])
    per_engine = sum(d.pages for d in pool) / max(size["actors"])
    for n in size["actors"]:
        if n == 1:
            strong.append(by_order[order].row())
        else:
            strong.append(run(a_paths, n, order, slow=max(1, n // 4)).row())  # tail-bound: ~1.2 engines' rate
        weak.append(run(_first_pages(pool, n * per_engine), n, order).row())
    rep["scaling"], rep["strong_scaling"] = _scaled(weak), _scaled(strong)
    print(f"(b) scaling done in {time.perf_counter() - t0:.0f} s", flush=True)
    bg = [d.path for d in make_corpus(corpus / "background", size["bg_docs"], seed + 3, max_pages=size["eff_max"])]
    rows = []
    for length in size["lengths"]:
        n_docs = max(1, math.ceil(size["per_length"] / length))
        probes = [make_corpus(corpus / f"len{length}", 1, seed + 100 + i, include=(length,))[0].path
                  for i in range(n_docs)]
        # Probes enter once a third of the background is under way, so the engine is full when they start.
        cut = len(bg) // 3
        r = run(bg[:cut] + probes + bg[cut:], 1, "arrival")
        names = {p.rsplit("/", 1)[-1] for p in probes}
        times = [r.doc_times[k] for k in names]
        work = sum(r.doc_work[k] for k in names)
        pages = sum(t[0] for t in times)
        rows.append({"length": length, "probe_docs": n_docs, **r.row(),
                     "work_s_per_page": round(work / pages, 4),  # engine time a page takes out of a full engine
                     "latency_s": round(sum(t[1] for t in times) / len(times), 1),
                     "latency_s_per_page": round(sum(t[1] for t in times) / pages, 3)})
    rep["doc_length"] = rows
    print(f"(c) document length done in {time.perf_counter() - t0:.0f} s", flush=True)
    long_doc: dict[str, Any] = {}
    for key in ("long", "short"):
        d = make_corpus(corpus / "alone", 1, seed + 7, include=(size[key],))[0]
        long_doc[key] = {"pages": d.pages, **run([d.path], 1, "arrival").row()}
    long_doc["ratio"] = round(long_doc["long"]["engine_s"] / long_doc["short"]["engine_s"], 3)
    rep["long_doc"] = long_doc
    print(f"(d) long document done in {time.perf_counter() - t0:.0f} s", flush=True)
    return rep


def stages_section(cfg: Config, size: dict[str, Any], out: Path, seed: int, e2e: bool, embed: bool,
                   copies: int | None = None, naive: bool = True) -> dict[str, Any]:
    """(e): CPU cost per stage, the embedding backends, and our ingest beside the naive pipeline on the same corpus.

    Every step that loads a model, starts Ray or opens Milvus Lite runs in a fresh process (:mod:`jobs.bench.isolate`):
    a step that fails is reported as failed here and the others still run."""
    from jobs.bench.corpus import CLOUDWAY, copies as cloudway_copies
    from jobs.bench.isolate import run_step

    work = out / "stages"
    tiny = size is SIZES["tiny"]
    cloud = sorted(str(p) for p in CLOUDWAY.glob("*.pdf")) if CLOUDWAY.is_dir() and not tiny else []
    if cloud:
        paths, note = cloud, "CloudWay PDFs"
    else:
        synth = make_corpus(work / "synthetic", 2 if tiny else 12, seed, max_pages=20 if tiny else 40)
        paths = [d.path for d in synth]
        note = "synthetic PDFs" + ("" if tiny else f" ({CLOUDWAY} not found)")
    local = cfg.model_copy(deep=True)
    local.converter.backend = "pdf-text"
    cfg_json = local.model_dump(mode="json")
    sec: dict[str, Any] = {"input": note, "load_avg_start": _loadavg()}
    if embed or e2e:
        # The embedder's ONNX export is made once, before anything is timed: ours and the naive pipeline find it.
        sec["prepare"] = run_step("prepare", "jobs.bench.stages:prepare_step", {"cfg": cfg_json}, work, 1800)
    costs = run_step("stage_costs", "jobs.bench.stages:stage_costs_step",
                     {"cfg": cfg_json, "paths": paths, "embed": embed, "milvus": embed,
                      "embed_sample": size["embed_sample"]}, work, 1800)
    if "failed" in costs:
        sec["stage_costs_failed"] = costs
    else:
        sec.update(costs)
    if embed:
        n, reps = size["embed_passages"]
        sec["embedding"] = run_step("embed_backends", "jobs.bench.embed:embed_step",
                                    {"embed": local.embed.model_dump(mode="json"), "backends": EMBED_BACKENDS,
                                     "passages": n, "repeats": reps, "query_runs": 20 if tiny else 50}, work, 1800)
    if e2e:
        times = copies if copies is not None else size["copies"]
        if cloud:
            corpus = cloudway_copies(work / f"cloudway-x{times}", times)
            folder, what = work / f"cloudway-x{times}", f"CloudWay x{times} (distinct bytes per copy)"
        else:
            corpus, folder, what = [Path(p) for p in paths], work / "synthetic", note
        runs: dict[str, Any] = {"corpus": what, "documents": len(corpus), "rows": []}
        prepared = sec.get("prepare", {}).get("backend") or "onnx-int8"
        steps = [("ours", "jobs.bench.stages:end_to_end_step",
                  {"cfg": cfg_json, "input_dir": str(folder), "workdir": str(work)})]
        if naive:
            for backend in dict.fromkeys([prepared, "torch"]):  # ours' backend, then torch as the issue measured it
                steps.append((f"naive-{backend}", "jobs.bench.naive:naive_step",
                              {"paths": [str(p) for p in corpus], "backend": backend, "workdir": str(work)}))
        for name, target, kwargs in steps:
            load = _loadavg()
            row = run_step(name, target, kwargs, work, 3600)
            row.update(name=name, load_avg_before=load, load_avg_after=_loadavg())
            if "failed" not in row:
                # The whole process, interpreter start and imports included: what a user waits for.
                row["process_pages_per_s"] = round(row["pages"] / row["step_wall_s"], 2) if row["step_wall_s"] else 0
            runs["rows"].append(row)
        sec["end_to_end"] = runs
    sec["load_avg_end"] = _loadavg()
    return sec


EMBED_BACKENDS = ["torch", "onnx", "onnx-int8"]


def _loadavg() -> list[float]:
    import os

    return [round(x, 2) for x in os.getloadavg()]
