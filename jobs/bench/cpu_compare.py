"""CPU per page of the CPU stages, this checkout against an earlier commit, on the same PDFs.

    python -m jobs.benchmark cpu-compare --before 4ec97d4 --corpus '../shared/data/rag-multi-corpus-cloudway/pdf/*.pdf'

What a change to the converter or intake costs per page, as process CPU time (``time.process_time``: what the
machine's load distorts least), stage by stage: intake (hash, checks, the document identity read), render + encode
(the page image the VLM gets), pdf-text conversion, parse, plan. The earlier commit is checked out into a temporary
git worktree; each measurement runs in a fresh interpreter with that tree (or this one) first on ``sys.path`` and
each tree's own ``configs/local.yaml``, the trees taking turns ``--rounds`` times so that a drift in the machine
hits both. The worker is this file run as a script (an earlier tree need not have it); it uses only the stage
functions that exist unchanged since the pipeline took its present shape, and says so when a tree lacks them.
Its loop is the one :func:`jobs.bench.stages.stage_costs` times, written here again on purpose: that one reads wall
time and the renderer's own split, and an earlier tree's copy of it would be the code measured, not the measure.
"""

from __future__ import annotations

import argparse
import glob
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
STAGES = ("intake", "render_encode", "convert_pdf_text", "parse", "plan")
# The two paths a page takes: to the VLM (its image) or through the text layer. Each path's CPU per page.
PATHS = {"vlm path": ("intake", "render_encode", "parse", "plan"),
         "pdf-text path": ("intake", "convert_pdf_text", "parse", "plan")}


def measure(tree: Path, paths: list[str]) -> dict[str, Any]:
    """CPU ms per page of each stage over ``paths``, with ``tree``'s code and config (run in a fresh process)."""
    sys.path.insert(0, str(tree))
    from chunker.config import config_hash, load_config
    from chunker.contract import parse_batches
    from chunker.convert.pdf_text import PdfTextConverter
    from chunker.convert.render import RenderedDocument
    from chunker.intake.inputs import InputFile
    from chunker.intake.prepare import inspect
    from chunker.intake.segments import plan_segments
    from chunker.plan.deterministic import build_chunks, plan

    cfg = load_config(tree / "configs" / "local.yaml")
    cfg.converter.backend = "pdf-text"
    h = config_hash(cfg)
    conv = PdfTextConverter(cfg.converter, h)

    def one_pass(files: list[str]) -> tuple[dict[str, float], int, int]:
        cpu = dict.fromkeys(STAGES, 0.0)
        pages = chunks = 0
        clock = time.process_time
        for p in files:
            t = clock()
            doc = inspect(InputFile(path=p, source=Path(p).name), cfg.intake)
            cpu["intake"] += clock() - t
            if doc.status == "failed":
                raise SystemExit(f"{p}: intake failed ({doc.error}); compare on PDFs both trees read")
            t = clock()
            rd = RenderedDocument(doc.source_uri, cfg.render)
            try:
                for n in range(1, doc.num_pages + 1):
                    rd.render(n)
                    rd.drop([n])
            finally:
                rd.close()
            cpu["render_encode"] += clock() - t
            for job in plan_segments(doc, cfg.intake):
                t0 = clock()
                batches = conv.convert_sync(job)
                t1 = clock()
                elements = parse_batches(job.doc_id, batches, job.segment_index)
                t2 = clock()
                chunks += len(build_chunks(elements, plan(elements, cfg.planner), cfg.planner, h, job.source,
                                           job.source_uri))
                cpu["convert_pdf_text"] += t1 - t0
                cpu["parse"] += t2 - t1
                cpu["plan"] += clock() - t2
            pages += doc.num_pages
        return cpu, pages, chunks

    one_pass(paths[:1])  # untimed: lazy imports, pdfium's font cache and compiled patterns are paid here
    cpu, pages, chunks = one_pass(paths)
    if not pages:
        raise SystemExit("no pages to measure")
    return {"ms_per_page": {k: 1000 * v / pages for k, v in cpu.items()}, "pages": pages, "chunks": chunks}


def _run_worker(tree: Path, paths: list[str]) -> dict[str, Any]:
    res = subprocess.run([sys.executable, __file__, "--worker", str(tree), *paths], capture_output=True, text=True)
    if res.returncode != 0:
        tail = (res.stderr or res.stdout).strip().splitlines()[-3:]
        raise SystemExit(f"measuring {tree} failed: " + " | ".join(tail))
    return json.loads(res.stdout.strip().splitlines()[-1])


def compare(before: str, paths: list[str], rounds: int) -> dict[str, Any]:
    """Both trees measured ``rounds`` times, taking turns; the worktree of ``before`` is removed afterwards."""
    runs: dict[str, list[dict[str, Any]]] = {before: [], "this checkout": []}
    with tempfile.TemporaryDirectory(prefix="cpu-compare-") as tmp:
        wt = Path(tmp) / "before"
        add = subprocess.run(["git", "-C", str(REPO_ROOT), "worktree", "add", "--detach", str(wt), before],
                             capture_output=True, text=True)
        if add.returncode != 0:
            raise SystemExit(f"cannot check out {before!r}: {add.stderr.strip()}")
        try:
            for _ in range(rounds):
                runs[before].append(_run_worker(wt, paths))
                runs["this checkout"].append(_run_worker(REPO_ROOT, paths))
        finally:
            subprocess.run(["git", "-C", str(REPO_ROOT), "worktree", "remove", "--force", str(wt)],
                           capture_output=True)
    return {"documents": len(paths), "runs": runs}


def _mean(runs: list[dict[str, Any]], stage: str) -> float:
    return sum(r["ms_per_page"][stage] for r in runs) / len(runs)


def report(result: dict[str, Any]) -> str:
    trees = list(result["runs"])
    first = result["runs"][trees[0]][0]
    lines = [f"{result['documents']} documents, {first['pages']} pages; process CPU ms per page, mean of "
             f"{len(result['runs'][trees[0]])} runs each (trees taking turns)", "",
             "| tree | chunks | " + " | ".join(STAGES) + " | " + " | ".join(PATHS) + " |",
             "| --- " * (2 + len(STAGES) + len(PATHS)) + "|"]
    totals = {}
    for tree in trees:
        runs = result["runs"][tree]
        totals[tree] = {name: sum(_mean(runs, s) for s in stages) for name, stages in PATHS.items()}
        lines.append(f"| {tree} | {runs[0]['chunks']} | " + " | ".join(f"{_mean(runs, s):.2f}" for s in STAGES)
                     + " | " + " | ".join(f"{totals[tree][n]:.2f}" for n in PATHS) + " |")
    base, now = totals[trees[0]], totals[trees[1]]
    lines += ["", "Change per page: " + "; ".join(
        f"{n} {now[n] - base[n]:+.2f} ms ({100 * (now[n] / base[n] - 1):+.1f} %)" for n in PATHS if base[n])]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m jobs.benchmark cpu-compare", description=__doc__.split("\n\n")[0])
    p.add_argument("--before", required=True, help="the earlier commit (any git revision)")
    p.add_argument("--corpus", required=True, help="glob of the PDFs to convert, e.g. 'pdfs/*.pdf'")
    p.add_argument("--every", type=int, default=1, help="take every Nth file of the sorted glob (default: all)")
    p.add_argument("--rounds", type=int, default=3, help="measurements of each tree, taking turns (default: 3)")
    p.add_argument("--json", help="also write the runs here")
    args = p.parse_args(argv)
    paths = sorted(glob.glob(args.corpus))[:: max(1, args.every)]
    if not paths:
        print(f"error: no file matches {args.corpus!r}", file=sys.stderr)
        return 2
    result = compare(args.before, paths, max(1, args.rounds))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    print(report(result))
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        sys.path.pop(0)  # this script's folder: its module names must not shadow anything the tree imports
        print(json.dumps(measure(Path(sys.argv[2]), sys.argv[3:])))
    else:
        sys.exit(main())
