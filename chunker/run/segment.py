"""One segment through conversion and planning: the work every driver runs (the Ray stages, ``jobs.rechunk``, the
tests), so what the tests check is what production runs.

Each step keeps a failure on the segment as a typed :class:`~chunker.types.Problem` and returns: one broken
document never raises out of here. Only a :class:`~chunker.errors.SetupError` (no model, no GPU, a dead engine)
propagates, because no other document could succeed either.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from typing import Any

from chunker.config import Config
from chunker.contract import parse_batches
from chunker.convert.base import ON_BATCH, Converter
from chunker.convert.render import RenderedDocument
from chunker.errors import DocumentError, SetupError
from chunker.plan import Planner
from chunker.run import faults
from chunker.run.verdict import SegmentFacts
from chunker.types import BatchContext, Chunk, ConvertedBatch, Element, Problem, SegmentJob, Stage, safe_text


@dataclass
class SegmentOutcome:
    """A segment after conversion and planning (or after the step that failed)."""

    job: SegmentJob
    facts: SegmentFacts
    batches: list[ConvertedBatch] = field(default_factory=list)
    elements: list[Element] = field(default_factory=list)
    chunks: list[Chunk] = field(default_factory=list)
    convert_s: float = 0.0
    plan_ms: float = 0.0

    @property
    def tokens(self) -> int:
        return int(sum(b.output_tokens or 0 for b in self.batches if not b.context_only))


def owned_pages(job: SegmentJob) -> int:
    return job.page_end - job.page_start + 1


def problem_of(exc: BaseException, stage: Stage, what: str) -> Problem:
    """A typed problem for an exception caught at ``stage`` (``what`` names the step for people)."""
    if isinstance(exc, DocumentError):
        return Problem(exc.stage, exc.code, f"{what}: {exc}")
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return Problem(stage, "timeout", f"{what} timed out")
    return Problem(stage, "error", f"{what}: {type(exc).__name__}: {safe_text(str(exc))[:500]}")


@contextmanager
def row_guard(row: Any, stage: Stage, what: str) -> Iterator[None]:
    """Whatever the block raises for one pipeline row (a :class:`SetupError` aside) fails that row's segment at
    ``stage`` (``row`` is a :class:`chunker.run.rows.SegmentRow`): one row never takes its block down, and with it
    the Ray Dataset and the run."""
    try:
        yield
    except SetupError:
        raise
    except Exception as exc:  # noqa: BLE001 - the row's own outcome, never the run's
        row.fail(problem_of(exc, stage, what))


async def guarded(row: Any, stage: Stage, what: str, step: Awaitable[None]) -> None:
    """Await ``step`` (the work on ``row``) under :func:`row_guard`."""
    with row_guard(row, stage, what):
        await step


def failed(job: SegmentJob, problem: Problem) -> SegmentOutcome:
    """The outcome of a segment whose step failed: no chunks, the reason on it."""
    return SegmentOutcome(job, SegmentFacts(job.segment_index, owned_pages(job), failed=True, problems=[problem]))


def _clean(batch: ConvertedBatch) -> ConvertedBatch:
    # Whatever a PDF or a model wrote, it reaches Arrow, Parquet and Milvus as valid UTF-8 (see safe_text).
    for f in fields(batch):
        value = getattr(batch, f.name)
        if isinstance(value, str):
            setattr(batch, f.name, safe_text(value))
    return batch


async def convert_segment(converter: Converter, job: SegmentJob, cfg: Config, *, source_path: str | None = None,
                          timeout_s: float | None = None,
                          on_batch: Callable[[ConvertedBatch], None] | None = None) -> list[ConvertedBatch] | Problem:
    """The segment's batches, in order, or the problem that stopped its conversion.

    ``source_path`` is a local copy of the PDF (fetched from object storage); the job, and so every chunk, keeps
    the original URI. Pages are rendered on demand and released when the segment is done. ``on_batch`` hears of each
    batch as soon as it is converted (the progress line), before the segment is done.
    """
    run_job = job if source_path is None else replace(job, source_uri=source_path)
    images: RenderedDocument | None = None
    listening = ON_BATCH.set(on_batch)  # this task's context: segments converting beside it keep their own
    try:
        faults.check("render", job.source)
        images = RenderedDocument(run_job.source_uri, cfg.render) if converter.needs_images() else None
        faults.check("convert", job.source)
        batches = await asyncio.wait_for(converter.convert(run_job, images), timeout_s)
    except SetupError:
        raise
    except asyncio.TimeoutError:
        return Problem(Stage.CONVERT, "timeout", f"conversion timed out after {timeout_s:.0f} s")
    except Exception as exc:  # noqa: BLE001 - one broken document fails alone, with the reason
        return problem_of(exc, Stage.CONVERT, "conversion")
    finally:
        ON_BATCH.reset(listening)
        if images is not None:
            images.close()
    return [_clean(b) for b in batches]


async def plan_segment(job: SegmentJob, batches: list[ConvertedBatch], planner: Planner,
                       cfg_hash: str) -> SegmentOutcome:
    """Parse a segment's Markdown into elements and plan its chunks; a broken plan fails the segment."""
    t0 = time.perf_counter()
    facts = SegmentFacts.from_batches(job.segment_index, owned_pages(job), batches)
    out = SegmentOutcome(job, facts, batches)
    what = "parsing the Markdown"
    try:
        faults.check("parse", job.source)
        seed = BatchContext()
        overlap = [b for b in batches if b.context_only]
        if overlap and overlap[-1].context_out:
            # The segment starts under the headings its overlap left open, at their levels (see
            # chunker.intake.segments).
            seed = BatchContext.from_json(overlap[-1].context_out)
        out.elements = parse_batches(job.doc_id, batches, job.segment_index, seed.heading_path, seed.heading_levels)
        what = "chunk planning"
        faults.check("plan", job.source)
        out.chunks = await planner.chunks(out.elements, cfg_hash, job.source, job.source_uri)
        for c in out.chunks:
            c.identity = job.identity
    except SetupError:
        raise
    except Exception as exc:  # noqa: BLE001 - a plan that breaks coverage (or a parser defect) fails this segment
        out.chunks = []
        facts.failed = True
        facts.problems.append(problem_of(exc, Stage.PLAN, what))
    out.plan_ms = (time.perf_counter() - t0) * 1000
    return out


async def process_segment(converter: Converter, planner: Planner, job: SegmentJob, cfg: Config, cfg_hash: str,
                          *, source_path: str | None = None, timeout_s: float | None = None) -> SegmentOutcome:
    """Convert then plan one segment: what a driver without separate stages (rechunk aside) runs."""
    t0 = time.perf_counter()
    batches = await convert_segment(converter, job, cfg, source_path=source_path, timeout_s=timeout_s)
    if isinstance(batches, Problem):
        return failed(job, batches)
    convert_s = time.perf_counter() - t0
    out = await plan_segment(job, batches, planner, cfg_hash)
    out.convert_s = convert_s
    return out
