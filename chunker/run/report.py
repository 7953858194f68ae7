"""The planning report and the chunk-health report of a run folder: built from its chunks/ and elements/ tables,
written beside them."""

from __future__ import annotations

from typing import Any

import pyarrow.parquet as pq

from chunker.plan.health import Health, format_health
from chunker.plan.histogram_png import bar_chart_png
from chunker.plan.report import PlanningStats, build_report, format_report
from chunker.run.layout import CHUNK_HEALTH, CHUNKS, ELEMENTS, PLANNING_REPORT, RunStore
from chunker.schemas import CHUNK, ELEMENT, from_table
from chunker.types import Chunk, Element


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


def _doc_of_part(path: str) -> str:
    """The document a part belongs to: part names start with its doc_id (chunker.run.layout.segment_part)."""
    return path.rsplit("/", 1)[-1].split("-", 1)[0]


def health_for_run(store: RunStore) -> dict[str, Any]:
    """The chunk-health report of a run folder (chunker.plan.health), read one document's parts at a time so a
    large run is never held in memory at once."""
    elements_of: dict[str, list[str]] = {}
    for p in store.parts(ELEMENTS):
        elements_of.setdefault(_doc_of_part(p), []).append(p)
    chunks_of: dict[str, list[str]] = {}
    for p in store.parts(CHUNKS):
        chunks_of.setdefault(_doc_of_part(p), []).append(p)
    health = Health()
    for doc_id, parts in chunks_of.items():
        chunks = [c for p in parts for c in from_table(pq.read_table(p, filesystem=store.fs), Chunk)]
        elements = [e for p in elements_of.get(doc_id, [])
                    for e in from_table(pq.read_table(p, filesystem=store.fs), Element)]
        health.add(doc_id, chunks, elements)
    return health.report()


def write_health(store: RunStore, report: dict[str, Any]) -> None:
    """``chunk_health.json``, ``.txt`` and ``.png`` (the size histogram, fragments marked) in the run folder."""
    store.write_json(f"{CHUNK_HEALTH}.json", report)
    store.write_text(f"{CHUNK_HEALTH}.txt", format_health(report) + "\n")
    hist = report["histogram"]
    store.write_bytes(f"{CHUNK_HEALTH}.png", bar_chart_png(hist["edges"], hist["counts"], report["fragment_chars"]))
