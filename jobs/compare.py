"""Questions won and lost between two evaluations, pooled over question sets: how a change is judged.

    python -m jobs.compare output/eval-fb-before output/eval-fb-after output/eval-cw-before output/eval-cw-after
    python -m jobs.compare BEFORE AFTER --system ours/hybrid --system ours/dense

Each pair is one question set scored twice by ``jobs.evaluate`` (its ``scores.json``). For every metric a question
is *won* when its score rose, *lost* when it fell; the counts are summed over all pairs. A mean moves by one or two
questions on noise, so a change is kept when it wins more questions than it loses on the figure and page metrics
(num@5, num@2000, page@5) and loses no doc@5 (QUALITY.md). Exit codes: 0 compared, 2 a folder or system missing.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

METRICS = ("doc_at_5", "page_at_5", "mrr_at_10", "fact_at_2000", "num_at_5", "num_at_2000")
# The metrics a change is judged on: the figures and pages a reader gets, without losing the document.
DECIDING = ("num_at_5", "num_at_2000", "page_at_5")


@dataclass
class Tally:
    won: int = 0
    lost: int = 0
    scored: int = 0
    before: float = 0.0
    after: float = 0.0
    moved: list[tuple[str, float, float]] = field(default_factory=list)  # (set/qid, before, after)


def load_scores(folder: str, system: str) -> dict[str, dict[str, Any]]:
    path = Path(folder) / "scores.json"
    if not path.is_file():
        raise FileNotFoundError(f"{folder}: no scores.json (run jobs.evaluate with --output {folder} first)")
    scores = json.loads(path.read_text())
    if system not in scores:
        raise KeyError(f"{folder}: no system {system!r} in scores.json (has: {', '.join(sorted(scores))})")
    return {str(q["qid"]): q for q in scores[system]}


def compare(pairs: list[tuple[str, str]], system: str) -> dict[str, Tally]:
    """Per metric, the questions won and lost over all ``(before, after)`` folder pairs."""
    out = {m: Tally() for m in METRICS}
    for before_dir, after_dir in pairs:
        before, after = load_scores(before_dir, system), load_scores(after_dir, system)
        name = Path(after_dir).name
        for qid in sorted(set(before) & set(after)):
            for m in METRICS:
                b, a = before[qid].get(m), after[qid].get(m)
                if b is None or a is None:
                    continue
                t = out[m]
                t.scored += 1
                t.before += b
                t.after += a
                if a > b + 1e-9:
                    t.won += 1
                elif a < b - 1e-9:
                    t.lost += 1
                if abs(a - b) > 1e-9:
                    t.moved.append((f"{name}/{qid}", b, a))
    return out


def verdict(t: dict[str, Tally]) -> str:
    won = sum(t[m].won for m in DECIDING)
    lost = sum(t[m].lost for m in DECIDING)
    doc = t["doc_at_5"]
    keep = won > lost and doc.lost <= doc.won
    return (f"figure and page metrics: {won} won, {lost} lost; doc@5: {doc.won} won, {doc.lost} lost -> "
            + ("keep" if keep else "do not keep"))


def format_tally(t: dict[str, Tally], system: str, show: bool) -> str:
    lines = [f"== {system}: questions won / lost (pooled) ==",
             f"{'metric':<14}{'won':>5}{'lost':>6}{'scored':>8}   mean before -> after"]
    for m, x in t.items():
        mean = f"{x.before / x.scored:.3f} -> {x.after / x.scored:.3f}" if x.scored else "-"
        lines.append(f"{m:<14}{x.won:>5}{x.lost:>6}{x.scored:>8}   {mean}")
        if show:
            lines += [f"    {q}: {b:.3f} -> {a:.3f}" for q, b, a in x.moved]
    lines.append(verdict(t))
    return "\n".join(lines)


def main(argv: list[str] | None = None, prog: str = "python -m jobs.compare") -> int:
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n\n")[0])
    p.add_argument("folders", nargs="+", help="BEFORE AFTER [BEFORE AFTER ...]: jobs.evaluate output folders")
    p.add_argument("--system", action="append", default=None, help="row of scores.json (default: ours/hybrid)")
    p.add_argument("--questions", action="store_true", help="list every question that moved")
    args = p.parse_args(argv)
    if len(args.folders) % 2:
        p.error("give folders in BEFORE AFTER pairs")
    pairs = list(zip(args.folders[::2], args.folders[1::2]))
    try:
        for system in args.system or ["ours/hybrid"]:
            print(format_tally(compare(pairs, system), system, args.questions))
    except (FileNotFoundError, KeyError) as exc:
        print(f"error: {exc.args[0]}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
