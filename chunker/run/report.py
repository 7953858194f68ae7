"""The planning report of a run folder: built from its chunks/ and elements/ tables, written beside them."""

from __future__ import annotations

from typing import Any

from chunker.plan.report import PlanningStats, build_report, format_report
from chunker.run.layout import CHUNKS, ELEMENTS, PLANNING_REPORT, RunStore
from chunker.schemas import CHUNK, ELEMENT, from_table
from chunker.types import Chunk


def write_report(store: RunStore, report: dict[str, Any], name: str = PLANNING_REPORT) -> None:
    """Write ``{name}.json`` and ``{name}.txt`` into the run folder."""
    store.write_json(f"{name}.json", report)
    store.write_text(f"{name}.txt", format_report(report) + "\n")


def read_report(store: RunStore, name: str = PLANNING_REPORT) -> dict[str, Any]:
    return store.read_json(f"{name}.json")


def report_for_run(store: RunStore, stats: PlanningStats | None = None, config_hash: str = "") -> dict[str, Any]:
    """The report of a finished run folder from its chunks/ and elements/ tables (what ingest can call after its
    run). Counters the tables do not hold (repairs, tokens, time) come from ``stats`` when the caller kept them."""
    chunks = from_table(store.read(CHUNKS, CHUNK), Chunk)
    element_ids = store.read(ELEMENTS, ELEMENT).column("element_id").to_pylist()
    if stats is None:
        planners = sorted({c.planner for c in chunks})
        stats = PlanningStats(planner="llm" if any(p != "deterministic" for p in planners) else "deterministic")
    return build_report(chunks, element_ids, stats, config_hash=config_hash)
