"""Loading chunks into Milvus at scale: batched upserts below a size threshold, BulkWriter files + ``bulk_import``
above it, both idempotent by ``chunk_id``.

:class:`ChunkSink` buffers rows and decides per commit: fewer than ``milvus.bulk_threshold`` pending rows (or
Milvus Lite, which has no import) go through :meth:`ChunkStore.upsert`; more are written as Parquet by pymilvus'
``RemoteBulkWriter`` (object storage the server reads) or ``LocalBulkWriter`` (a folder) and imported with
``bulk_import``, polling ``get_import_progress`` until the job completes.

Import only ever inserts: Milvus does not deduplicate primary keys on import, so a re-run would duplicate every
chunk. The sink therefore deletes the batch's chunk IDs first, then imports: the net effect is an upsert. Between
the delete and the end of the import those chunks are briefly absent from search. With ``milvus.fresh_load`` and a
collection that was empty when the run began, only IDs of documents this run already wrote can exist, so only
those are deleted.

One document never fails a commit for the others: when the commit's write raises, each document's rows are upserted
alone, the documents the store refuses again are left out (:meth:`ChunkSink.take_refused`; the writer fails them at
the write stage) and the rest are written. What is not a document's fault stops the run as a setup error: an
unreachable store (:func:`chunker.index.store.is_outage`), or a store that refuses every document of a commit of
several (a wrong token, a dropped collection). Import files that were not all written (a failed upload) stop
nothing: no row was deleted yet, so that commit is upserted instead. An import whose start got no answer may still
run on the server and land after anything written later: it is looked for by its files among the collection's jobs
and waited for; only when it does not show within ``milvus.write_timeout_s`` is the commit upserted.

The pymilvus calls sit behind :class:`BulkOps`; :class:`PymilvusBulkOps` speaks Milvus' REST import API
(``/v2/vectordb/jobs/import/create``, ``/describe`` and ``/list``) through ``pymilvus.bulk_writer``. Both live in
:mod:`chunker.index.bulk_ops` (with the errors their steps raise) and are re-exported here; this module owns the
sink: when to load in bulk, the order of the steps, the polling and the per-document fallback.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from chunker.config import MilvusConfig
from chunker.errors import SetupError
from chunker.index.bulk_ops import (  # noqa: F401 - re-exported: the jobs and tests import the bulk names here
    BulkImportError,
    BulkOps,
    BulkTargetError,
    BulkWriteError,
    ImportPollError,
    ImportRefused,
    ImportUnanswered,
    PymilvusBulkOps,
    Store,
    reason,
)
from chunker.index.store import StoreError, StoreUnavailable, is_outage
from chunker.run import faults
from chunker.types import Chunk

log = logging.getLogger("chunker.index.bulk")
DELETE_BATCH = 1000  # IDs per delete expression; long "in" lists make slow plans on the server
MAX_POLL_FAILURES = 5  # consecutive progress polls that may fail (a network blip) before the load gives up


class ImportTimeout(BulkImportError, SetupError):
    """No answer on a running import job: it may still finish, so its rows must not be written again another way
    (an import never replaces rows); the run stops."""


class ImportNotFound(BulkImportError):
    """An import whose start got no answer did not show among the collection's jobs in time: taken as never started,
    so the commit's rows (deleted already) are written by upserts instead."""


class StoreRefusedAll(StoreError, SetupError):
    """The store refused every document of a commit, each written alone: the store, not the documents, is wrong."""


DocKey = tuple[str, str]  # (doc_id, source_uri): two files with the same bytes are two documents


@dataclass
class SinkStats:
    upserted: int = 0
    imported: int = 0
    import_jobs: int = 0
    commits: int = 0
    write_fallbacks: int = 0  # commits upserted because their bulk files were not all written
    modes: list[str] = field(default_factory=list)


class ChunkSink:
    """Buffers chunks; :meth:`commit` makes every buffered chunk durable in Milvus (upsert or bulk import)."""

    def __init__(self, store: Store, cfg: MilvusConfig, bulk: BulkOps | Callable[[], BulkOps] | None = None,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.cfg = cfg
        self._bulk = bulk
        self.sleep = sleep
        self.clock = clock
        self.chunks: list[Chunk] = []
        self.vectors: list[np.ndarray] = []
        self.stats = SinkStats()
        self.fresh: bool | None = None  # decided at the first commit (milvus.fresh_load and an empty collection)
        self._written_docs: set[str] = set()  # fresh loads: documents whose chunks this run has already written
        self._refused: dict[DocKey, str] = {}  # documents whose rows the store refused, with its reason
        if self._bulk is not None and not store.lite and cfg.load_mode == "auto":
            # Built and probed now, not at the first big commit hours later: a wrong bulk target, a missing bucket or
            # wrong keys fail before any work.
            probe = getattr(self._ops(), "probe", None)
            if probe is not None:
                probe()

    @property
    def pending(self) -> int:
        return len(self.chunks)

    def add(self, chunks: list[Chunk], vectors: np.ndarray) -> None:
        if len(chunks) != len(vectors):
            raise ValueError(f"{len(chunks)} chunks but {len(vectors)} vectors")
        self.chunks.extend(chunks)
        self.vectors.extend(np.asarray(vectors, dtype=np.float32))

    def use_bulk(self, rows: int) -> bool:
        return (not self.store.lite and self._bulk is not None and self.cfg.load_mode == "auto"
                and rows >= self.cfg.bulk_threshold)

    def commit(self) -> str:
        """Write everything pending; returns the mode used (``upsert``, ``bulk`` or ``none``).

        Documents whose rows the store refused are not written; :meth:`take_refused` names them. Raises only setup
        errors: :class:`StoreUnavailable` for an outage, :class:`StoreRefusedAll` when no document got in."""
        if not self.chunks:
            return "none"
        if self.fresh is None:
            self.fresh = self._starts_empty()
        chunks, vecs = self.chunks, np.stack(self.vectors)
        self.chunks, self.vectors = [], []
        mode = "bulk" if self.use_bulk(len(chunks)) else "upsert"
        try:
            self._write(mode, chunks, vecs)
        except BulkWriteError as exc:
            # The files are checked before the first delete: nothing was deleted or imported, so upserts (idempotent
            # by chunk_id) load this commit as safely; the next large commit tries the bucket again.
            log.warning("bulk files for %d rows were not all written (%s); this commit is loaded by upserts instead",
                        len(chunks), reason(exc))
            self.stats.write_fallbacks += 1
            mode = self._upserted(chunks, vecs)
        except Exception as exc:  # noqa: BLE001 - sorted below: the store's fault stops the run, a document's fails it
            _raise_if_setup(exc, self.cfg.uri)
            mode = self._write_each(mode, chunks, vecs, exc)
        self.stats.commits += 1
        self.stats.modes.append(mode)
        return mode

    def _upserted(self, chunks: list[Chunk], vecs: np.ndarray) -> str:
        try:
            self._write("upsert", chunks, vecs)
            return "upsert"
        except Exception as exc:  # noqa: BLE001 - as in commit: the store's fault stops the run, a document's fails it
            _raise_if_setup(exc, self.cfg.uri)
            return self._write_each("upsert", chunks, vecs, exc)

    def take_refused(self) -> dict[DocKey, str]:
        """Documents (``(doc_id, source_uri)``) whose rows the store refused since the last call, with the reason."""
        out, self._refused = self._refused, {}
        return out

    def _write(self, mode: str, chunks: list[Chunk], vecs: np.ndarray) -> None:
        faults.check("write", *dict.fromkeys(c.source for c in chunks))
        if mode == "bulk":
            self._bulk_load(chunks, vecs)
        else:
            self.stats.upserted += self.store.upsert(chunks, vecs)
        if self.fresh:
            self._written_docs.update(c.doc_id for c in chunks)

    def _write_each(self, mode: str, chunks: list[Chunk], vecs: np.ndarray, first: Exception) -> str:
        """The commit's write raised ``first``: each document's rows again, alone (upserts: idempotent by chunk_id,
        like the import), to find the documents the store refuses."""
        groups: dict[DocKey, list[int]] = {}
        for i, c in enumerate(chunks):
            groups.setdefault((c.doc_id, c.source_uri), []).append(i)
        refused: dict[DocKey, str] = {}
        for key, rows in groups.items():
            try:
                self._write("upsert", [chunks[i] for i in rows], vecs[rows])
            except Exception as exc:  # noqa: BLE001 - this document's rows, refused
                _raise_if_setup(exc, self.cfg.uri)
                refused[key] = reason(exc)
        if len(groups) > 1 and len(refused) == len(groups):
            raise StoreRefusedAll(f"Milvus at {self.cfg.uri} refused each of the {len(groups)} documents of a commit, "
                                  f"written alone; first: {reason(first)}")
        if refused:
            log.warning("Milvus refused %d of the %d documents of a commit; the others are written", len(refused),
                        len(groups))
        else:
            log.warning("a %s of %d documents failed (%s); written one document at a time instead", mode,
                        len(groups), reason(first))
        self._refused.update(refused)
        return "upsert"

    def discard(self, ids: list[str]) -> None:
        """Delete chunk IDs (best effort): rows a refused document may have left behind, so that a ``failed``
        document has nothing in the index."""
        try:
            for i in range(0, len(ids), DELETE_BATCH):
                self.store.client.delete(self.store.collection, ids=ids[i:i + DELETE_BATCH],
                                         timeout=self.cfg.write_timeout_s)
        except Exception as exc:  # noqa: BLE001 - the document is failed either way; its rows stay findable by doc_id
            _raise_if_setup(exc, self.cfg.uri)
            log.warning("could not delete %d chunks of a refused document: %s", len(ids), reason(exc))

    def _starts_empty(self) -> bool:
        if not self.cfg.fresh_load or self.store.lite:
            return False
        rows = self.store.count()
        if rows:
            log.warning("milvus.fresh_load is set but collection %s already holds %d rows (a resumed run?): chunk IDs "
                        "are deleted before each import as usual", self.store.collection, rows)
        return rows == 0

    def _ops(self) -> BulkOps:
        if callable(self._bulk) and not hasattr(self._bulk, "write_files"):
            self._bulk = self._bulk()  # built on first use: it needs the server's schema and a writer folder
        return self._bulk  # type: ignore[return-value]

    def _bulk_load(self, chunks: list[Chunk], vecs: np.ndarray) -> None:
        from chunker.index.collection import chunk_row

        ops = self._ops()
        # Last row wins for a repeated ID, as with upserts.
        rows = list({c.chunk_id: chunk_row(c, v) for c, v in zip(chunks, vecs)}.values())
        # Checked (files there, every row in them) before the first delete: deleting IDs and then importing files
        # that lack them would lose those rows.
        files = ops.write_files(rows)
        if not any(files):
            raise BulkWriteError(f"the bulk writer returned no file for {len(rows)} rows; nothing was deleted or "
                                 f"imported")
        # An empty collection at the start of a fresh load holds only what this run wrote: IDs of other
        # documents cannot exist, and deleting them would cost one delete per 1,000 of the millions of rows.
        ids = [r["chunk_id"] for r in rows if not self.fresh or r["doc_id"] in self._written_docs]
        for i in range(0, len(ids), DELETE_BATCH):
            ops.delete_ids(ids[i:i + DELETE_BATCH])
        try:
            job_id = ops.start_import(files)
        except ImportUnanswered as exc:
            # The job may exist and would land after anything written now (an import never replaces rows): find it
            # and wait for it; only a job that does not show is taken as never started (ImportNotFound: the commit
            # is then upserted, which puts the deleted rows back).
            job_id = self._find(ops, files, exc)
        self.stats.import_jobs += 1
        self._wait(ops, job_id, len(rows))
        self.stats.imported += len(rows)

    def _find(self, ops: BulkOps, files: list[list[str]], unanswered: ImportUnanswered) -> str:
        """The job an unanswered start created, looked for by its files for ``milvus.write_timeout_s`` (the time the
        start itself was given); :class:`ImportNotFound` when it does not show."""
        deadline = self.clock() + self.cfg.write_timeout_s
        while True:
            try:
                found = ops.find_import(files)
            except ImportPollError as exc:
                log.warning("bulk import: looking for a job whose start got no answer failed (%s); retrying", exc)
                found = None
            if found:
                log.warning("bulk import: %s; its job %s was found by its files and is waited for", unanswered, found)
                return found
            if self.clock() > deadline:
                raise ImportNotFound(f"{unanswered}, and no job reading its files showed within "
                                     f"{self.cfg.write_timeout_s:g} s")
            self.sleep(self.cfg.bulk_poll_s)

    def _wait(self, ops: BulkOps, job_id: str, rows: int) -> None:
        deadline = self.clock() + self.cfg.bulk_timeout_s
        failures = 0
        while True:
            try:
                p = ops.progress(job_id)
                failures = 0
            except ImportPollError as exc:
                # The job runs on the server whether or not a poll gets through: a blip must not end a 2-hour load.
                failures += 1
                if failures >= MAX_POLL_FAILURES or self.clock() > deadline:
                    raise ImportTimeout(f"bulk import {job_id}: {failures} progress polls failed, last: {exc}") from exc
                log.warning("bulk import %s: progress poll failed (%s); retrying", job_id, exc)
                self.sleep(self.cfg.bulk_poll_s)
                continue
            state = str(p.get("state", ""))
            if state == "Completed":
                log.info("bulk import %s: %d rows done", job_id, rows)
                return
            if state == "Failed":
                raise BulkImportError(f"bulk import {job_id} failed: {p.get('reason') or 'no reason given'}")
            if self.clock() > deadline:
                raise ImportTimeout(f"bulk import {job_id} still {state} after {self.cfg.bulk_timeout_s:.0f} s")
            log.info("bulk import %s: %s %s%%", job_id, state, p.get("progress", "?"))
            self.sleep(self.cfg.bulk_poll_s)


def _raise_if_setup(exc: Exception, uri: str) -> None:
    """Re-raise ``exc`` when it is the run's problem rather than a document's: a setup error, or an outage."""
    if isinstance(exc, SetupError):
        raise exc
    if is_outage(exc):
        raise StoreUnavailable(f"Milvus at {uri} is unreachable: {reason(exc)}") from exc

