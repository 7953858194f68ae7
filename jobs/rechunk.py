"""Re-chunk a finished run with new planner settings, never re-running a converter.

    python -m jobs.rechunk --config configs/local.yaml --from output/run [--output DIR] [--set planner.target_chars=600]
    python -m jobs.rechunk --from output/run --set planner.kind=llm --set planner.llm_backend=openai

The converted Markdown is the expensive artefact, and it is persisted: this job reads RUN/batches/*.parquet
(converted batches) and RUN/documents/documents.parquet, re-parses and re-plans every segment with the NEW config
through :func:`chunker.run.segment.plan_segment` (deterministic or LLM planner), re-embeds the chunks and reloads
Milvus: per document, upsert the new chunks, then delete that document's chunks the new plan no longer has. A
document whose re-plan failed in any segment keeps its old chunks in Milvus and is reported. The output folder
(default: RUN-rechunk-<config hash>) gets elements/, chunks/, documents/, summary.json and planning_report.json/.txt;
every chunk records its planner and the new config hash.

It runs as a plain loop in this process, without Ray: planning is cheap next to conversion (IDs in, IDs out), and the
embedder and the single Milvus writer are local anyway. A corpus large enough to need it can fan the per-segment
loop out as Ray tasks later; the per-segment function is already the one the ingest stage calls.
"""

from __future__ import annotations

import sys
import time
from collections import defaultdict
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from chunker.config import Config, config_hash
from chunker.run.segment import SegmentResult, merge_status, plan_segment, planner_for
from chunker.plan.report import PlanningStats, build_report, format_report, write_report
from chunker.run.layout import RunStore
from chunker.schemas import CHUNK, CONVERTED_BATCH, DOCUMENT, ELEMENT, from_table, to_table
from chunker.types import Chunk, ConvertedBatch, DocumentRecord, SegmentJob
from jobs.common import base_parser, load_or_exit, setup_logging


class RechunkError(RuntimeError):
    """The source run cannot be re-chunked (no converted batches, unreadable folder)."""


@dataclass
class RechunkSummary:
    documents: int = 0
    ok: int = 0
    partial: int = 0
    failed: int = 0
    segments: int = 0
    chunks: int = 0
    previous_chunks: int = 0
    unchanged_chunks: int = 0  # chunk IDs the old plan had too (same elements, same document)
    kept_old: list[str] = field(default_factory=list)  # documents left as they were in Milvus (re-plan failed)
    collection_rows: int = 0
    planner: str = ""
    config_hash: str = ""
    source_run: str = ""
    output: str = ""
    seconds: float = 0.0
    problems: list[dict[str, str]] = field(default_factory=list)


def segment_key(doc_id: str, segment_index: int) -> str:
    # Same part name as the ingest stages write (jobs.stages.segment_key), so a rechunk into the run folder itself
    # overwrites the old parts instead of adding to them.
    return f"{doc_id}-{segment_index:05d}"


def _job(doc: DocumentRecord, segment_index: int, num_segments: int, batches: list[ConvertedBatch],
         cfg: Config) -> SegmentJob:
    """The segment's job rebuilt from its batches: only its identity and page span matter for planning."""
    owned = [b for b in batches if not b.context_only] or batches
    return SegmentJob(
        doc_id=doc.doc_id, source_uri=doc.source_uri, source=doc.source, num_pages=doc.num_pages,
        segment_index=segment_index, num_segments=num_segments,
        page_start=min(b.page_start for b in owned), page_end=max(b.page_end for b in owned),
        context_start=min(b.page_start for b in batches), batch_pages=cfg.intake.batch_pages,
    )


def load_run(src: RunStore) -> tuple[list[DocumentRecord], dict[str, dict[int, list[ConvertedBatch]]]]:
    """The source run's documents and its converted batches, per document and segment, in batch order."""
    table = src.read("batches", CONVERTED_BATCH)
    if table.num_rows == 0:
        raise RechunkError(f"no converted batches under {src.path('batches')}: nothing to re-chunk")
    by_doc: dict[str, dict[int, list[ConvertedBatch]]] = defaultdict(lambda: defaultdict(list))
    for b in from_table(table.select([n for n in CONVERTED_BATCH.names if n in table.column_names]), ConvertedBatch):
        by_doc[b.doc_id][b.segment_index].append(b)
    for segs in by_doc.values():
        for batches in segs.values():
            batches.sort(key=lambda b: b.batch_index)
    docs = from_table(src.read("documents", DOCUMENT), DocumentRecord)
    known = {d.doc_id for d in docs}
    # Batches of a document the documents table lacks (an interrupted run) are still re-chunked, under its ID.
    docs += [DocumentRecord(doc_id=d, source_uri="", source=d, num_pages=0, status="ok") for d in by_doc if d not in known]
    return docs, by_doc


def run_rechunk(cfg: Config, source_run: str, output: str | None = None, backend: Any = None,
                embedder: Any = None) -> RechunkSummary:
    """Re-plan, re-embed and reload a persisted run. ``backend`` / ``embedder`` inject a model backend for the
    LLM planner and an embedder (tests); otherwise the config builds them."""
    from chunker.index.store import ChunkStore

    t0 = time.perf_counter()
    h = config_hash(cfg)
    src = RunStore(source_run)
    out = RunStore(output or f"{source_run.rstrip('/')}-rechunk-{h}")
    docs, by_doc = load_run(src)
    previous = {r["chunk_id"] for r in src.read("chunks", CHUNK).select(["chunk_id"]).to_pylist()}
    llm = planner_for(cfg, backend)
    stats = PlanningStats(planner=cfg.planner.kind)
    results: dict[str, list[SegmentResult]] = {}
    records: list[DocumentRecord] = []
    try:
        for doc in docs:
            segs = by_doc.get(doc.doc_id, {})
            if not segs:
                records.append(doc)  # failed or skipped at intake/conversion: nothing persisted to re-plan
                continue
            res = [plan_segment(_job(doc, i, len(segs), segs[i], cfg), segs[i], cfg, h, planner=llm)
                   for i in sorted(segs)]
            for r in res:
                for c in r.chunks:
                    c.source, c.source_uri = doc.source, doc.source_uri
                out.write("elements", segment_key(doc.doc_id, r.job.segment_index),
                          to_table(r.elements, ELEMENT, config_hash=h))
                out.write("chunks", segment_key(doc.doc_id, r.job.segment_index), to_table(r.chunks, CHUNK))
                stats.plan_ms += r.plan_ms
            stats.segments += len(res)
            results[doc.doc_id] = res
            # Conversion problems are re-judged from the batches, planning problems are new; a document that was
            # partial for a reason the batches no longer show (a segment that never converted) stays partial.
            rec = merge_status(replace(doc, status="ok", error=""), res)
            if rec.status == "ok" and doc.status == "partial":
                rec.status, rec.error = doc.status, doc.error
            records.append(rec)
    finally:
        if llm is not None:
            llm.close()
    if llm is not None:
        stats.merge(replace(llm.stats, segments=0, plan_ms=0.0))  # time is already counted per segment
    else:
        stats.sections = stats.segments

    chunks = [c for res in results.values() for r in res for c in r.chunks]
    kept_old, collection_rows = _reload_milvus(cfg, results, embedder, ChunkStore)

    by_doc_chunks = {d: sum(len(r.chunks) for r in res) for d, res in results.items()}
    rows = [{**asdict(r), "num_chunks": by_doc_chunks.get(r.doc_id, 0),
             "fallback_pages": sum(s.fallback_pages for s in results.get(r.doc_id, []))} for r in records]
    out.write("documents", "documents", to_table(rows, DOCUMENT, config_hash=h))
    elements = [e.element_id for res in results.values() for r in res for e in r.elements]
    report = build_report(chunks, elements, stats, config_hash=h)
    write_report(out, report)
    summary = RechunkSummary(
        documents=len(records), ok=sum(r.status == "ok" for r in records),
        partial=sum(r.status == "partial" for r in records), failed=sum(r.status == "failed" for r in records),
        segments=stats.segments, chunks=len(chunks), previous_chunks=len(previous),
        unchanged_chunks=len(previous & {c.chunk_id for c in chunks}), kept_old=list(kept_old),
        collection_rows=int(collection_rows), planner=cfg.planner.kind, config_hash=h, source_run=src.root,
        output=out.root, seconds=round(time.perf_counter() - t0, 2),
        problems=[{"source": r.source, "status": r.status, "reason": r.error} for r in records if r.status != "ok"],
    )
    out.write_json("summary.json", {**asdict(summary), "planning": report})
    return summary


def _reload_milvus(cfg: Config, results: dict[str, list[SegmentResult]], embedder: Any,
                   store_cls: Any) -> tuple[list[str], int]:
    """Embed and load each re-planned document; returns the doc IDs left untouched and the collection's row count."""
    if embedder is None:
        from chunker.index.embed import Embedder

        embedder = Embedder(cfg.embed)
    kept: list[str] = []
    store = store_cls(cfg.milvus, embedder.dim)
    try:
        for doc_id, res in results.items():
            if any(r.status == "failed" for r in res):
                # Part of the new plan is missing: replacing would lose text, so the old chunks stay.
                kept.append(doc_id)
                continue
            chunks: list[Chunk] = [c for r in res for c in r.chunks]
            if chunks:
                store.upsert(chunks, embedder.encode([c.text for c in chunks]))
            store.delete_doc_except(doc_id, {c.chunk_id for c in chunks})
        rows = store.count()
    finally:
        store.close()
    return kept, rows


def print_summary(s: RechunkSummary) -> None:
    print(f"\n== rechunk summary ({s.source_run} -> {s.output}) ==")
    print(f"documents: {s.documents}  ok: {s.ok}  partial: {s.partial}  failed: {s.failed}  segments: {s.segments}")
    print(f"chunks: {s.chunks} (before: {s.previous_chunks}, unchanged: {s.unchanged_chunks})  "
          f"collection rows: {s.collection_rows}")
    print(f"planner: {s.planner}  config hash: {s.config_hash}  time: {s.seconds:.1f} s")
    for d in s.kept_old:
        print(f"  kept old chunks of {d}: its re-plan failed")
    for p in s.problems:
        print(f"  {p['status']:8s} {p['source']}: {p['reason']}")


def main(argv: list[str] | None = None) -> int:
    p = base_parser("Re-plan, re-embed and reload the chunks of a finished run; no conversion is re-run.")
    p.add_argument("--from", dest="source_run", required=True, help="the run output folder to re-chunk")
    p.add_argument("--output", default=None, help="output folder (default: <from>-rechunk-<config hash>)")
    args = p.parse_args(argv)
    setup_logging()
    cfg = load_or_exit(args)
    try:
        summary = run_rechunk(cfg, args.source_run, args.output)
    except (RechunkError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print_summary(summary)
    print(format_report(RunStore(summary.output).read_json("planning_report.json")))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
