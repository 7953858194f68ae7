"""Re-chunk a finished run with new planner settings, never re-running a converter.

    python -m jobs.rechunk --config configs/local.yaml --from output/run [--output DIR] [--set planner.target_chars=600]
    python -m jobs.rechunk --from output/run --set planner.kind=llm --set planner.llm_backend=openai

The converted Markdown is the expensive artefact, and it is persisted: this job reads the run's converted batches
and documents, re-plans every segment with the NEW config through :func:`chunker.run.segment.plan_segment` (the
function the ingest's plan stage calls), re-embeds the chunks and loads them through
:class:`chunker.run.writer.Writer`, the ingest's writer: commit, delete stale chunks and older versions, ledger.
A document with a segment that cannot be re-planned (or was never converted) keeps its old chunks in Milvus and is
reported. The output folder (default: RUN-rechunk-<config hash>) gets elements/, chunks/, documents/, the ledger,
summary.json and the planning report; every chunk records its planner and the new config hash.

It runs as a plain loop in this process, without Ray: planning is cheap next to conversion (IDs in, IDs out), and the
embedder and the single Milvus writer are local anyway.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from chunker.cli import ExitCode, base_parser, load_or_exit
from chunker.config import Config, config_hash
from chunker.errors import SetupError
from chunker.plan import Planner, make_planner
from chunker.plan.report import PlanningStats, build_report, format_report
from chunker.run.layout import BATCHES, CHUNKS, DOCUMENTS, ELEMENTS, SUMMARY, RunStore
from chunker.run.ledger import Ledger, store_target
from chunker.run.report import read_report, write_report
from chunker.run.rows import SegmentRow
from chunker.run.segment import SegmentOutcome, failed, plan_segment
from chunker.run.writer import Writer
from chunker.schemas import CHUNK, CONVERTED_BATCH, DOCUMENT, ELEMENT, from_table, read_documents, to_table
from chunker.types import ConvertedBatch, DocumentRecord, Problem, SegmentJob, Stage, Status
from jobs.common import setup_logging


class RechunkError(SetupError):
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
    kept_old: list[str] = field(default_factory=list)  # documents left as they were in Milvus (a segment failed)
    collection_rows: int = 0
    planner: str = ""
    config_hash: str = ""
    source_run: str = ""
    output: str = ""
    seconds: float = 0.0
    problems: list[dict[str, str]] = field(default_factory=list)


def _jobs(doc: DocumentRecord, segs: dict[int, list[ConvertedBatch]],
          cfg: Config) -> list[tuple[SegmentJob, Problem | None]]:
    """The segments of a document as persisted: a job rebuilt from each segment's batches (only its identity and
    page span matter for planning), and one more, failed, for pages the source run never converted."""
    spans: dict[int, tuple[int, int, int]] = {}
    for i, batches in segs.items():
        owned = [b for b in batches if not b.context_only] or batches
        spans[i] = (min(b.page_start for b in owned), max(b.page_end for b in owned), min(b.page_start for b in batches))
    covered = {p for a, b, _ in spans.values() for p in range(a, b + 1)}
    missing = [p for p in range(1, doc.num_pages + 1) if p not in covered]
    count = len(spans) + (1 if missing else 0)

    def job(i: int, a: int, b: int, c: int) -> SegmentJob:
        return SegmentJob(doc_id=doc.doc_id, source_uri=doc.source_uri, source=doc.source, num_pages=doc.num_pages,
                          segment_index=i, num_segments=count, page_start=a, page_end=b, context_start=c,
                          batch_pages=cfg.intake.batch_pages, identity=doc.identity)

    out: list[tuple[SegmentJob, Problem | None]] = [(job(i, a, b, c), None) for i, (a, b, c) in sorted(spans.items())]
    if missing:
        gap = job(max(spans) + 1, missing[0], missing[-1], missing[0])
        out.append((gap, Problem(Stage.CONVERT, "not_converted",
                                 f"{len(missing)} pages were not converted in the source run")))
    return out


def load_run(src: RunStore) -> tuple[list[DocumentRecord], dict[str, dict[int, list[ConvertedBatch]]]]:
    """The source run's documents and its converted batches, per document and segment, in batch order."""
    table = src.read(BATCHES, CONVERTED_BATCH)
    if table.num_rows == 0:
        raise RechunkError(f"no converted batches under {src.path(BATCHES)}: nothing to re-chunk")
    by_doc: dict[str, dict[int, list[ConvertedBatch]]] = defaultdict(lambda: defaultdict(list))
    for b in from_table(table.select([n for n in CONVERTED_BATCH.names if n in table.column_names]), ConvertedBatch):
        by_doc[b.doc_id][b.segment_index].append(b)
    for segs in by_doc.values():
        for batches in segs.values():
            batches.sort(key=lambda b: b.batch_index)
    docs = read_documents(src.read(DOCUMENTS, DOCUMENT))
    # The identity was found once, at intake, from the PDF: re-chunking never reads the PDF again, so it comes from
    # the source run (its documents table; a run written before that table held it, from its chunks). Lost, every
    # chunk would be embedded without it and rank like a chunk of any other filing with the same wording.
    missing = {d.doc_id for d in docs if not d.identity}
    if missing:
        chunks = src.read(CHUNKS, CHUNK)
        found: dict[str, str] = {}
        if "identity" in chunks.column_names:
            for doc_id, ident in zip(chunks.column("doc_id").to_pylist(), chunks.column("identity").to_pylist()):
                if doc_id in missing and ident and doc_id not in found:
                    found[doc_id] = ident
        docs = [replace(d, identity=found.get(d.doc_id, "")) if d.doc_id in found else d for d in docs]
    known = {d.doc_id for d in docs}
    # Batches of a document the documents table lacks (an interrupted run) are still re-chunked, under its ID.
    docs += [DocumentRecord(doc_id=d, source_uri="", source=d, num_pages=0) for d in by_doc if d not in known]
    return docs, by_doc


async def _replan(docs: list[DocumentRecord], by_doc: dict[str, dict[int, list[ConvertedBatch]]], cfg: Config,
                  h: str, planner: Planner, out: RunStore) -> tuple[list[tuple[DocumentRecord, list[SegmentOutcome]]], PlanningStats]:
    stats = PlanningStats(planner=cfg.planner.kind)
    planned: list[tuple[DocumentRecord, list[SegmentOutcome]]] = []
    for doc in docs:
        segs = by_doc.get(doc.doc_id, {})
        if not segs:
            planned.append((doc, []))  # failed or skipped at intake/conversion: nothing persisted to re-plan
            continue
        # The intake outcome is what it was; conversion and planning are judged again from the batches.
        intake = replace(doc, status=Status.OK, problems=[p for p in doc.problems if p.stage == Stage.INTAKE])
        results: list[SegmentOutcome] = []
        for job, problem in _jobs(doc, segs, cfg):
            if problem is not None:
                results.append(failed(job, problem))
                continue
            res = await plan_segment(job, segs[job.segment_index], planner, h)
            out.write_segment(ELEMENTS, doc.doc_id, job.segment_index, to_table(res.elements, ELEMENT, config_hash=h))
            out.write_segment(CHUNKS, doc.doc_id, job.segment_index, to_table(res.chunks, CHUNK), job.source_uri)
            stats.plan_ms += res.plan_ms
            stats.segments += 1
            results.append(res)
        planned.append((intake, results))
    return planned, stats


def run_rechunk(cfg: Config, source_run: str, output: str | None = None, backend: Any = None,
                embedder: Any = None) -> RechunkSummary:
    """Re-plan, re-embed and reload a persisted run. ``backend`` / ``embedder`` inject a model backend for the
    LLM planner and an embedder (tests); otherwise the config builds them."""
    from chunker.index.bulk import ChunkSink
    from chunker.index.store import ChunkStore

    t0 = time.perf_counter()
    h = config_hash(cfg)
    src = RunStore(source_run)
    out = RunStore(output or f"{source_run.rstrip('/')}-rechunk-{h}")
    docs, by_doc = load_run(src)
    previous = {r["chunk_id"] for r in src.read(CHUNKS, CHUNK).select(["chunk_id"]).to_pylist()}
    planner = make_planner(cfg, backend)

    async def replan() -> tuple[list[tuple[DocumentRecord, list[SegmentOutcome]]], PlanningStats]:
        try:
            return await _replan(docs, by_doc, cfg, h, planner, out)
        finally:
            await planner.close()

    planned, stats = asyncio.run(replan())
    llm_stats = getattr(planner, "stats", None)
    if llm_stats is not None:
        stats.merge(replace(llm_stats, segments=0, plan_ms=0.0))  # time is already counted per segment
    else:
        stats.sections = stats.segments

    if embedder is None:
        from chunker.index.embed import Embedder

        embedder = Embedder(cfg.embed)
    store = ChunkStore(cfg.milvus, embedder.dim)
    try:
        writer = Writer(store, ChunkSink(store, cfg.milvus), Ledger(out.uri, h, store_target(cfg.milvus.uri,
                        cfg.milvus.collection)), out, h, cfg.converter.max_fallback_share,
                        cfg.milvus.upsert_batch, cfg.milvus.commit_interval_s)
        writer.consume(_rows(planned, embedder))
        store.flush()
        collection_rows = store.count()
    finally:
        store.close()

    outcomes = [seg for _, segs in planned for seg in segs]
    chunks = [c for s in outcomes for c in s.chunks]
    report = build_report(chunks, [e.element_id for s in outcomes for e in s.elements], stats, config_hash=h)
    write_report(out, report)
    t = writer.totals
    summary = RechunkSummary(
        documents=t.documents, ok=t.by_status.get("ok", 0), partial=t.by_status.get("partial", 0),
        failed=t.by_status.get("failed", 0), segments=stats.segments, chunks=len(chunks),
        previous_chunks=len(previous), unchanged_chunks=len(previous & {c.chunk_id for c in chunks}),
        kept_old=list(writer.kept_old), collection_rows=int(collection_rows), planner=cfg.planner.kind,
        config_hash=h, source_run=src.root, output=out.root, seconds=round(time.perf_counter() - t0, 2),
        problems=t.problems,
    )
    out.write_json(SUMMARY, {**asdict(summary), "planning": report})
    return summary


def _rows(planned: list[tuple[DocumentRecord, list[SegmentOutcome]]], embedder: Any) -> Iterator[SegmentRow]:
    """The writer's rows: one per re-planned segment, embedded here (one encode call per document)."""
    for doc, segs in planned:
        if not segs:
            yield SegmentRow(doc)
            continue
        chunks = [c for s in segs for c in s.chunks]
        for c in chunks:
            c.source, c.source_uri, c.identity = doc.source, doc.source_uri, doc.identity
        vecs = embedder.encode_chunks(chunks) if chunks else None
        start = 0
        for s in segs:
            n = len(s.chunks)
            yield SegmentRow(doc, job=s.job, facts=s.facts, chunks=s.chunks,
                             vectors=None if vecs is None else vecs[start:start + n])
            start += n


def print_summary(s: RechunkSummary) -> None:
    print(f"\n== rechunk summary ({s.source_run} -> {s.output}) ==")
    print(f"documents: {s.documents}  ok: {s.ok}  partial: {s.partial}  failed: {s.failed}  segments: {s.segments}")
    print(f"chunks: {s.chunks} (before: {s.previous_chunks}, unchanged: {s.unchanged_chunks})  "
          f"collection rows: {s.collection_rows}")
    print(f"planner: {s.planner}  config hash: {s.config_hash}  time: {s.seconds:.1f} s")
    for d in s.kept_old:
        print(f"  kept old chunks of {d}: part of it could not be re-planned")
    for p in s.problems:
        print(f"  {p['status']:8s} {p['source']}: {p['reason']}")


def main(argv: list[str] | None = None, prog: str = "python -m jobs.rechunk") -> int:
    p = base_parser("Re-plan, re-embed and reload the chunks of a finished run; no conversion is re-run.", prog)
    p.add_argument("--from", dest="source_run", required=True, help="the run output folder to re-chunk")
    p.add_argument("--output", default=None, help="output folder (default: <from>-rechunk-<config hash>)")
    args = p.parse_args(argv)
    setup_logging()
    cfg = load_or_exit(args)
    try:
        summary = run_rechunk(cfg, args.source_run, args.output)
    except SetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        # A --from that holds nothing to re-chunk is bad input; a store or model that fails is setup.
        return ExitCode.USAGE if isinstance(exc, RechunkError) else ExitCode.SETUP
    print_summary(summary)
    print(format_report(read_report(RunStore(summary.output))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
