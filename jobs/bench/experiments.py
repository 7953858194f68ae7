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
    "stages": "<= 30 ms CPU per page for render+encode+parse+plan; >= 10 pages/s end to end on 2 cores",
}

# Sizes per run size. (a) a heavy-tailed corpus of ``eff_docs`` documents (longest ``eff_max`` pages) on one engine,
# in arrival order and longest-first; (b) weak scaling with ``per_actor`` documents per engine and strong scaling on
# the (a) corpus, over ``actors`` engines; (c) probes of each length among ``bg_docs`` background documents, about
# ``per_length`` probe pages per length; (d) the long and the short document alone; (e) the embedding sample.
# The engines see the full render's token load, but nothing is rendered (``render``) when the corpus is thousands of
# pages: only engine time is wanted here, and the stages section times rendering. "tiny" is for the smoke test only.
SIZES: dict[str, dict[str, Any]] = {
    "full": dict(eff_docs=400, eff_max=1000, per_actor=200, actors=[1, 2, 4, 8], lengths=[10, 32, 100, 316, 1000],
                 bg_docs=200, per_length=1000, long=2000, short=64, embed_sample=512, ts=0.02, render="sizes"),
    "quick": dict(eff_docs=96, eff_max=400, per_actor=48, actors=[1, 2, 4, 8], lengths=[10, 32, 100, 316, 1000],
                  bg_docs=64, per_length=320, long=2000, short=64, embed_sample=64, ts=0.01, render="sizes"),
    "tiny": dict(eff_docs=6, eff_max=40, per_actor=3, actors=[1, 2], lengths=[10, 40], bg_docs=3, per_length=40,
                 long=136, short=16, embed_sample=16, ts=0.004, render="proxy"),
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


def stages_section(cfg: Config, size: dict[str, Any], out: Path, seed: int, e2e: bool, embed: bool) -> dict[str, Any]:
    from jobs.bench.stages import CLOUDWAY, end_to_end, stage_costs

    paths = sorted(str(p) for p in CLOUDWAY.glob("*.pdf")) if CLOUDWAY.is_dir() else []
    note = "CloudWay PDFs" if paths else f"synthetic PDFs ({CLOUDWAY} not found)"
    if not paths or size is SIZES["tiny"]:
        paths, note = [d.path for d in make_corpus(out / "corpus", 2, seed, max_pages=20)], "synthetic PDFs"
    local = cfg.model_copy(deep=True)
    local.converter.backend = "pdf-text"
    sec = {"input": note, **stage_costs(local, paths, embed=embed, milvus=embed, embed_sample=size["embed_sample"])}
    if e2e:
        sec["end_to_end"] = end_to_end(local, CLOUDWAY, out) if CLOUDWAY.is_dir() else {
            "skipped": f"{CLOUDWAY} not found"}
    return sec


