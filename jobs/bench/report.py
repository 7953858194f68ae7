"""The benchmark report: Markdown for people, PNG plots."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jobs.bench.experiments import TARGETS

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
    if "experiments_failed" in rep:
        lines += ["## (a)-(d) simulated engines", "", f"**failed**: {rep['experiments_failed']}", ""]
    if "stages" in rep:
        lines += stages_markdown(rep["stages"])
    if "real" in rep:
        lines += ["## Real engines", "", "```", json.dumps(rep["real"], indent=2), "```", ""]
    if "gpu_estimate" in rep:
        from jobs.bench.gpu_estimate import markdown as gpu_estimate_markdown

        lines += gpu_estimate_markdown(rep["gpu_estimate"])
    return "\n".join(lines)


def stages_markdown(s: dict[str, Any]) -> list[str]:
    lines = ["## (e) CPU stages", "", f"Target: {TARGETS['stages']}", ""]
    if "failed" in s:
        return lines + [f"**failed**: {s['failed']}", ""]
    lines += [f"Load average (1/5/15 min) at the start {s.get('load_avg_start')}, at the end {s.get('load_avg_end')}.",
              ""]
    if "stage_costs_failed" in s:
        lines += [f"Stage costs **failed**: {s['stage_costs_failed']['failed']} (log: {s['stage_costs_failed'].get('log')})",
                  ""]
    else:
        lines += [f"Input: {s['input']}, {s['pages']} pages, {s['chunks']} chunks; each stage alone on one core.", "",
                  "| stage | ms/page |", "| --- | --- |"]
        lines += [f"| {k} | {v} |" for k, v in s["ms_per_page"].items()]
        lines += [f"| render+encode+parse+plan | **{s['render_encode_parse_plan_ms']}** |", ""]
        for k in ("embed_chunks_per_s", "milvus_rows_per_s"):
            if k in s:
                lines.append(f"- {k}: {s[k]}")
        lines.append("")
    if "embedding" in s:
        e = s["embedding"]
        lines += ["### Embedding backends (jobs.bench.embed)", ""]
        if "failed" in e:
            lines += [f"**failed**: {e['failed']} (log: {e.get('log')})", ""]
        else:
            from jobs.bench.embed import render

            lines += [render(e, e.get("mean_tokens")), ""]
    if "end_to_end" in s:
        lines += e2e_markdown(s["end_to_end"])
    return lines


def e2e_markdown(runs: dict[str, Any]) -> list[str]:
    """Ours beside the naive pipeline, whole run and steady, and where our time went."""
    lines = ["### End to end: our ingest beside the naive pipeline, same corpus, same machine, one after the other",
             "", f"Corpus: {runs['corpus']}, {runs['documents']} files. *Process* = the whole process timed (interpreter, "
             "imports, Ray start and shutdown included: what a user waits for); *run* = inside the job's function; "
             "*steady* = pages/s between 10 % and 90 % of pages reaching the driver; *CPU s* = CPU seconds the run's "
             "processes used (the driver and, for ours, the Ray runtime it started: less distorted by other jobs on "
             "the machine than wall time).", "",
             "| pipeline | pages | chunks | mean chunk chars | process s | process pages/s | run s | run pages/s | "
             "steady pages/s | CPU s | load avg before / after |", "|" + " --- |" * 11]
    for r in runs["rows"]:
        if "failed" in r:
            lines.append(f"| {r['name']} | **failed**: {r['failed']} | | | | | | | | | |")
            continue
        t = r.get("timing", {})
        lines.append(
            f"| {r.get('pipeline', r['name'])} | {r['pages']} | {r['chunks']} | {r.get('mean_chunk_chars', '')} | "
            f"{r['step_wall_s']} | **{r['process_pages_per_s']}** | {r['seconds']} | {r['pages_per_s']} | "
            f"{t.get('steady_pages_per_s', '-')} | {r.get('cpu', {}).get('cpu_s_total', '-')} | "
            f"{r['load_avg_before'][0]} / {r['load_avg_after'][0]} |")
    ours = next((r for r in runs["rows"] if r["name"] == "ours" and "failed" not in r), None)
    if ours and ours.get("timing"):
        t = ours["timing"]
        lines += ["", "Where our time went: driver steps are wall seconds of the driver, in order; worker seconds are "
                  "summed over segments inside each stage's workers (stages overlap, so they can add up to more "
                  "than the run).", "",
                  f"- first segment at the driver after {t.get('first_segment_s')} s (start-up: listing, Ray, "
                  f"actors and model loads, the first conversion), last at {t.get('last_segment_s')} s, run "
                  f"{t.get('whole_s')} s",
                  "- driver steps s: " + ", ".join(f"{k} {v}" for k, v in t.get("driver_steps_s", {}).items()),
                  "- worker s: " + ", ".join(f"{k} {v}" for k, v in t.get("worker_s", {}).items())]
        by = ours.get("cpu", {}).get("cpu_s_by_process")
        if by:
            lines.append("- CPU s by process kind: " + ", ".join(f"{k} {v}" for k, v in by.items()))
        lines.append("")
    for r in runs["rows"]:
        if r["name"].startswith("naive") and "steps_s" in r:
            lines.append(f"- {r['name']} steps s: " + ", ".join(f"{k} {v}" for k, v in r["steps_s"].items()))
    lines.append("")
    return lines


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
    if "ms_per_page" in rep.get("stages", {}):
        fig, ax = plt.subplots(figsize=(5, 3.5))
        ms = rep["stages"]["ms_per_page"]
        ax.barh(list(ms), list(ms.values()))
        ax.set(xlabel="ms per page (one core)", title="CPU cost per stage")
        made.append(_save(fig, out / "stage_cost.png"))
    rows = [r for r in rep.get("stages", {}).get("end_to_end", {}).get("rows", []) if "failed" not in r]
    if rows:
        fig, ax = plt.subplots(figsize=(5.5, 3.5))
        names = [r["name"] for r in rows]
        ys = range(len(rows))
        ax.barh([y + 0.2 for y in ys], [r["process_pages_per_s"] for r in rows], height=0.4, label="whole process")
        ax.barh([y - 0.2 for y in ys], [r.get("timing", {}).get("steady_pages_per_s", 0) for r in rows], height=0.4,
                label="steady (ours)")
        ax.set_yticks(list(ys), names)
        ax.set(xlabel="pages / s", title="End to end, same corpus")
        ax.legend()
        made.append(_save(fig, out / "end_to_end.png"))
    return made


def _save(fig: Any, path: Path) -> str:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return str(path)


