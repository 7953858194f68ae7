"""The driver's single writer: segment rows in; chunks committed to Milvus; documents closed in order of safety.

For each document, once its last segment is in (:mod:`chunker.run.assemble`) and its chunks are committed (upsert
or bulk import): stale chunks from earlier versions of its absolute source URI or earlier plans are deleted, then its
done-ledger entry is written, then its status row goes out. That work is batched per commit: one delete expression
for the documents of a commit (chunked by size, :meth:`ChunkStore.delete_stale`), no count queries, so the driver's
cost per document is a share of a few calls, not a few round trips of its own. A failed or skipped document closes
at once. A document with a failed segment is indexed as far as it got, but replaces nothing and gets no ledger
entry: its earlier chunks (if any) cover the pages the new ones lack, and the next run tries it again. Memory stays bounded on any corpus: per
document in flight, the facts and chunk IDs; otherwise counters and a block of status rows flushed every
``DOC_PART_ROWS`` documents.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Protocol

from chunker.index.bulk import ChunkSink
from chunker.run.assemble import Assembler, DocumentOutcome
from chunker.run.layout import DOCUMENTS, RunStore, documents_part
from chunker.run.ledger import Ledger
from chunker.run.rows import SegmentRow
from chunker.run.timing import RunTiming
from chunker.schemas import DOCUMENT, document_row, to_table
from chunker.types import Status, safe_text

DOC_PART_ROWS = 1000
MAX_PROBLEMS = 1000  # in summary.json; the full list is documents/*.parquet


class ProgressSink(Protocol):
    """What the writer reports as it goes (the job's progress line and metrics)."""

    def segment(self, pages: int, tokens: int) -> None: ...

    def written(self, chunks: int) -> None: ...

    def document(self, status: str) -> None: ...


class NoProgress:
    def segment(self, pages: int, tokens: int) -> None:
        return None

    def written(self, chunks: int) -> None:
        return None

    def document(self, status: str) -> None:
        return None


@dataclass
class Totals:
    documents: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    pages: int = 0
    chunks: int = 0
    fallback_pages: int = 0
    problems: list[dict[str, str]] = field(default_factory=list)
    problems_total: int = 0


class Writer:
    def __init__(self, store: Any, sink: ChunkSink, ledger: Ledger | None, runstore: RunStore, cfg_hash: str,
                 max_fallback_share: float, commit_rows: int, commit_interval_s: float,
                 progress: ProgressSink | None = None, timing: RunTiming | None = None) -> None:
        self.store = store
        self.sink = sink
        self.ledger = ledger
        self.runstore = runstore
        self.cfg_hash = cfg_hash
        self.commit_rows = commit_rows
        self.commit_interval_s = commit_interval_s
        self.progress = progress or NoProgress()
        self.timing = timing  # the driver's own steps: Milvus load, deletes, ledger and status writes
        self.assembler = Assembler(max_fallback_share)
        self.waiting: list[DocumentOutcome] = []  # complete in the pipeline, chunks not yet committed
        self.doc_rows: list[dict[str, Any]] = []
        self.parts = 0
        self.totals = Totals()
        self.kept_old: list[str] = []  # documents whose earlier chunks were kept (a segment failed)
        self.last_commit = time.monotonic()
        runstore.clear(DOCUMENTS)

    def consume(self, rows: Iterable[SegmentRow]) -> None:
        for row in rows:
            self.add(row)
            if self.sink.pending >= self.commit_rows or (
                    self.waiting and time.monotonic() - self.last_commit >= self.commit_interval_s):
                self.commit()
        self.commit()
        self.flush_doc_rows()

    def add(self, row: SegmentRow) -> None:
        self.progress.segment(row.pages if row.active else 0, row.tokens)
        if row.chunks:
            assert row.vectors is not None, "chunks reached the writer without vectors"
            self.sink.add(row.chunks, row.vectors)
        outcome = self.assembler.add(row.doc, row.job, row.facts, [c.chunk_id for c in row.chunks],
                                     row.source_version)
        if outcome is None:
            return
        if outcome.num_chunks or outcome.replaces_old:
            self.waiting.append(outcome)
        else:
            self.close(outcome)

    def _step(self, name: str) -> AbstractContextManager[None]:
        return self.timing.step(name) if self.timing is not None else nullcontext()

    def commit(self) -> None:
        with self._step("load"):
            self.sink.commit()
        self.last_commit = time.monotonic()
        waiting, self.waiting = self.waiting, []
        # A changed file gets a new doc_id, and new settings a new plan: chunks of either must not linger. Deleted
        # once the new chunks are committed, before any ledger entry says the document is done.
        replacing = [o for o in waiting if o.replaces_old]
        if replacing:
            with self._step("delete_stale"):
                self.store.delete_stale([(o.record.source_uri, o.record.doc_id, o.chunk_ids) for o in replacing])
        with self._step("ledger_and_status"):
            for outcome in waiting:
                self.close(outcome)

    def close(self, outcome: DocumentOutcome) -> None:
        """Record a document whose chunks (if any) are committed and whose stale chunks are gone."""
        rec = outcome.record
        if outcome.indexed and not outcome.complete:
            self.kept_old.append(rec.doc_id)
        elif outcome.replaces_old and self.ledger is not None:
            self.ledger.mark_done(rec.doc_id, source_uri=rec.source_uri, source_version=outcome.source_version,
                                  status=str(rec.status), chunks=outcome.num_chunks, source=rec.source)
        t = self.totals
        t.documents += 1
        t.by_status[str(rec.status)] = t.by_status.get(str(rec.status), 0) + 1
        if outcome.indexed:
            t.pages += rec.num_pages
            t.chunks += outcome.num_chunks
            self.progress.written(outcome.num_chunks)
        t.fallback_pages += outcome.fallback_pages
        if rec.status in (Status.PARTIAL, Status.FAILED):
            t.problems_total += 1
            if len(t.problems) < MAX_PROBLEMS:
                t.problems.append({"source": safe_text(rec.source), "status": str(rec.status),
                                   "reason": safe_text(rec.error)})
        self.progress.document(str(rec.status))
        self.doc_rows.append(document_row(rec, outcome.num_chunks, outcome.fallback_pages))
        if len(self.doc_rows) >= DOC_PART_ROWS:
            self.flush_doc_rows()

    def flush_doc_rows(self) -> None:
        if not self.doc_rows:
            return
        self.runstore.write(DOCUMENTS, documents_part(self.parts),
                            to_table(self.doc_rows, DOCUMENT, config_hash=self.cfg_hash))
        self.parts += 1
        self.doc_rows = []
