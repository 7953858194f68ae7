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
several (a wrong token, a dropped collection).

The pymilvus calls sit behind :class:`BulkOps`; :class:`PymilvusBulkOps` speaks Milvus' REST import API
(``/v2/vectordb/jobs/import/create`` and ``/describe``) through ``pymilvus.bulk_writer``.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlparse

import numpy as np

from chunker.config import MilvusConfig
from chunker.deploy_checks import bulk_target_problems
from chunker.errors import ChunkerError, SetupError
from chunker.index.store import StoreError, StoreUnavailable, is_outage
from chunker.run import faults
from chunker.types import Chunk, safe_text

log = logging.getLogger("chunker.index.bulk")
DELETE_BATCH = 1000  # IDs per delete expression; long "in" lists make slow plans on the server
MAX_POLL_FAILURES = 5  # consecutive progress polls that may fail (a network blip) before the load gives up


class BulkImportError(ChunkerError):
    """A bulk import job failed, was refused or timed out; the message carries the server's reason."""


class ImportPollError(BulkImportError):
    """One progress poll got no answer; the job itself may still be running."""


class ImportTimeout(BulkImportError, SetupError):
    """No answer on a running import job: it may still finish, so its rows must not be written again another way
    (an import never replaces rows); the run stops."""


class ImportRefused(BulkImportError, SetupError):
    """The server refused to start an import (a wrong token, an unknown collection): no row was read, so no document
    is to blame; the run stops."""


class BulkWriteError(BulkImportError, SetupError):
    """The import files were not all written (an upload failed, a flush lost rows): nothing was deleted or imported,
    and the run stops with the cause; the store or its bucket, not a document, is at fault."""


class BulkTargetError(StoreError, SetupError):
    """The bulk bucket cannot be used (missing, wrong keys, no answer): found by the probe before any work."""


class StoreRefusedAll(StoreError, SetupError):
    """The store refused every document of a commit, each written alone: the store, not the documents, is wrong."""


DocKey = tuple[str, str]  # (doc_id, source_uri): two files with the same bytes are two documents


class BulkOps(Protocol):
    """The four server-side steps of a bulk load."""

    def write_files(self, rows: list[dict[str, Any]]) -> list[list[str]]:
        """Write rows as import files; return them grouped as ``bulk_import`` wants them."""

    def start_import(self, files: list[list[str]]) -> str:
        """Start an import job; return its id."""

    def progress(self, job_id: str) -> dict[str, Any]:
        """The job's state: ``{"state": Pending|Importing|Completed|Failed, "progress": 0-100, "reason": str}``;
        raises :class:`ImportPollError` when the poll itself gets no answer."""

    def delete_ids(self, ids: list[str]) -> None:
        """Delete rows by primary key."""


class Store(Protocol):
    """What the sink needs of :class:`chunker.index.store.ChunkStore`."""

    lite: bool
    collection: str
    client: Any

    def upsert(self, chunks: list[Chunk], vectors: np.ndarray) -> int: ...

    def count(self) -> int: ...


@dataclass
class SinkStats:
    upserted: int = 0
    imported: int = 0
    import_jobs: int = 0
    commits: int = 0
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
        except Exception as exc:  # noqa: BLE001 - sorted below: the store's fault stops the run, a document's fails it
            _raise_if_setup(exc, self.cfg.uri)
            mode = self._write_each(mode, chunks, vecs, exc)
        self.stats.commits += 1
        self.stats.modes.append(mode)
        return mode

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
                refused[key] = _reason(exc)
        if len(groups) > 1 and len(refused) == len(groups):
            raise StoreRefusedAll(f"Milvus at {self.cfg.uri} refused each of the {len(groups)} documents of a commit, "
                                  f"written alone; first: {_reason(first)}")
        if refused:
            log.warning("Milvus refused %d of the %d documents of a commit; the others are written", len(refused),
                        len(groups))
        else:
            log.warning("a %s of %d documents failed (%s); written one document at a time instead", mode,
                        len(groups), _reason(first))
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
            log.warning("could not delete %d chunks of a refused document: %s", len(ids), _reason(exc))

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
        job_id = ops.start_import(files)
        self.stats.import_jobs += 1
        self._wait(ops, job_id, len(rows))
        self.stats.imported += len(rows)

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


@contextmanager
def _writer_errors() -> Iterator[list[str]]:
    """The errors pymilvus' bulk writer logs while the block runs (it logs, and does not raise, what fails in its
    flush and upload threads)."""
    errors: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            errors.append(safe_text(record.getMessage())[:500])

    handler = Collect(level=logging.ERROR)
    # The package's modules log under their own names; BulkWriter._throw under "bulk_writer" (bulk_writer.py).
    targets = [logging.getLogger("pymilvus.bulk_writer"), logging.getLogger("bulk_writer")]
    for t in targets:
        t.addHandler(handler)
    try:
        yield errors
    finally:
        for t in targets:
            t.removeHandler(handler)


def _reason(exc: BaseException) -> str:
    return safe_text(f"{type(exc).__name__}: {getattr(exc, 'message', None) or exc}")[:500]


def _raise_if_setup(exc: Exception, uri: str) -> None:
    """Re-raise ``exc`` when it is the run's problem rather than a document's: a setup error, or an outage."""
    if isinstance(exc, SetupError):
        raise exc
    if is_outage(exc):
        raise StoreUnavailable(f"Milvus at {uri} is unreachable: {_reason(exc)}") from exc


class PymilvusBulkOps:
    """:class:`BulkOps` through pymilvus: BulkWriter Parquet files, the REST import API, pk deletes.

    On a Milvus server the files go to ``milvus.bulk_uri`` (``s3://bucket/prefix``, the bucket the server reads)
    through ``RemoteBulkWriter``, with ``milvus.bulk_endpoint`` and the keys in ``$milvus.bulk_access_key_env`` /
    ``$milvus.bulk_secret_key_env``; the corpus' ``AWS_*`` settings are never borrowed. The import calls
    authenticate to Milvus with the token in ``$milvus.token_env`` (pymilvus 3.0 calls it ``api_key``; its
    ``token`` argument is an object-store session token). On Milvus Lite, which has no import, a local folder
    gets ``LocalBulkWriter`` files (schema checks and tests).
    """

    def __init__(self, store: Store, cfg: MilvusConfig, bulk_uri: str | None = None, token: str | None = None,
                 environ: Mapping[str, str] | None = None) -> None:
        from pymilvus import CollectionSchema

        env = os.environ if environ is None else environ
        self.store = store
        self.cfg = cfg
        self.bulk_uri = bulk_uri if bulk_uri is not None else (cfg.bulk_uri or "")
        self.api_key = env.get(cfg.token_env, "") if token is None else token
        if not store.lite:
            from chunker.index.store import StoreError  # a setup error the jobs report in one line, before any work

            problems = bulk_target_problems(cfg.model_copy(update={"bulk_uri": self.bulk_uri or None}), env)
            if problems:
                raise StoreError(f"bulk import into {cfg.uri} cannot start: " + "; ".join(problems))
        self.access_key = env.get(cfg.bulk_access_key_env, "")
        self.secret_key = env.get(cfg.bulk_secret_key_env, "")
        # The collection's own schema, so the files validate against exactly what the server will check.
        self.schema = CollectionSchema.construct_from_dict(store.client.describe_collection(store.collection))

    def _s3(self) -> Any:
        """A client of the bulk bucket, as RemoteBulkWriter builds it (minio; pymilvus' own dependency)."""
        import urllib3
        from minio import Minio

        p = self.s3_params()
        # A few quick retries: a probe that cannot connect should say so in seconds, not after minio's default backoff.
        http = urllib3.PoolManager(timeout=urllib3.Timeout(connect=5, read=30),
                                   retries=urllib3.Retry(total=2, backoff_factor=0.2,
                                                         status_forcelist=[500, 502, 503, 504]))
        return Minio(p["endpoint"], access_key=p["access_key"], secret_key=p["secret_key"], secure=p["secure"],
                     region=p["region"] or None, http_client=http)

    def probe(self) -> None:
        """Write and remove one small object under the bulk prefix, with the bulk keys: a missing bucket, wrong keys
        or an endpoint that does not answer fail here, before any document is converted, not at the first commit
        hours later (the sink probes when it is built). Raises :class:`BulkTargetError` (one line). Nothing to probe
        for a local folder."""
        import io
        import uuid

        if not self.bulk_uri.startswith("s3://"):
            return

        p = self.s3_params()
        key = f"{urlparse(self.bulk_uri).path.strip('/') or 'bulk'}/.chunker-probe-{uuid.uuid4().hex}"
        where = f"bulk bucket {p['bucket_name']!r} at {self.cfg.bulk_endpoint}"
        try:
            client = self._s3()
            if not client.bucket_exists(p["bucket_name"]):
                raise BulkTargetError(f"{where} does not exist (milvus.bulk_uri={self.bulk_uri}); create it or fix "
                                      f"milvus.bulk_uri / milvus.bulk_endpoint")
            client.put_object(p["bucket_name"], key, io.BytesIO(b"probe"), 5)
            client.remove_object(p["bucket_name"], key)
        except BulkTargetError:
            raise
        except Exception as exc:  # noqa: BLE001 - whatever the client raises, the bulk target cannot be used
            raise BulkTargetError(f"{where} cannot be written with ${self.cfg.bulk_access_key_env} / "
                                  f"${self.cfg.bulk_secret_key_env}: {_reason(exc)}") from None

    def s3_params(self) -> dict[str, Any]:
        """Keyword arguments of ``RemoteBulkWriter.S3ConnectParam`` for the bulk bucket (minio wants host:port)."""
        endpoint = urlparse(self.cfg.bulk_endpoint or "")
        return {
            "bucket_name": urlparse(self.bulk_uri).netloc, "endpoint": endpoint.netloc,
            "access_key": self.access_key, "secret_key": self.secret_key, "secure": endpoint.scheme == "https",
            "region": self.cfg.bulk_region,
        }

    def _writer(self) -> Any:
        from pymilvus.bulk_writer import BulkFileType, LocalBulkWriter, RemoteBulkWriter

        if self.bulk_uri.startswith("s3://"):
            # Staging folder given explicitly: the default sits beside sys.argv[0], inside the installed package.
            staging = tempfile.mkdtemp(prefix="chunker-bulk-")
            return RemoteBulkWriter(self.schema, remote_path=urlparse(self.bulk_uri).path.strip("/") or "bulk",
                                    connect_param=RemoteBulkWriter.S3ConnectParam(**self.s3_params()),
                                    file_type=BulkFileType.PARQUET, local_path=staging)
        os.makedirs(self.bulk_uri, exist_ok=True)
        return LocalBulkWriter(self.schema, local_path=self.bulk_uri, file_type=BulkFileType.PARQUET)

    def write_files(self, rows: list[dict[str, Any]]) -> list[list[str]]:
        """The rows as import files, grouped as ``bulk_import`` wants them; :class:`BulkWriteError` unless every row
        is in them.

        pymilvus writes (and uploads) each batch in a thread of its own and only logs what fails there
        (pymilvus/bulk_writer/local_bulk_writer.py ``_flush``; remote_bulk_writer.py ``_upload``): the commit returns
        as if all were well, with the failed batch's files missing. So the rows of every file are counted as it is
        written (before its upload, from its Parquet footer), only files whose upload returned count, and the
        writer's own error is the cause given."""
        import pyarrow.parquet as pq

        written: list[tuple[list[str], int]] = []

        def count(local_files: list[str]) -> int:
            return sum(pq.ParquetFile(f).metadata.num_rows for f in local_files if str(f).endswith(".parquet"))

        with _writer_errors() as errors, self._writer() as writer:
            upload = getattr(writer, "_upload", None)
            if upload is not None:  # RemoteBulkWriter: its commit calls self._upload(files) after each flush
                def counted_upload(local_files: list[str]) -> Any:
                    n = count(local_files)
                    try:
                        remote = upload(local_files)
                    except Exception as exc:  # noqa: BLE001 - kept for the check below, not raised in pymilvus' thread
                        errors.append(_reason(exc))
                        return []
                    written.append((list(remote), n))
                    return remote

                writer._upload = counted_upload
            for row in rows:
                writer.append_row(row)
            writer.commit()
            files = [list(group) for group in writer.batch_files]
            if upload is None:  # LocalBulkWriter: the files are here
                written = [(group, count(group)) for group in files]
        total = sum(n for _, n in written)
        if total != len(rows) or not files:
            cause = errors[-1] if errors else "no error was reported"
            raise BulkWriteError(f"the bulk writer put {total} of {len(rows)} rows into {len(files)} file groups "
                                 f"under {self.bulk_uri or 'its folder'}; nothing was deleted or imported: {cause}")
        return files

    def start_import(self, files: list[list[str]]) -> str:
        from pymilvus.bulk_writer import bulk_import
        from pymilvus.exceptions import MilvusException

        try:
            body = bulk_import(url=self.cfg.uri, collection_name=self.store.collection, files=files,
                               api_key=self.api_key).json()
        except MilvusException as exc:  # HTTP error or a non-zero "code": the server refused the job
            raise ImportRefused(f"bulk_import into {self.store.collection!r} was refused: {exc.message}") from None
        job_id = (body.get("data") or {}).get("jobId")
        if not job_id:
            raise ImportRefused(f"bulk_import into {self.store.collection!r} returned no job id: {body}")
        return str(job_id)

    def progress(self, job_id: str) -> dict[str, Any]:
        from pymilvus.bulk_writer import get_import_progress
        from pymilvus.exceptions import MilvusException

        try:
            body = get_import_progress(url=self.cfg.uri, job_id=job_id, api_key=self.api_key).json()
        except MilvusException as exc:
            raise ImportPollError(exc.message) from None
        return dict(body.get("data") or {"state": "Failed", "reason": f"no job data in {body}"})

    def delete_ids(self, ids: list[str]) -> None:
        self.store.client.delete(self.store.collection, ids=ids, timeout=self.cfg.write_timeout_s)
