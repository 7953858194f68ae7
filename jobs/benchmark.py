"""Throughput benchmark: pages/s, tokens/s, engine occupancy and per-stage CPU cost, as JSON, Markdown and PNG plots.

    python -m jobs.benchmark [--quick] [--output DIR]            # simulated engines: the pipeline's own overhead
    python -m jobs.benchmark stages [--quick] [--output DIR]     # CPU cost per page of each stage + end to end
    python -m jobs.benchmark serve [serve_bench args]            # query endpoint load (jobs.bench.serve)
    python -m jobs.benchmark --config configs/qwen2.5-vl-7b.yaml --gpu-hour-usd 2.5   # real vLLM engines (GPU)

Targets are printed beside the figures; nothing is asserted. See BENCHMARKS.md for what the figures mean.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

from chunker.backends.simulated import EngineSpec, SimulatedBackend
from chunker.config import Config, ConfigError, load_config
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


def _pct(x: float) -> str:
    # 0 means the queue emptied at once (fewer chains than slots): there was no steady state to measure.
    return f"{x:.1%}" if x else "n/a"


def markdown(rep: dict[str, Any]) -> str:
    m = rep["meta"]
    lines = [f"# Throughput benchmark ({m['mode']}, {m['size']})", "",
             f"{m['machine']}; engines: {m['engine']}; engine seconds = wall / time_scale.", ""]
    if "efficiency" in rep:
        lines += ["## (a) Efficiency on a heavy-tailed corpus (one engine), by scheduling order", "",
                  f"Target: {TARGETS['efficiency']}. Whole run includes the ramp-down; steady = while the queue held "
                  "work (every slot had a chain); mid-80 % = between 10 % and 90 % of pages converted.", "",
                  "| order | docs | pages | pages/s | capacity | whole run | steady | mid-80 % | mean seqs | "
                  "engine s | host CPU share |", "|" + " --- |" * 11]
        lines += [f"| {e['order']} | {e['documents']} | {e['pages']} | {e['pages_per_s']} | "
                  f"{e['capacity_pages_per_s']} | {e['efficiency']:.1%} | {_pct(e['steady_efficiency'])} | "
                  f"{_pct(e['mid80_efficiency'])} | {e['mean_running_seqs']} | {e['engine_s']} | {e['cpu_share']:.0%} |"
                  for e in rep["order"]]
        for key, title in (("scaling", "weak: the corpus grows with the engines"),
                           ("strong_scaling", "strong: the (a) corpus on more engines")):
            lines += ["", f"## (b) Scaling, {title}", "", f"Target: {TARGETS['scaling']}", "",
                      "| engines | docs | pages | pages/s | speedup | of linear | whole run | steady | steady of linear "
                      "| host CPU share |", "|" + " --- |" * 10]
            lines += [f"| {r['actors']} | {r['documents']} | {r['pages']} | {r['pages_per_s']} | {r['speedup']} | "
                      f"{r['of_linear']:.0%} | {r['efficiency']:.1%} | {_pct(r['steady_efficiency'])} | "
                      f"{_pct(r['steady_of_linear'])} | {r['cpu_share']:.0%} |" for r in rep[key]]
        lines += ["", "## (c) Per-page time against document length, in a full engine", "",
                  f"Target: {TARGETS['doc_length']}. Probe documents of each length run among background documents "
                  "that keep the engine full. Work/page = engine time a page takes out of a full engine (what sets "
                  "cluster throughput); latency = a probe's first batch sent to last batch back.", "",
                  "| length | probes | work s/page | latency s | latency s/page | engine pages/s | whole run |",
                  "|" + " --- |" * 7]
        lines += [f"| {r['length']} | {r['probe_docs']} | {r['work_s_per_page']} | {r['latency_s']} | "
                  f"{r['latency_s_per_page']} | {r['pages_per_s']} | {r['efficiency']:.1%} |" for r in rep["doc_length"]]
        d = rep["long_doc"]
        lines += ["", "## (d) Single-document latency: one long document alone against one short one", "",
                  f"Target: {TARGETS['long_doc']}", "", "| document | pages | segments | engine s | pages/s |",
                  "| --- | --- | --- | --- | --- |"]
        lines += [f"| {k} | {d[k]['pages']} | {d[k]['segments']} | {d[k]['engine_s']} | {d[k]['pages_per_s']} |"
                  for k in ("long", "short")]
        lines += ["", f"Ratio long/short wall time: **{d['ratio']}x**", ""]
    if "stages" in rep:
        s = rep["stages"]
        lines += ["## (e) CPU stages", "", f"Target: {TARGETS['stages']}", "", f"Input: {s['input']}, "
                  f"{s['pages']} pages, {s['chunks']} chunks.", "", "| stage | ms/page |", "| --- | --- |"]
        lines += [f"| {k} | {v} |" for k, v in s["ms_per_page"].items()]
        lines += [f"| render+encode+parse+plan | **{s['render_encode_parse_plan_ms']}** |", ""]
        for k in ("embed_chunks_per_s", "milvus_rows_per_s"):
            if k in s:
                lines.append(f"- {k}: {s[k]}")
        if "end_to_end" in s:
            lines.append(f"- end to end (jobs.ingest.run_ingest): {json.dumps(s['end_to_end'])}")
        lines.append("")
    if "real" in rep:
        lines += ["## Real engines", "", "```", json.dumps(rep["real"], indent=2), "```", ""]
    return "\n".join(lines)


def plots(rep: dict[str, Any], out: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = []
    if "scaling" in rep:
        fig, ax = plt.subplots(figsize=(5, 3.5))
        xs = [r["actors"] for r in rep["scaling"]]
        ax.plot(xs, [r["pages_per_s"] for r in rep["scaling"]], "o-", label="weak (corpus grows)")
        ax.plot(xs, [r["pages_per_s"] for r in rep["strong_scaling"]], "s-", label="strong (fixed corpus)")
        ax.plot(xs, [rep["scaling"][0]["pages_per_s"] * x for x in xs], "--", label="linear")
        ax.set(xlabel="engines (simulated GPUs)", ylabel="pages / engine-second", title="Throughput vs actors")
        ax.legend()
        made.append(_save(fig, out / "throughput_vs_actors.png"))
        fig, ax = plt.subplots(figsize=(5, 3.5))
        rows = rep["doc_length"]
        ax.semilogx([r["length"] for r in rows], [r["work_s_per_page"] for r in rows], "o-", label="work (full engine)")
        ax.semilogx([r["length"] for r in rows], [r["latency_s_per_page"] for r in rows], "s-", label="latency / page")
        ax.set(xlabel="document length (pages)", ylabel="engine seconds per page", title="Per-page time vs length")
        ax.legend()
        made.append(_save(fig, out / "per_page_vs_length.png"))
    if "stages" in rep:
        fig, ax = plt.subplots(figsize=(5, 3.5))
        ms = rep["stages"]["ms_per_page"]
        ax.barh(list(ms), list(ms.values()))
        ax.set(xlabel="ms per page (one core)", title="CPU cost per stage")
        made.append(_save(fig, out / "stage_cost.png"))
    return made


def _save(fig: Any, path: Path) -> str:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return str(path)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m jobs.benchmark", description=__doc__.split("\n")[0])
    p.add_argument("command", nargs="?", default="report", choices=["report", "stages"])
    p.add_argument("--config", default=None, help="YAML config (a vllm config selects real mode)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--backend", default=None, choices=["simulated", "vllm"], help="engine kind (default: simulated)")
    p.add_argument("--output", default="output/benchmark", help="report folder")
    p.add_argument("--quick", action="store_true", help="a few minutes on 2 cores")
    p.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)  # smoke-test size
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--time-scale", type=float, default=None, help="wall seconds per simulated second")
    p.add_argument("--concurrency", type=int, default=None, help="chains per engine (default: max_num_seqs)")
    p.add_argument("--order", default="longest", choices=["longest", "arrival"],
                   help="segment order for (b); (a) reports both")
    p.add_argument("--calibration", default=None, metavar="FILE",
                   help="engine capacity from python -m jobs.calibrate --write-calibration FILE")
    p.add_argument("--gpu-hour-usd", type=float, default=0.0, help="price of one GPU-hour, for cost per M pages")
    p.add_argument("--no-e2e", action="store_true", help="skip the end-to-end ingest run")
    p.add_argument("--no-embed", action="store_true", help="skip embedding and Milvus rates")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "serve":
        from jobs.bench import serve as serve_bench

        return serve_bench.main(argv[1:])
    args = parse_args(argv)
    try:
        cfg = load_config(args.config, args.overrides)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    real = args.backend == "vllm" or (args.backend is None and cfg.converter.backend == "vllm")
    size_name = "tiny" if args.tiny else "quick" if args.quick else "full"
    size = SIZES[size_name]
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    # The simulated engine stands for Qwen2.5-VL-7B on one H100: without a config, use that config's batch size (32),
    # not ModelConfig's generic default.
    spec = EngineSpec(max_num_seqs=cfg.converter.model.max_num_seqs if args.config else 32)
    if args.calibration:
        spec = EngineSpec.from_calibration(args.calibration)
    concurrency = args.concurrency or spec.max_num_seqs
    rep: dict[str, Any] = {"meta": {
        "mode": "real" if real else "simulated", "size": size_name, "seed": args.seed, "concurrency": concurrency, "order": args.order,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "engine": "vllm" if real else f"simulated {spec}", "targets": TARGETS}}
    if args.command == "report":
        if real:
            from jobs.bench.real import run_real

            try:
                rep["real"] = run_real(cfg, size, out, args.seed, args.gpu_hour_usd)
            except RuntimeError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 2
        else:
            cfg.converter.backend = "simulated"
            ts = args.time_scale or size["ts"]
            rep["meta"]["time_scale"] = ts
            rep.update(experiments(cfg, size, out, args.seed, lambda s: _sim_factory(cfg, spec, s, args.seed),
                                   ts, concurrency, args.order))
    rep["stages"] = stages_section(cfg, size, out, args.seed, e2e=not args.no_e2e, embed=not args.no_embed)
    rep["plots"] = plots(rep, out)
    (out / "report.json").write_text(json.dumps(rep, indent=2, default=str))
    md = markdown(rep)
    (out / "report.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
