"""The per-segment stage functions, shared by the Ray job (``jobs.ingest``) and the pure-Python path used by tests,
re-chunking and debugging (:func:`process_document`). No Ray here."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from chunker.config import Config, config_hash
from chunker.convert.base import Converter
from chunker.intake.files import InputFile, inspect, plan_segments
from chunker.contract import parse_batches
from chunker.plan.deterministic import CoverageError, build_chunks, plan
from chunker.convert.render import RenderedDocument
from chunker.types import BatchContext, Chunk, ConvertedBatch, DocumentRecord, Element, SegmentJob, Status

MODEL_BACKENDS = ("vllm", "openai", "transformers", "simulated", "scripted")


def make_converter(cfg: Config, cfg_hash: str | None = None, backend: object | None = None) -> Converter:
    """The converter the config names. ``backend`` injects a model backend (tests, benchmarks)."""
    from chunker.convert.pdf_text import PdfTextConverter

    h = cfg_hash if cfg_hash is not None else config_hash(cfg)
    text = PdfTextConverter(cfg.converter, h, password=cfg.intake.password)
    if cfg.converter.backend == "pdf-text":
        return text
    from chunker.convert.vlm import VlmConverter

    if backend is None:
        from chunker.backends.registry import backend_for

        backend = backend_for(cfg)
    return VlmConverter(cfg.converter, backend, fallback=text, config_hash=h)


async def convert_segment(converter: Converter, job: SegmentJob, cfg: Config) -> list[ConvertedBatch]:
    """Run one segment's chain; rendered pages are produced on demand and released after the segment."""
    images = RenderedDocument(job.source_uri, cfg.render) if converter.needs_images() else None
    try:
        return await converter.convert(job, images)
    finally:
        if images is not None:
            images.close()


@dataclass
class SegmentResult:
    job: SegmentJob
    batches: list[ConvertedBatch]
    elements: list[Element] = field(default_factory=list)
    chunks: list[Chunk] = field(default_factory=list)
    status: Status = "ok"
    error: str = ""
    fallback_pages: int = 0
    plan_ms: float = 0.0


def segment_status(job: SegmentJob, batches: list[ConvertedBatch], max_fallback_share: float) -> tuple[Status, str]:
    """ok, or partial with the reasons.

    Fallback pages are judged by their share (see :func:`chunker.convert.vlm.document_status`); a batch that was
    retried and then answered well stays ok; an error on a batch that was neither retried nor replaced (a page the
    text layer could not read) makes the segment partial.
    """
    from chunker.convert.vlm import document_status

    owned = [b for b in batches if not b.context_only]
    status, reason = document_status(owned, max_fallback_share)
    lost = [b.error for b in owned if b.error and not b.fallback and b.attempts <= 1]
    reasons = ([reason] if status == "partial" else []) + lost
    if reasons:
        return "partial", "; ".join(reasons)[:2000]
    return "ok", reason


# --- planner dispatch (planner.kind: deterministic | llm) ---------------------------------------------------------
if TYPE_CHECKING:  # the LLM planner (and any model backend) is imported only when the config asks for it
    from chunker.plan.llm import LlmPlanner


def planner_for(cfg: Config, backend: object | None = None) -> LlmPlanner | None:
    """The LLM planner the config asks for (``None`` for the deterministic planner, which needs no object).

    ``backend`` injects a model backend (tests, a shared engine); otherwise ``planner.llm_backend`` (or, when empty,
    the converter's backend) is built with the converter's model options. Build it once per worker and pass it to
    :func:`plan_segment`: it holds the backend, its event loop and the planning counters.
    """
    if cfg.planner.kind != "llm":
        return None
    from chunker.plan.llm import LlmPlanner

    if backend is None:
        from chunker.backends.registry import make_backend

        name = cfg.planner.llm_backend or cfg.converter.backend
        if name == "pdf-text":
            raise ValueError("planner.kind=llm needs a model: set planner.llm_backend (vllm, openai, transformers, "
                             "scripted) or use a model converter backend")
        backend = make_backend(cfg.converter.model_copy(update={"backend": name}),
                               batch_pages=cfg.intake.batch_pages, max_side_px=cfg.render.max_side_px)
    return LlmPlanner(cfg.planner, backend, temperature=cfg.converter.model.temperature)  # type: ignore[arg-type]


def plan_segment(job: SegmentJob, batches: list[ConvertedBatch], cfg: Config, cfg_hash: str,
                 planner: LlmPlanner | None = None) -> SegmentResult:
    """Parse a segment's Markdown into elements and plan its chunks. A coverage violation fails the segment.

    ``cfg.planner.kind`` picks the planner; for ``llm``, ``planner`` is the worker's :func:`planner_for` object
    (one is built for this call when it is missing, which re-creates the backend: fine for tests, slow otherwise).
    """
    t0 = time.perf_counter()
    seed: list[str] = []
    overlap = [b for b in batches if b.context_only]
    if overlap and overlap[-1].context_out:
        # The segment starts under the headings its overlap left open (see chunker.intake.files.plan_segments).
        seed = BatchContext.from_json(overlap[-1].context_out).heading_path
    status, error = segment_status(job, batches, cfg.converter.max_fallback_share)
    result = SegmentResult(job=job, batches=batches, status=status, error=error,
                           fallback_pages=sum(len(b.fallback_pages) for b in batches if not b.context_only))
    try:
        result.elements = parse_batches(job.doc_id, batches, job.segment_index, seed)
        if cfg.planner.kind == "llm":
            llm = planner if planner is not None else planner_for(cfg)
            assert llm is not None
            try:
                result.chunks = llm.chunks_sync(result.elements, cfg_hash, job.source, job.source_uri)
            finally:
                if llm is not planner:
                    llm.close()  # built for this call only: release its event loop
        else:
            plans = plan(result.elements, cfg.planner)
            result.chunks = build_chunks(result.elements, plans, cfg.planner, cfg_hash, job.source, job.source_uri)
    except CoverageError as exc:
        result.status, result.error, result.chunks = "failed", f"chunk planning: {exc}", []
    result.plan_ms = (time.perf_counter() - t0) * 1000
    return result


@dataclass
class DocumentResult:
    document: DocumentRecord
    batches: list[ConvertedBatch] = field(default_factory=list)
    elements: list[Element] = field(default_factory=list)
    chunks: list[Chunk] = field(default_factory=list)


def merge_status(doc: DocumentRecord, segments: list[SegmentResult]) -> DocumentRecord:
    """A document is failed when every segment failed, partial when any segment is not ok."""
    if doc.status == "failed" or not segments:
        return doc
    statuses = [s.status for s in segments]
    errors = "; ".join(f"segment {s.job.segment_index}: {s.error}" if len(segments) > 1 else s.error
                       for s in segments if s.error)
    if all(st == "failed" for st in statuses):
        doc.status = "failed"
    elif any(st != "ok" for st in statuses):
        doc.status = "partial"
    doc.error = errors[:4000]
    return doc


def process_document(path: Path | str, cfg: Config, input_root: Path | str | None = None,
                     converter: Converter | None = None) -> DocumentResult:
    """Convert, parse and plan one document in this process (no Ray, no embedding, no store)."""
    path = Path(path)
    root = Path(input_root) if input_root else path.parent
    h = config_hash(cfg)
    doc = inspect(InputFile(path=str(path), source=str(path.relative_to(root))), cfg.intake)
    if doc.status == "failed":
        return DocumentResult(document=doc)
    conv = converter or make_converter(cfg, h)
    segments: list[SegmentResult] = []
    for job in plan_segments(doc, cfg.intake):
        batches = asyncio.run(convert_segment(conv, job, cfg))
        segments.append(plan_segment(job, batches, cfg, h))
    return DocumentResult(
        document=merge_status(doc, segments),
        batches=[b for s in segments for b in s.batches],
        elements=[e for s in segments for e in s.elements],
        chunks=[c for s in segments for c in s.chunks],
    )
