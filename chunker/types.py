"""Plain data passed between stages. Their Arrow form lives in :mod:`chunker.schemas`.

Page numbers in every persisted row are 1-based and inclusive; PDF page indexes inside code are 0-based.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Status = Literal["ok", "partial", "failed", "skipped"]
ElementKind = Literal["heading", "paragraph", "list", "table_row", "figure", "code"]
Modality = Literal["text", "table", "figure"]


@dataclass
class DocumentRecord:
    """One input file after intake."""

    doc_id: str
    source_uri: str
    source: str  # path relative to the input root: what users see in hits
    num_pages: int
    status: Status
    error: str = ""
    size_bytes: int = 0


@dataclass
class SegmentJob:
    """A contiguous page range of one document, converted as one ordered chain.

    Pages ``[page_start, page_end]`` are owned by this segment. Pages ``[context_start, page_start)`` are the overlap
    with the previous segment: converted only to prime the context, their output is dropped (see
    :mod:`chunker.segments` for the boundary rule).
    """

    doc_id: str
    source_uri: str
    source: str
    num_pages: int
    segment_index: int
    num_segments: int
    page_start: int  # 1-based, inclusive, owned
    page_end: int  # 1-based, inclusive, owned
    context_start: int  # 1-based; == page_start for the first segment
    batch_pages: int

    def batches(self) -> list[tuple[int, int]]:
        """Page ranges (1-based, inclusive) of this segment's batches, overlap first, in order."""
        out: list[tuple[int, int]] = []
        # The overlap is one batch of its own so its output can be dropped whole.
        if self.context_start < self.page_start:
            out.append((self.context_start, self.page_start - 1))
        p = self.page_start
        while p <= self.page_end:
            q = min(p + self.batch_pages - 1, self.page_end)
            out.append((p, q))
            p = q + 1
        return out


@dataclass
class BatchContext:
    """What batch i hands to batch i+1: small, explicit, serialisable (never actor state)."""

    summary: str = ""
    tail: str = ""  # the last chunk, or the tail of the last Markdown
    heading_path: list[str] = field(default_factory=list)
    table_header: str = ""  # header of a table still open at the end of the batch, if any

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, raw: str) -> "BatchContext":
        if not raw:
            return cls()
        data = json.loads(raw)
        return cls(**{k: data[k] for k in ("summary", "tail", "heading_path", "table_header") if k in data})


@dataclass
class ConvertedBatch:
    doc_id: str
    segment_index: int
    batch_index: int
    page_start: int
    page_end: int
    markdown: str
    context_out: str = ""  # BatchContext JSON
    model: str = ""
    prompt_version: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    finish_reason: str = ""
    attempts: int = 1
    fallback: bool = False
    fallback_pages: list[int] = field(default_factory=list)
    context_only: bool = False  # overlap batch: output used for context, dropped from elements
    error: str = ""
    config_hash: str = ""


@dataclass
class Element:
    element_id: str
    doc_id: str
    ordinal: int
    kind: ElementKind
    text: str
    level: int = 0  # heading level (1-6); 0 for other kinds
    heading_path: list[str] = field(default_factory=list)
    page_start: int = 0
    page_end: int = 0
    bbox: list[float] | None = None
    group: str = ""  # rows of one table / items continuing one list share a group
    attrs: dict[str, Any] = field(default_factory=dict)


@dataclass
class Chunk:
    chunk_id: str
    doc_id: str
    element_ids: list[str]
    text: str
    breadcrumb: str
    page_start: int
    page_end: int
    modality: Modality
    planner: str
    config_hash: str
    source: str = ""
    source_uri: str = ""
