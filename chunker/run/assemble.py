"""Segments -> document: folds a document's segments, arriving in any order from any worker, into its outcome.

The driver keeps, per document in flight, only what the verdict needs (each segment's :class:`SegmentFacts`) and
the chunk IDs it must keep when stale versions are deleted; everything else has been persisted by the stages. A
document's outcome exists once its last segment is in, and never before: the ledger depends on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from chunker.run.verdict import SegmentFacts, document_verdict
from chunker.types import DocumentRecord, Problem, SegmentJob, Stage, Status


@dataclass
class DocumentOutcome:
    record: DocumentRecord  # with the final status and problems
    chunk_ids: list[str] = field(default_factory=list)
    fallback_pages: int = 0
    complete: bool = True  # every segment planned; False: a segment failed and its pages have no new chunks
    source_version: str = ""  # the original's version at intake, recorded with the ledger entry

    @property
    def replaces_old(self) -> bool:
        """Indexed in full: other versions of its source URI and chunks its new plan lacks are deleted, then the
        ledger entry is written."""
        return self.indexed and self.complete

    @property
    def num_chunks(self) -> int:
        return len(self.chunk_ids)

    @property
    def indexed(self) -> bool:
        """Whether the document's chunks belong in the index (and so it gets a ledger entry)."""
        return bool(self.record.doc_id) and self.record.status in (Status.OK, Status.PARTIAL)

    @property
    def key(self) -> tuple[str, str]:
        return doc_key(self.record)


def doc_key(doc: DocumentRecord) -> tuple[str, str]:
    """A document in flight: its content hash and where it came from (two files with the same bytes are two inputs,
    each with its own outcome)."""
    return doc.doc_id, doc.source_uri


@dataclass
class _Open:
    record: DocumentRecord
    num_segments: int
    facts: dict[int, SegmentFacts] = field(default_factory=dict)
    chunk_ids: list[str] = field(default_factory=list)
    source_version: str = ""


class Assembler:
    def __init__(self, max_fallback_share: float) -> None:
        self.max_fallback_share = max_fallback_share
        self._open: dict[tuple[str, str], _Open] = {}

    @property
    def in_flight(self) -> int:
        return len(self._open)

    def add(self, doc: DocumentRecord, job: SegmentJob | None, facts: SegmentFacts | None,
            chunk_ids: list[str], source_version: str = "") -> DocumentOutcome | None:
        """Take one segment; the document's outcome when this was its last one, else None.

        A row without a job is a document that ended at intake (failed or skipped): it is complete at once.
        """
        if job is None:
            return self._finish(_Open(doc, 0, source_version=source_version))
        if facts is None:
            raise ValueError(f"segment {job.segment_index} of {doc.source!r} reached assembly without planning")
        key = doc_key(doc)
        st = self._open.get(key)
        if st is None:
            st = self._open[key] = _Open(doc, job.num_segments, source_version=source_version)
        if job.segment_index in st.facts:
            # A retried task delivered the same segment twice: keep the first, never count it twice.
            return None
        st.facts[job.segment_index] = facts
        st.chunk_ids.extend(chunk_ids)
        if len(st.facts) < st.num_segments:
            return None
        del self._open[key]
        return self._finish(st)

    def drain(self) -> list[DocumentOutcome]:
        """The outcomes of documents still open when the pipeline has ended: a segment never came back, so each
        missing one counts as failed (the document is reported, never lost)."""
        out = []
        for st in self._open.values():
            for i in range(st.num_segments):
                if i not in st.facts:
                    st.facts[i] = SegmentFacts(i, 0, failed=True, problems=[
                        Problem(Stage.WRITE, "segment_missing", f"segment {i} never reached the writer")])
            out.append(self._finish(st))
        self._open.clear()
        return out

    def _finish(self, st: _Open) -> DocumentOutcome:
        segments = [st.facts[i] for i in sorted(st.facts)]
        status, problems = document_verdict(st.record, segments, self.max_fallback_share, len(st.chunk_ids))
        record = replace(st.record, status=status, problems=problems)
        fallback = sum(len(s.fallback_pages) for s in segments if not s.failed)
        complete = bool(segments) and not any(s.failed for s in segments)
        return DocumentOutcome(record, st.chunk_ids if status in (Status.OK, Status.PARTIAL) else [], fallback, complete,
                               st.source_version)
