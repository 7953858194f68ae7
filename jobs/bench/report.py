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
    if "gpu_estimate" in rep:
        from jobs.bench.gpu_estimate import markdown as gpu_estimate_markdown

        lines += gpu_estimate_markdown(rep["gpu_estimate"])
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


