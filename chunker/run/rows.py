"""The row codec: what a segment carries between pipeline stages, and the one place that encodes and decodes it.

A row is one segment of one document (or, for a document that failed or was skipped at intake, the document
alone). Every stage decodes a row into :class:`SegmentRow`, works on typed values and encodes it again; the columns
are fixed from intake on, so every block has the same schema whatever happened to its rows. Nested values travel
as ASCII JSON (a lone surrogate from a broken PDF is escaped, never an Arrow error) and vectors as raw float32.

Which stage adds what:

=========  ===========================================================================
intake     ``doc``, ``job`` (none for a document that failed or was skipped), ``pdf_uri``, ``source_version``,
           ``intake_s`` (on the document's first row)
convert    ``batches``, ``convert_s``, ``tokens``; or ``facts`` of a failed segment; ``write_s``
plan       ``facts``, ``chunks``, ``plan_ms``; ``batches`` dropped (persisted already); ``write_s`` grows
embed      ``vectors``, ``embed_s``
=========  ===========================================================================
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from chunker.errors import SetupError
from chunker.run.verdict import SegmentFacts
from chunker.types import Chunk, ConvertedBatch, DocumentRecord, Problem, SegmentJob, Status

COLUMNS = ("doc", "job", "pdf_uri", "source_version", "batches", "facts", "chunks", "vectors", "dim", "convert_s", "plan_ms",
           "embed_s", "tokens", "intake_s", "write_s")


@dataclass
class SegmentRow:
    doc: DocumentRecord
    job: SegmentJob | None = None  # None: the document ended at intake (failed or skipped)
    pdf_uri: str = ""  # where workers read the PDF (the original, or its normalised copy in the run folder)
    source_version: str = ""  # the original's size and modification time at intake (the ledger's pre-check key)
    batches: list[ConvertedBatch] = field(default_factory=list)
    facts: SegmentFacts | None = None  # set once conversion failed or planning ran
    chunks: list[Chunk] = field(default_factory=list)
    vectors: np.ndarray | None = None  # (len(chunks), dim) float32, once embedded
    convert_s: float = 0.0
    plan_ms: float = 0.0
    embed_s: float = 0.0
    tokens: int = 0
    intake_s: float = 0.0  # fetch, hash, page count and segment plan of the document (first segment's row only)
    write_s: float = 0.0  # run-folder writes of this segment in the stages (Parquet parts, attempt markers)

    @property
    def active(self) -> bool:
        """Whether later stages have work to do on this row."""
        return self.job is not None and not (self.facts is not None and self.facts.failed)

    @property
    def pages(self) -> int:
        return 0 if self.job is None else self.job.page_end - self.job.page_start + 1

    def worker_seconds(self) -> dict[str, float]:
        """Seconds each stage spent on this row (see :mod:`chunker.run.timing`)."""
        return {"intake": self.intake_s, "convert": self.convert_s, "plan": self.plan_ms / 1000,
                "embed": self.embed_s, "write": self.write_s}

    def fail(self, problem: Problem) -> None:
        """Mark this segment failed at the current stage (the document's verdict decides what that means)."""
        assert self.job is not None
        self.facts = SegmentFacts(self.job.segment_index, self.pages, failed=True, problems=[problem])
        self.batches, self.chunks, self.vectors = [], [], None

    def encode(self) -> dict[str, Any]:
        vec = self.vectors
        return {
            "doc": _dump(_doc_dict(self.doc)),
            "job": _dump(asdict(self.job)) if self.job is not None else "",
            "pdf_uri": _dump(self.pdf_uri),
            "source_version": _dump(self.source_version),
            "batches": _dump([asdict(b) for b in self.batches]),
            "facts": _dump(_facts_dict(self.facts)) if self.facts is not None else "",
            "chunks": _dump([asdict(c) for c in self.chunks]),
            "vectors": b"" if vec is None else np.ascontiguousarray(vec, dtype=np.float32).tobytes(),
            "dim": 0 if vec is None else int(vec.shape[1]),
            "convert_s": float(self.convert_s),
            "plan_ms": float(self.plan_ms),
            "embed_s": float(self.embed_s),
            "tokens": int(self.tokens),
            "intake_s": float(self.intake_s),
            "write_s": float(self.write_s),
        }

    @classmethod
    def decode(cls, row: dict[str, Any]) -> "SegmentRow":
        missing = [c for c in COLUMNS if c not in row]
        if missing:
            # A stage wired in the wrong order, or a row from another version of the pipeline.
            raise SetupError(f"pipeline row lacks columns {missing}; got {sorted(row)}")
        chunks = [Chunk(**c) for c in json.loads(row["chunks"])]
        dim = int(row["dim"])
        vectors = None
        if dim:
            vectors = np.frombuffer(row["vectors"], dtype=np.float32).reshape(len(chunks), dim)
        return cls(
            doc=_doc_from(json.loads(row["doc"])),
            job=SegmentJob(**json.loads(row["job"])) if row["job"] else None,
            pdf_uri=json.loads(row["pdf_uri"]),
            source_version=json.loads(row["source_version"]),
            batches=[ConvertedBatch(**b) for b in json.loads(row["batches"])],
            facts=_facts_from(json.loads(row["facts"])) if row["facts"] else None,
            chunks=chunks,
            vectors=vectors,
            convert_s=float(row["convert_s"]),
            plan_ms=float(row["plan_ms"]),
            embed_s=float(row["embed_s"]),
            tokens=int(row["tokens"]),
            intake_s=float(row["intake_s"]),
            write_s=float(row["write_s"]),
        )


def rows_of(batch: dict[str, Any]) -> list[SegmentRow]:
    """A Ray Data batch (column -> values) as typed rows."""
    n = len(next(iter(batch.values()))) if batch else 0
    return [SegmentRow.decode({k: _py(v[i]) for k, v in batch.items()}) for i in range(n)]


def batch_of(rows: list[SegmentRow]) -> dict[str, list[Any]]:
    """Typed rows as a Ray Data batch; every column present even for an empty batch."""
    encoded = [r.encode() for r in rows]
    return {c: [e[c] for e in encoded] for c in COLUMNS}


def _py(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def _dump(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=True, separators=(",", ":"))


def _doc_dict(doc: DocumentRecord) -> dict[str, Any]:
    d = asdict(doc)
    d["status"] = str(doc.status)
    d["problems"] = [p.to_dict() for p in doc.problems]
    return d


def _doc_from(d: dict[str, Any]) -> DocumentRecord:
    return DocumentRecord(**{**d, "status": Status(d["status"]), "problems": [Problem.from_dict(p) for p in d["problems"]]})


def _facts_dict(f: SegmentFacts) -> dict[str, Any]:
    return {**asdict(f), "problems": [p.to_dict() for p in f.problems]}


def _facts_from(d: dict[str, Any]) -> SegmentFacts:
    return SegmentFacts(**{**d, "problems": [Problem.from_dict(p) for p in d["problems"]]})
