"""The dry run's report: a Markdown table per figure group, an ASCII plot, and a PNG of the ceiling against
documents in flight (matplotlib, the ``test`` extra)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jobs.bench.sizing import GPU_PAGES_PER_S, TARGET_PAGES_PER_S


def _ok(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in runs if "failed" not in r]


def _kv(d: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in d.items())


def markdown(rep: dict[str, Any]) -> str:
    m = rep["meta"]
    runs = _ok(rep["runs"])
    lines = [f"# Dry run ({m['size']})", "",
             f"{m['machine']}; S3 latency added {m['latency_ms']} ms per request; cluster {m['nodes']} nodes; "
             f"corpus mixed {m['corpus']['mixed']}, ten-page {m['corpus']['ten']}.", "",
             "## Through the pipeline", "",
             "| run | storage | runtime | docs | segments | pages | chunks | in flight | pages/s | driver CPU share "
             "| load avg (start / end) |", "|" + " --- |" * 11]
    lines += [f"| {r['label']} | {r['storage']} | {r['runtime']} | {r['documents']} | {r['segments']} | {r['pages']} "
              f"| {r['chunks']} | {r['in_flight']} | {r['pages_per_s']} | {r['driver_cpu_share']} | "
              f"{r['load_avg'][0]} / {r['load_avg'][1]} |" for r in runs]
    lines += ["", "## The driver", "",
              "| run | CPU-ms / doc | CPU-ms / segment | by thread (ms / doc) | by step (ms / doc) | "
              "writer wall ms / doc |", "|" + " --- |" * 6]
    lines += [f"| {r['label']} | {r['driver_cpu_ms_per_doc']} | {r['driver_cpu_ms_per_segment']} | "
              f"{_kv(r['driver_cpu_ms_per_doc_by_thread'])} | {_kv(r['driver_cpu_ms_per_doc_by_step'])} | "
              f"{_kv(r['writer_wall_ms_per_doc'])} |" for r in runs]
    short = [r for r in runs if r.get("driver_threads_note")]
    if short:  # the by-thread split of these runs is interpolated, not measured: say so beside the table
        lines += [""] + [f"- {r['label']}: {r['driver_threads_note']}." for r in short]
    lines += ["", "## Object store, Milvus, plan stage", "",
              "| run | requests / doc | by area | by operation | Milvus rows/s | plan CPU-ms / segment |",
              "|" + " --- |" * 6]
    lines += [f"| {r['label']} | {r.get('requests_per_doc', '-')} | {_kv(r.get('requests_per_doc_by_area', {}))} | "
              f"{_kv(r.get('requests_per_doc_by_op', {}))} | {r['milvus_rows_per_s']} | "
              f"{r['plan_cpu_ms_per_segment']} |" for r in runs]
    lines += ["", f"## Ceilings (pages/s of each run's documents; GPUs at {GPU_PAGES_PER_S:g} pages/s each; target "
              f"{TARGET_PAGES_PER_S:,.0f} pages/s)", "", "| run | pages/doc | " + " | ".join(_ceiling_names(runs))
              + " | driver ceiling | GPUs |", "|" + " --- |" * (4 + len(_ceiling_names(runs)))]
    for r in runs:
        c = r["ceilings_pages_per_s"]
        d = r["driver_ceiling"]
        lines.append(f"| {r['label']} | {r['pages_per_doc']} | "
                     + " | ".join(str(c.get(k, "-")) for k in _ceiling_names(runs))
                     + f" | **{d['pages_per_s']}** ({d['step']}) | {d['gpus_at_5']} |")
    lines += fit_markdown(rep.get("fit") or {})
    failed = [r for r in rep["runs"] if "failed" in r]
    if failed:
        lines += ["", "Failed runs:"] + [f"- {r['label']}: {r['failed']} (log {r.get('log')})" for r in failed]
    lines += ["", "## Driver ceiling against documents in flight", "", "```", *ascii_plot(runs), "```", ""]
    return "\n".join(lines)


def fit_markdown(fit: dict[str, Any]) -> list[str]:
    lines = ["", "## The driver's ceiling, fitted over the runs of 10-page documents", "",
             "Driver CPU share (core-seconds per second while rows flow) = base + cost per page x pages/s; one core "
             "is reached at (1 - base) / cost per page.", ""]
    if "pages_per_s" not in fit:
        return lines + [f"No fit: {fit.get('note', 'no runs')} (runs: {', '.join(fit.get('runs', [])) or '-'})."]
    lines += [f"Runs {', '.join(fit['runs'])}: base {fit['base_cores']} cores, {fit['cpu_ms_per_10_page_doc']} CPU-ms "
              f"per 10-page document: ceiling **{fit['pages_per_s']:,} pages/s** = **{fit['gpus_at_5']} GPUs** at "
              f"{GPU_PAGES_PER_S:g} pages/s (target {TARGET_PAGES_PER_S:,.0f}: "
              f"{'met' if fit['meets_target'] else 'not met'}).", "",
              ]
    py = fit.get("python_threads")
    if py:
        lines += [f"Counting only the threads that hold the GIL (the driver thread, Ray Data's, the writer's; native "
                  f"threads of Ray's core worker and the store clients can use another core): {py['cpu_ms_per_10_page_doc']} "
                  f"CPU-ms per document, ceiling {py['pages_per_s']:,} pages/s.", ""]
    lines += ["| thread kind | base (cores) | CPU-ms per 10-page document |", "| --- | --- | --- |"]
    lines += [f"| {k} | {v['base_cores']} | {v['cpu_ms_per_10_page_doc']} |" for k, v in fit.get("by_thread", {}).items()]
    return lines


def _ceiling_names(runs: list[dict[str, Any]]) -> list[str]:
    names: list[str] = []
    for r in runs:
        names += [k for k in r["ceilings_pages_per_s"] if k not in names]
    return names


def _sweep(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted((r for r in runs if r["label"].startswith("flight-")), key=lambda r: r["in_flight"])


def ascii_plot(runs: list[dict[str, Any]], width: int = 50) -> list[str]:
    """One bar per in-flight level: the driver ceiling (#) and what passed through (=), in pages/s."""
    rows = _sweep(runs)
    if not rows:
        return ["(no in-flight sweep in this report)"]
    top = max(max(r["driver_ceiling"]["pages_per_s"] or 0 for r in rows), TARGET_PAGES_PER_S)
    out = [f"in flight | pages/s (# driver ceiling, = measured through the pipeline; | = {TARGET_PAGES_PER_S:,.0f})"]
    mark = round(width * TARGET_PAGES_PER_S / top)
    for r in rows:
        for ch, v in (("#", r["driver_ceiling"]["pages_per_s"] or 0), ("=", r["pages_per_s"])):
            n = round(width * v / top)
            bar = "".join(ch if i < n else ("|" if i == mark else " ") for i in range(max(n, mark + 1)))
            out.append(f"{r['in_flight']:>9} | {bar} {v:,.0f}")
    return out


def plot(rep: dict[str, Any], path: Path) -> str:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = _sweep(_ok(rep["runs"]))
    fig, ax = plt.subplots(figsize=(5, 3.2))
    if rows:
        xs = [r["in_flight"] for r in rows]
        ax.plot(xs, [r["driver_ceiling"]["pages_per_s"] for r in rows], "o-", label="driver ceiling at that rate")
        ax.plot(xs, [r["pages_per_s"] for r in rows], "s--", label="through the pipeline (2 shared cores)")
        ax.set_xscale("log", base=2)
    fit = rep.get("fit") or {}
    if "pages_per_s" in fit:
        ax.axhline(fit["pages_per_s"], color="tab:red", lw=1.0, label=f"fitted ceiling {fit['pages_per_s']:,.0f}")
    ax.axhline(TARGET_PAGES_PER_S, color="grey", lw=0.8, ls=":", label=f"{TARGET_PAGES_PER_S:,.0f} pages/s (400 GPUs)")
    ax.set_yscale("log")
    ax.set(xlabel="documents in flight", ylabel="pages / s (10-page documents)", title="Dry run: driver ceiling")
    ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return str(path)
