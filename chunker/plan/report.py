"""The planning report: what a set of chunk plans looks like and what it cost.

Chunk sizes (characters of the chunk text, breadcrumb included: what the embedder sees), elements per chunk,
coverage (elements placed / elements parsed), repairs by kind and fallbacks of the LLM planner, planning time and
LLM tokens. One JSON object (for machines and diffs between runs) and a plain table (for people). Any job that
plans chunks can build one: re-chunking does, ingest can from its chunks and elements tables.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from chunker.types import Chunk


@dataclass
class PlanningStats:
    """Counters a planner accumulates over the segments it plans (the deterministic one only has time)."""

    planner: str = "deterministic"
    segments: int = 0
    sections: int = 0
    llm_calls: int = 0
    fallbacks: int = 0  # sections planned by the deterministic fallback
    fallback_reasons: dict[str, int] = field(default_factory=dict)
    repairs: dict[str, int] = field(default_factory=dict)
    input_tokens: int = 0
    output_tokens: int = 0
    plan_ms: float = 0.0

    def count_repairs(self, repairs: dict[str, int]) -> None:
        for kind, n in repairs.items():
            if n:
                self.repairs[kind] = self.repairs.get(kind, 0) + n

    def count_fallback(self, reason: str) -> None:
        self.fallbacks += 1
        self.fallback_reasons[reason] = self.fallback_reasons.get(reason, 0) + 1

    def merge(self, other: "PlanningStats") -> None:
        self.segments += other.segments
        self.sections += other.sections
        self.llm_calls += other.llm_calls
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.plan_ms += other.plan_ms
        self.count_repairs(other.repairs)
        self.fallbacks += other.fallbacks
        for reason, n in other.fallback_reasons.items():
            self.fallback_reasons[reason] = self.fallback_reasons.get(reason, 0) + n


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100); 0 for no values."""
    if not values:
        return 0.0
    xs = sorted(values)
    k = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    return float(xs[lo] + (xs[hi] - xs[lo]) * (k - lo))


def build_report(chunks: list[Chunk], element_ids: list[str], stats: PlanningStats,
                 config_hash: str = "") -> dict[str, Any]:
    """The report as a JSON-ready dict. ``element_ids``: every element that had to be placed."""
    sizes = [len(c.text) for c in chunks]
    per_chunk = [len(c.element_ids) for c in chunks]
    expected = set(element_ids)
    placed = [i for c in chunks for i in c.element_ids]
    covered = len(expected & set(placed))
    by_planner: dict[str, int] = {}
    for c in chunks:
        by_planner[c.planner] = by_planner.get(c.planner, 0) + 1
    n = len(chunks)
    return {
        "planner": stats.planner,
        "config_hash": config_hash,
        "chunks": {
            "count": n,
            "mean_chars": round(sum(sizes) / n, 1) if n else 0.0,
            "p50_chars": round(percentile(sizes, 50), 1),
            "p95_chars": round(percentile(sizes, 95), 1),
            "min_chars": min(sizes, default=0),
            "max_chars": max(sizes, default=0),
            "by_planner": dict(sorted(by_planner.items())),
        },
        "elements_per_chunk": {
            "mean": round(sum(per_chunk) / n, 2) if n else 0.0,
            "max": max(per_chunk, default=0),
        },
        "coverage": {
            "covered": covered,
            "total": len(expected),
            "ratio": round(covered / len(expected), 6) if expected else 1.0,
            # Placed more than once or not among the elements: both must stay 0 (verify_coverage guards it).
            "repeated": len(placed) - len(set(placed)),
            "unknown": len(set(placed) - expected),
        },
        "repairs": dict(sorted(stats.repairs.items())),
        "repairs_total": sum(stats.repairs.values()),
        "fallbacks": {"sections": stats.fallbacks, "reasons": dict(sorted(stats.fallback_reasons.items()))},
        "segments": stats.segments,
        "sections": stats.sections,
        "llm_calls": stats.llm_calls,
        "llm_tokens": {"input": stats.input_tokens, "output": stats.output_tokens},
        "planning_ms": round(stats.plan_ms, 1),
    }


def format_report(report: dict[str, Any]) -> str:
    """A two-column plain-text table of the report."""
    c, e, cov = report["chunks"], report["elements_per_chunk"], report["coverage"]
    rows = [
        ("planner", report["planner"]),
        ("config hash", report.get("config_hash", "")),
        ("chunks", str(c["count"])),
        ("chunk chars mean / p50 / p95", f"{c['mean_chars']:.0f} / {c['p50_chars']:.0f} / {c['p95_chars']:.0f}"),
        ("chunk chars min / max", f"{c['min_chars']} / {c['max_chars']}"),
        ("chunks by planner", ", ".join(f"{k}: {v}" for k, v in c["by_planner"].items()) or "-"),
        ("elements per chunk mean / max", f"{e['mean']:.2f} / {e['max']}"),
        ("coverage", f"{cov['covered']} / {cov['total']} ({100 * cov['ratio']:.2f}%)"),
        ("repairs", ", ".join(f"{k}: {v}" for k, v in report["repairs"].items()) or "none"),
        ("fallback sections", f"{report['fallbacks']['sections']}"
         + (f" ({', '.join(f'{k}: {v}' for k, v in report['fallbacks']['reasons'].items())})"
            if report["fallbacks"]["reasons"] else "")),
        ("segments / sections / llm calls", f"{report['segments']} / {report['sections']} / {report['llm_calls']}"),
        ("llm tokens in / out", f"{report['llm_tokens']['input']} / {report['llm_tokens']['output']}"),
        ("planning time", f"{report['planning_ms'] / 1000:.2f} s"),
    ]
    width = max(len(k) for k, _ in rows)
    lines = ["== planning report =="] + [f"{k.ljust(width)}  {v}" for k, v in rows]
    return "\n".join(lines)


def stats_dict(stats: PlanningStats) -> dict[str, Any]:
    return asdict(stats)
