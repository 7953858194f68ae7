"""Plain data passed between stages. Their Arrow form lives in :mod:`chunker.schemas`.

Page numbers in every persisted row are 1-based and inclusive; PDF page indexes inside code are 0-based.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any, Literal


class Status(str, Enum):
    """A document's outcome. Decided in one place: :func:`chunker.run.verdict.document_verdict`."""

    OK = "ok"
    PARTIAL = "partial"  # indexed, but some pages are missing or came from the text-layer fallback
    FAILED = "failed"  # nothing indexed
    SKIPPED = "skipped"  # already done (ledger); nothing to do

    def __str__(self) -> str:
        return self.value


class Stage(str, Enum):
    """Where in the lifecycle a problem arose."""

    INTAKE = "intake"
    CONVERT = "convert"
    PLAN = "plan"
    EMBED = "embed"
    WRITE = "write"

    def __str__(self) -> str:
        return self.value


@dataclass
class Problem:
    """One thing that went wrong for a document: typed, so nothing ever reads a status out of message text."""

    stage: Stage
    code: str  # short and stable, e.g. "encrypted", "timeout", "pages_lost"
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"stage": str(self.stage), "code": self.code, "message": self.message}

    @classmethod
    def from_dict(cls, d: dict[str, str]) -> "Problem":
        return cls(Stage(d["stage"]), d["code"], d["message"])


def safe_text(text: str) -> str:
    """``text`` as valid UTF-8 text: a surrogate pair held as two code points (a PDF's UTF-16) is joined into its
    character, and a lone surrogate (a broken text layer, a file name's undecodable byte) becomes U+FFFD. A lone
    surrogate cannot be encoded as UTF-8, so Arrow, Parquet, JSON writers and Milvus would reject the whole row."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


def problems_text(problems: list[Problem], limit: int = 4000) -> str:
    """The human-readable reason column: every distinct message, in order."""
    return "; ".join(dict.fromkeys(p.message for p in problems))[:limit]


def page_ranges(pages: list[int]) -> str:
    """[1, 2, 3, 7] -> "1-3, 7": short enough for an error column."""
    ps = sorted(set(pages))
    out: list[str] = []
    i = 0
    while i < len(ps):
        j = i
        while j + 1 < len(ps) and ps[j + 1] == ps[j] + 1:
            j += 1
        out.append(str(ps[i]) if i == j else f"{ps[i]}-{ps[j]}")
        i = j + 1
    return ", ".join(out)


ElementKind = Literal["heading", "paragraph", "list", "table_row", "figure", "code"]
Modality = Literal["text", "table", "figure"]


@dataclass
class DocumentRecord:
    """One input file after intake."""

    doc_id: str
    source_uri: str
    source: str  # path relative to the input root: what users see in hits
    num_pages: int
    status: Status = Status.OK  # the intake outcome; the document's final one comes from run.verdict
    problems: list[Problem] = field(default_factory=list)
    size_bytes: int = 0
    identity: str = ""  # title/issuer, kind, period: carried by every chunk (chunker.intake.identity)

    @property
    def error(self) -> str:
        return problems_text(self.problems)


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
    identity: str = ""  # the document's identity line, handed to every chunk

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
    # The Markdown level of each heading_path entry (empty: not known, read as 1, 2, ...). A segment's overlap hands
    # its open headings to the segment's first batch with their levels: read as 1, 2, ... a section heading open at
    # the overlap's end outranked every heading of the segment and titled all of it (one 10-K's 308 chunks of
    # pages 65-120 under "Revenue by Category").
    heading_levels: list[int] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, raw: str) -> "BatchContext":
        if not raw:
            return cls()
        data = json.loads(raw)
        return cls(**{k: data[k] for k in ("summary", "tail", "heading_path", "table_header", "heading_levels")
                      if k in data})


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
    fallback_pages: list[int] = field(default_factory=list)  # pages whose Markdown came from the text layer
    lost_pages: list[int] = field(default_factory=list)  # pages left empty: neither model nor text layer read them
    context_only: bool = False  # overlap batch: output used for context, dropped from elements
    error: str = ""  # what went wrong on the way, for people; outcomes are read from the typed fields above
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
    identity: str = ""  # the document's identity line (title/issuer, kind, period)
