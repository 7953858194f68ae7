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

The write stage isolates documents too: rows the store refuses (:class:`ChunkSink` retries a failed commit one
document at a time) or a row the writer cannot take fail that document alone at ``Stage.WRITE``
(:func:`chunker.run.verdict.write_verdict`); whatever of it reached the store is deleted again, and the others are
written. Only setup errors (an unreachable store) leave here. A document some of whose segments never arrived is
still reported when the pipeline ends (:meth:`Assembler.drain`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from chunker.errors import SetupError
from chunker.index.bulk import ChunkSink
from chunker.run.assemble import Assembler, DocumentOutcome, doc_key
from chunker.run.layout import DOCUMENTS, RunStore, documents_part
from chunker.run.ledger import Ledger
from chunker.run.rows import SegmentRow
from chunker.run.segment import problem_of
from chunker.run.verdict import SegmentFacts, write_verdict
from chunker.run.timing import RunTiming
from chunker.schemas import DOCUMENT, document_row, to_table
from chunker.types import Problem, Stage, Status, safe_text

DOC_PART_ROWS = 1000
MAX_PROBLEMS = 1000  # in summary.json; the full list is documents/*.parquet
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def one_line(text: str) -> str:
    """``text`` safe to print as one line: valid UTF-8, control characters (a newline in a file name) escaped."""
    return _CONTROL.sub(lambda m: repr(m.group())[1:-1], safe_text(text))


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
        # Documents the write stage failed while (some of) their segments were still coming: closed as failed.
        self.write_failed: dict[tuple[str, str], Problem] = {}
        self.last_commit = time.monotonic()
        runstore.clear(DOCUMENTS)

    def consume(self, rows: Iterable[SegmentRow]) -> None:
        for row in rows:
            self.add(row)
            if self.sink.pending >= self.commit_rows or (
                    self.waiting and time.monotonic() - self.last_commit >= self.commit_interval_s):
                self.commit()
        self.commit()
        for outcome in self.assembler.drain():  # documents with a segment that never came back: reported all the same
            self._finish(outcome)
        self.commit()
        self.flush_doc_rows()

    def add(self, row: SegmentRow) -> None:
        self.progress.segment(row.pages if row.active else 0, row.tokens)
        key = doc_key(row.doc)
        chunks = row.chunks
        try:
            outcome = self.assembler.add(row.doc, row.job, row.facts, [c.chunk_id for c in chunks], row.source_version)
        except SetupError:
            raise
        except Exception as exc:  # noqa: BLE001 - e.g. a segment that skipped a stage: it counts as failed, alone
            if row.job is None:
                raise
            chunks = []  # none of its chunks goes to the store
            facts = SegmentFacts(row.job.segment_index, row.pages, failed=True,
                                 problems=[problem_of(exc, Stage.WRITE, "write")])
            outcome = self.assembler.add(row.doc, row.job, facts, [], row.source_version)
        if chunks and key not in self.write_failed:
            try:
                if row.vectors is None:
                    raise ValueError("chunks reached the writer without vectors")
                self.sink.add(chunks, row.vectors)
            except SetupError:
                raise
            except Exception as exc:  # noqa: BLE001 - this document fails at the write stage, the others go on
                self.write_failed[key] = problem_of(exc, Stage.WRITE, "write")
        if outcome is not None:
            self._finish(outcome)

    def _finish(self, outcome: DocumentOutcome) -> None:
        """A document whose last segment is in: closed at once when it has nothing in the sink, else at the next
        commit (also when the write stage failed it: chunks of its earlier segments may still be pending, and what
        it left in the store is deleted once they are written)."""
        if outcome.num_chunks or outcome.replaces_old or outcome.key in self.write_failed:
            self.waiting.append(outcome)
        else:
            self.close(outcome)

    def _step(self, name: str) -> AbstractContextManager[None]:
        return self.timing.step(name) if self.timing is not None else nullcontext()

    def commit(self) -> None:
        with self._step("load"):
            self.sink.commit()
        for key, reason in self.sink.take_refused().items():
            self.write_failed[key] = Problem(Stage.WRITE, "store_refused", f"the store refused its chunks: {reason}")
        self.last_commit = time.monotonic()
        waiting, self.waiting = self.waiting, []
        written = [o for o in waiting if o.key not in self.write_failed]
        # A changed file gets a new doc_id, and new settings a new plan: chunks of either must not linger. Deleted
        # once the new chunks are committed, before any ledger entry says the document is done.
        replacing = [o for o in written if o.replaces_old]
        if replacing:
            with self._step("delete_stale"):
                self.store.delete_stale([(o.record.source_uri, o.record.doc_id, o.chunk_ids) for o in replacing])
        with self._step("ledger_and_status"):
            for outcome in waiting:
                if outcome.key in self.write_failed:
                    self._close_failed(outcome, self.write_failed.pop(outcome.key))
                else:
                    self.close(outcome)

    def _close_failed(self, outcome: DocumentOutcome, problem: Problem) -> None:
        """Close a document the write stage failed: what of it got into the store goes (``failed`` means nothing
        indexed), it replaces nothing and gets no ledger entry, so the next run tries it again."""
        if outcome.chunk_ids:
            self.sink.discard(outcome.chunk_ids)
        status, problems = write_verdict(outcome.record, problem)
        self.close(DocumentOutcome(replace(outcome.record, status=status, problems=problems), [],
                                   outcome.fallback_pages, False, outcome.source_version))

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
                t.problems.append({"source": one_line(rec.source), "status": str(rec.status),
                                   "stage": ",".join(dict.fromkeys(str(p.stage) for p in rec.problems)),
                                   "code": ",".join(dict.fromkeys(p.code for p in rec.problems)),
                                   "reason": one_line(rec.error)})
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
