"""Loading chunks into Milvus at scale: batched upserts below a size threshold, BulkWriter files + ``bulk_import``
above it, both idempotent by ``chunk_id``.

:class:`ChunkSink` buffers rows and decides per commit: fewer than ``milvus.bulk_threshold`` pending rows (or
Milvus Lite, which has no import) go through :meth:`ChunkStore.upsert`; more are written as Parquet by pymilvus'
``RemoteBulkWriter`` (object storage the server reads) or ``LocalBulkWriter`` (a folder) and imported with
``bulk_import``, polling ``get_import_progress`` until the job completes.

Import only ever inserts: Milvus does not deduplicate primary keys on import, so a re-run would duplicate every
chunk. The sink therefore deletes the batch's chunk IDs first, then imports: the net effect is an upsert. Between
the delete and the end of the import those chunks are briefly absent from search.

The pymilvus calls sit behind :class:`BulkOps`, so tests record them with a fake instead of needing a server.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlparse

import numpy as np

from chunker.errors import ChunkerError
from chunker.config import MilvusConfig
from chunker.types import Chunk

log = logging.getLogger("chunker.index.bulk")
DELETE_BATCH = 1000  # IDs per delete expression; long "in" lists make slow plans on the server


class BulkImportError(ChunkerError):
    """A bulk import job failed or timed out; the message carries the server's reason."""


class BulkOps(Protocol):
    """The four server-side steps of a bulk load."""

    def write_files(self, rows: list[dict[str, Any]]) -> list[list[str]]:
        """Write rows as import files; return them grouped as ``bulk_import`` wants them."""

    def start_import(self, files: list[list[str]]) -> str:
        """Start an import job; return its id."""

    def progress(self, job_id: str) -> dict[str, Any]:
        """The job's state: ``{"state": Pending|Importing|Completed|Failed, "progress": 0-100, "reason": str}``."""

    def delete_ids(self, ids: list[str]) -> None:
        """Delete rows by primary key."""


class Store(Protocol):
    """What the sink needs of :class:`chunker.index.store.ChunkStore`."""

    lite: bool
    collection: str
    client: Any

    def upsert(self, chunks: list[Chunk], vectors: np.ndarray) -> int: ...


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

    @property
    def pending(self) -> int:
        return len(self.chunks)

    def add(self, chunks: list[Chunk], vectors: np.ndarray) -> None:
        if len(chunks) != len(vectors):
            raise ValueError(f"{len(chunks)} chunks but {len(vectors)} vectors")
        self.chunks.extend(chunks)
        self.vectors.extend(np.asarray(vectors, dtype=np.float32))

    def use_bulk(self, rows: int) -> bool:
        return not self.store.lite and self._bulk is not None and rows >= self.cfg.bulk_threshold

    def commit(self) -> str:
        """Write everything pending; returns the mode used (``upsert``, ``bulk`` or ``none``)."""
        if not self.chunks:
            return "none"
        chunks, vecs = self.chunks, np.stack(self.vectors)
        self.chunks, self.vectors = [], []
        mode = "bulk" if self.use_bulk(len(chunks)) else "upsert"
        if mode == "bulk":
            self._bulk_load(chunks, vecs)
        else:
            self.stats.upserted += self.store.upsert(chunks, vecs)
        self.stats.commits += 1
        self.stats.modes.append(mode)
        return mode

    def _ops(self) -> BulkOps:
        if callable(self._bulk) and not hasattr(self._bulk, "write_files"):
            self._bulk = self._bulk()  # built on first use: it needs the server's schema and a writer folder
        return self._bulk  # type: ignore[return-value]

    def _bulk_load(self, chunks: list[Chunk], vecs: np.ndarray) -> None:
        from chunker.index.store import chunk_row

        ops = self._ops()
        # Last row wins for a repeated ID, as with upserts.
        rows = list({c.chunk_id: chunk_row(c, v) for c, v in zip(chunks, vecs)}.values())
        files = ops.write_files(rows)
        ids = [r["chunk_id"] for r in rows]
        for i in range(0, len(ids), DELETE_BATCH):
            ops.delete_ids(ids[i:i + DELETE_BATCH])
        job_id = ops.start_import(files)
        self.stats.import_jobs += 1
        self._wait(ops, job_id, len(rows))
        self.stats.imported += len(rows)

    def _wait(self, ops: BulkOps, job_id: str, rows: int) -> None:
        deadline = self.clock() + self.cfg.bulk_timeout_s
        while True:
            p = ops.progress(job_id)
            state = str(p.get("state", ""))
            if state == "Completed":
                log.info("bulk import %s: %d rows done", job_id, rows)
                return
            if state == "Failed":
                raise BulkImportError(f"bulk import {job_id} failed: {p.get('reason') or 'no reason given'}")
            if self.clock() > deadline:
                raise BulkImportError(f"bulk import {job_id} still {state} after {self.cfg.bulk_timeout_s:.0f} s")
            log.info("bulk import %s: %s %s%%", job_id, state, p.get("progress", "?"))
            self.sleep(self.cfg.bulk_poll_s)


class PymilvusBulkOps:
    """:class:`BulkOps` through pymilvus: BulkWriter Parquet files, the import REST API, pk deletes.

    ``bulk_uri`` ``s3://bucket/prefix`` writes with ``RemoteBulkWriter`` into that bucket (which must be the one the
    Milvus server reads); endpoint and keys come from ``AWS_ENDPOINT_URL`` (MinIO), ``AWS_ACCESS_KEY_ID`` and
    ``AWS_SECRET_ACCESS_KEY``. Any other value is a local folder for ``LocalBulkWriter``.
    """

    def __init__(self, store: Store, cfg: MilvusConfig, bulk_uri: str, token: str = "") -> None:
        from pymilvus import CollectionSchema

        self.store = store
        self.cfg = cfg
        self.bulk_uri = bulk_uri
        self.token = token
        # The collection's own schema, so the files validate against exactly what the server will check.
        self.schema = CollectionSchema.construct_from_dict(store.client.describe_collection(store.collection))

    def _writer(self) -> Any:
        from pymilvus.bulk_writer import BulkFileType, LocalBulkWriter, RemoteBulkWriter

        if self.bulk_uri.startswith("s3://"):
            u = urlparse(self.bulk_uri)
            endpoint = os.environ.get("AWS_ENDPOINT_URL", "")
            param = RemoteBulkWriter.S3ConnectParam(
                bucket_name=u.netloc, endpoint=urlparse(endpoint).netloc or endpoint or "s3.amazonaws.com",
                access_key=os.environ.get("AWS_ACCESS_KEY_ID"), secret_key=os.environ.get("AWS_SECRET_ACCESS_KEY"),
                secure=endpoint.startswith("https") or not endpoint,
            )
            return RemoteBulkWriter(self.schema, remote_path=u.path.strip("/") or "bulk", connect_param=param,
                                    file_type=BulkFileType.PARQUET)
        os.makedirs(self.bulk_uri, exist_ok=True)
        return LocalBulkWriter(self.schema, local_path=self.bulk_uri, file_type=BulkFileType.PARQUET)

    def write_files(self, rows: list[dict[str, Any]]) -> list[list[str]]:
        writer = self._writer()
        for row in rows:
            writer.append_row(row)
        writer.commit()
        return [list(files) for files in writer.batch_files]

    def start_import(self, files: list[list[str]]) -> str:
        from pymilvus.bulk_writer import bulk_import

        body = bulk_import(url=self.cfg.uri, collection_name=self.store.collection, files=files,
                           token=self.token).json()
        job_id = (body.get("data") or {}).get("jobId")
        if not job_id:
            raise BulkImportError(f"bulk_import was refused: {body}")
        return str(job_id)

    def progress(self, job_id: str) -> dict[str, Any]:
        from pymilvus.bulk_writer import get_import_progress

        body = get_import_progress(url=self.cfg.uri, job_id=job_id, token=self.token).json()
        return dict(body.get("data") or {"state": "Failed", "reason": str(body)})

    def delete_ids(self, ids: list[str]) -> None:
        self.store.client.delete(self.store.collection, ids=ids)
