"""The lifecycle of one document in this process, without Ray: intake, every segment through
:func:`chunker.run.segment.process_segment`, and the verdict through :class:`chunker.run.assemble.Assembler`.

The same functions the Ray stages call, in the same order, so tests of this path test what production runs. It
stops short of embedding and the store (the writer's job): callers that need those use :mod:`chunker.run.writer`.
"""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from chunker.config import Config, config_hash
from chunker.convert.base import Converter
from chunker.convert.factory import make_converter
from chunker.intake.inputs import InputFile
from chunker.intake.prepare import prepare
from chunker.intake.segments import plan_segments
from chunker.plan import Planner, make_planner
from chunker.run.assemble import Assembler, DocumentOutcome
from chunker.run.segment import SegmentOutcome, process_segment
from chunker.types import Chunk, ConvertedBatch, Element


@dataclass
class DocumentResult:
    outcome: DocumentOutcome
    segments: list[SegmentOutcome] = field(default_factory=list)

    @property
    def document(self):  # noqa: ANN201 - DocumentRecord
        return self.outcome.record

    @property
    def batches(self) -> list[ConvertedBatch]:
        return [b for s in self.segments for b in s.batches]

    @property
    def elements(self) -> list[Element]:
        return [e for s in self.segments for e in s.elements]

    @property
    def chunks(self) -> list[Chunk]:
        return [c for s in self.segments for c in s.chunks]


async def process_document_async(path: Path | str, cfg: Config, input_root: Path | str | None = None,
                                 converter: Converter | None = None, planner: Planner | None = None) -> DocumentResult:
    """Intake, convert, parse and plan one document; the verdict decides its status."""
    path = Path(path)
    root = Path(input_root) if input_root else path.parent
    h = config_hash(cfg)
    own_planner = planner is None
    planner = planner or make_planner(cfg)
    assembler = Assembler(cfg.converter.max_fallback_share)
    try:
        with tempfile.TemporaryDirectory(prefix="local-") as tmp:
            doc, pdf = prepare(InputFile(path=str(path), source=str(path.relative_to(root))), cfg.intake, Path(tmp))
            if not pdf:
                outcome = assembler.add(doc, None, None, [])
                assert outcome is not None
                return DocumentResult(outcome)
            conv = converter or make_converter(cfg, h)
            segments: list[SegmentOutcome] = []
            outcome = None
            for job in plan_segments(doc, cfg.intake):
                seg = await process_segment(conv, planner, job, cfg, h, source_path=pdf)
                segments.append(seg)
                outcome = assembler.add(doc, job, seg.facts, [c.chunk_id for c in seg.chunks]) or outcome
            assert outcome is not None
            return DocumentResult(outcome, segments)
    finally:
        if own_planner:
            await planner.close()


def process_document(path: Path | str, cfg: Config, input_root: Path | str | None = None,
                     converter: Converter | None = None, planner: Planner | None = None) -> DocumentResult:
    """:func:`process_document_async` for synchronous callers (tests, scripts)."""
    return asyncio.run(process_document_async(path, cfg, input_root, converter, planner))
