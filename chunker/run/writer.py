"""The driver's single writer: segment rows in; chunks committed to Milvus; documents closed in order of safety.

For each document, once its last segment is in (:mod:`chunker.run.assemble`) and its chunks are committed (upsert
or bulk import): stale chunks from earlier versions of its absolute source URI or earlier plans are deleted, then its
done-ledger entry is written, then its status row goes out. That work is batched per commit: one delete expression
for the documents of a commit (chunked by size, :meth:`ChunkStore.delete_stale`), no count queries, and the ledger
entries of the commit's documents written side by side (:meth:`Ledger.mark_all`), so the driver's cost per document
is a share of a few calls, not a few round trips of its own. A failed or skipped document closes at once. A
document with a failed segment is indexed as far as it got, but replaces nothing and gets no ledger entry: its
earlier chunks (if any) cover the pages the new ones lack, and the next run tries it again. Memory stays bounded on
any corpus: per document in flight, the facts and chunk IDs; the chunks not yet committed (at most
``max_pending_rows``); otherwise counters and a block of status rows written every ``DOC_PART_ROWS`` documents.

Commits run in a thread of their own, one at a time, while the driver thread goes on taking rows (the commit
policy): a commit starts when none is running and ``commit_rows`` chunks are pending, or a finished document has
waited ``commit_interval_s``; it takes every chunk pending at that moment. A Milvus write or a bulk import that
takes a minute therefore costs the pipeline nothing but memory, and the rows that arrive meanwhile make the next
commit larger, so a bulk import stays worth its fixed cost as the rate grows. Past ``max_pending_rows`` pending chunks
the driver waits for the running commit (``commit_wait``). Status parts are written in the background too. What a
commit or a status write raises is raised in the driver thread at the next row (a setup error stops the run).
:meth:`commit` is the synchronous form: it returns when everything pending is committed and its documents closed.

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
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np

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
from chunker.types import Chunk, Problem, Stage, Status, safe_text

DOC_PART_ROWS = 1000
DocKey = tuple[str, str]  # (doc_id, source_uri), as doc_key gives it
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


@dataclass
class _Commit:
    """One commit's work, handed to the commit thread: the chunks pending when it started, the documents waiting
    for them, and the write-stage failures known then of those documents."""

    rows: list[tuple[list[Chunk], np.ndarray]]
    waiting: list[DocumentOutcome]
    failed: dict[DocKey, Problem]


@dataclass
class _Committed:
    closed: list[DocumentOutcome]  # the commit's documents, final (a failed one with its write verdict), ledgered
    refused: dict[DocKey, Problem]  # documents still in flight whose rows the store refused in this commit


class Writer:
    def __init__(self, store: Any, sink: ChunkSink, ledger: Ledger | None, runstore: RunStore, cfg_hash: str,
                 max_fallback_share: float, commit_rows: int, commit_interval_s: float,
                 progress: ProgressSink | None = None, timing: RunTiming | None = None,
                 max_pending_rows: int | None = None, write_threads: int = 16) -> None:
        self.store = store
        self.sink = sink  # used by the commit thread only
        self.ledger = ledger
        self.runstore = runstore
        self.cfg_hash = cfg_hash
        self.commit_rows = commit_rows
        self.commit_interval_s = commit_interval_s
        self.max_pending_rows = max(commit_rows, max_pending_rows or 4 * commit_rows)
        self.write_threads = write_threads
        self.progress = progress or NoProgress()
        self.timing = timing  # the driver's own steps: Milvus load, deletes, ledger and status writes
        self.assembler = Assembler(max_fallback_share)
        self.pending: list[tuple[list[Chunk], np.ndarray]] = []  # chunks not yet handed to a commit
        self.pending_rows = 0
        self.waiting: list[DocumentOutcome] = []  # complete in the pipeline, chunks not yet committed
        self.doc_rows: list[dict[str, Any]] = []
        self.parts = 0
        self.totals = Totals()
        self.kept_old: list[str] = []  # documents whose earlier chunks were kept (a segment failed)
        # Documents the write stage failed while (some of) their segments were still coming: closed as failed.
        self.write_failed: dict[DocKey, Problem] = {}
        self.last_commit = time.monotonic()
        self._committer: ThreadPoolExecutor | None = None  # one thread: commits run one at a time, in order
        self._io: ThreadPoolExecutor | None = None  # status part writes
        self._running: Future | None = None  # the commit in flight
        self._status_writes: list[Future] = []
        runstore.clear(DOCUMENTS)

    def consume(self, rows: Iterable[SegmentRow]) -> None:
        for row in rows:
            with self._step("assemble"):
                self.add(row)
            self._collect(wait=False)
            if self.pending_rows >= self.max_pending_rows and self._running is not None:
                with self._step("commit_wait"):  # bounded memory: wait for the running commit
                    self._collect(wait=True)
            if self._running is None and (self.pending_rows >= self.commit_rows or (
                    self.waiting and time.monotonic() - self.last_commit >= self.commit_interval_s)):
                self._start_commit()
        self.commit()
        for outcome in self.assembler.drain():  # documents with a segment that never came back: reported all the same
            self._finish(outcome)
        self.commit()
        self.flush_doc_rows()
        self.shutdown()

    def shutdown(self) -> None:
        """Let the writer's threads go (idle once everything is committed and written; made again if needed)."""
        for pool in (self._committer, self._io):
            if pool is not None:
                pool.shutdown(wait=False)
        self._committer = self._io = None

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
                vectors = np.asarray(row.vectors, dtype=np.float32)
                if vectors.ndim != 2 or len(vectors) != len(chunks):
                    raise ValueError(f"{len(chunks)} chunks but vectors of shape {vectors.shape}")
                self.pending.append((chunks, vectors))
                self.pending_rows += len(chunks)
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
        """Commit everything pending and close the documents waiting for it; returns when that is done."""
        with self._step("commit_wait"):
            self._collect(wait=True)
            if self.pending or self.waiting:
                self._start_commit()
                self._collect(wait=True)

    def _start_commit(self) -> None:
        failed = {o.key: self.write_failed.pop(o.key) for o in self.waiting if o.key in self.write_failed}
        work = _Commit(self.pending, self.waiting, failed)
        self.pending, self.pending_rows, self.waiting = [], 0, []
        self.last_commit = time.monotonic()
        if self._committer is None:
            self._committer = ThreadPoolExecutor(1, thread_name_prefix="writer-commit")
        self._running = self._committer.submit(self._run_commit, work)

    def _collect(self, wait: bool) -> None:
        """Close the documents of the commit in flight once it is done (``wait``: wait for it); what it raised is
        raised here."""
        running = self._running
        if running is None or (not wait and not running.done()):
            return
        self._running = None
        done = running.result()
        self.write_failed.update(done.refused)
        for outcome in done.closed:
            self.close(outcome)

    def _run_commit(self, work: _Commit) -> _Committed:
        """In the commit thread: the chunks into the store, the stale ones out, then the ledger entries."""
        for chunks, vectors in work.rows:
            self.sink.add(chunks, vectors)
        with self._step("load"):
            self.sink.commit()
        refused = {key: Problem(Stage.WRITE, "store_refused", f"the store refused its chunks: {reason}")
                   for key, reason in self.sink.take_refused().items()}
        # Counted as they reach the store, not when their document is closed: a long document's chunks show at once.
        self.progress.written(sum(1 for chunks, _ in work.rows for c in chunks
                                  if (c.doc_id, c.source_uri) not in refused))
        here = {o.key for o in work.waiting}
        failed = {**work.failed, **{k: p for k, p in refused.items() if k in here}}
        written = [o for o in work.waiting if o.key not in failed]
        # A changed file gets a new doc_id, and new settings a new plan: chunks of either must not linger. Deleted
        # once the new chunks are committed, before any ledger entry says the document is done.
        replacing = [o for o in written if o.replaces_old]
        if replacing:
            with self._step("delete_stale"):
                self.store.delete_stale([(o.record.source_uri, o.record.doc_id, o.chunk_ids) for o in replacing])
        closed = [self._failed(o, failed[o.key]) if o.key in failed else o for o in work.waiting]
        if self.ledger is not None and replacing:
            with self._step("ledger"):
                self.ledger.mark_all([dict(doc_id=o.record.doc_id, source_uri=o.record.source_uri,
                                           source_version=o.source_version, status=str(o.record.status),
                                           chunks=o.num_chunks, source=o.record.source) for o in replacing],
                                     threads=self.write_threads)
        return _Committed(closed, {k: p for k, p in refused.items() if k not in here})

    def _failed(self, outcome: DocumentOutcome, problem: Problem) -> DocumentOutcome:
        """A document the write stage failed: what of it got into the store goes (``failed`` means nothing
        indexed), it replaces nothing and gets no ledger entry, so the next run tries it again."""
        if outcome.chunk_ids:
            self.sink.discard(outcome.chunk_ids)
        status, problems = write_verdict(outcome.record, problem)
        return DocumentOutcome(replace(outcome.record, status=status, problems=problems), [], outcome.fallback_pages,
                               False, outcome.source_version)

    def close(self, outcome: DocumentOutcome) -> None:
        """Record a document whose chunks (if any) are committed, its stale chunks gone and its ledger entry (if
        it gets one) written."""
        rec = outcome.record
        if outcome.indexed and not outcome.complete:
            self.kept_old.append(rec.doc_id)
        t = self.totals
        t.documents += 1
        t.by_status[str(rec.status)] = t.by_status.get(str(rec.status), 0) + 1
        if outcome.indexed:
            t.pages += rec.num_pages
            t.chunks += outcome.num_chunks
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
            self.flush_doc_rows(wait=False)

    def flush_doc_rows(self, wait: bool = True) -> None:
        """Write the status rows gathered so far as one part (in the background unless ``wait``)."""
        self._check_writes()
        if self.doc_rows:
            rows, self.doc_rows = self.doc_rows, []
            name = documents_part(self.parts)
            self.parts += 1
            if self._io is None:
                self._io = ThreadPoolExecutor(1, thread_name_prefix="writer-status")
            self._status_writes.append(self._io.submit(self._write_status, name, rows))
        if wait:
            self.wait_writes()

    def _write_status(self, name: str, rows: list[dict[str, Any]]) -> None:
        with self._step("status"):
            self.runstore.write(DOCUMENTS, name, to_table(rows, DOCUMENT, config_hash=self.cfg_hash))

    def _check_writes(self) -> None:
        """Raise what a finished status write raised; forget the finished ones."""
        for f in [f for f in self._status_writes if f.done()]:
            self._status_writes.remove(f)
            f.result()

    def wait_writes(self) -> None:
        """Wait for the status writes in the background (raising what they raised)."""
        while self._status_writes:
            self._status_writes.pop(0).result()
