"""The server side of a bulk load: the :class:`BulkOps` steps and :class:`PymilvusBulkOps`, which takes them.

:class:`chunker.index.bulk.ChunkSink` decides when to load in bulk and in what order (files, deletes, import,
polling); this module owns how each step is done: Parquet files written by pymilvus' ``RemoteBulkWriter`` (object
storage the server reads) or ``LocalBulkWriter`` (a folder), checked to hold every row; the probe of the bulk bucket;
Milvus' REST import API (``/v2/vectordb/jobs/import/create`` and ``/describe``) through ``pymilvus.bulk_writer``;
deletes by primary key; and the errors these steps raise. pymilvus, minio and pyarrow are imported inside the
methods.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Protocol
from urllib.parse import urlparse

import numpy as np

from chunker.config import MilvusConfig
from chunker.deploy_checks import bulk_target_problems
from chunker.errors import ChunkerError, SetupError, StoreError
from chunker.types import Chunk, safe_text


class BulkImportError(ChunkerError):
    """A bulk import job failed, was refused or timed out; the message carries the server's reason."""


class ImportPollError(BulkImportError):
    """One progress poll got no answer; the job itself may still be running."""


class ImportRefused(BulkImportError, SetupError):
    """The server refused to start an import (a wrong token, an unknown collection): no row was read, so no document
    is to blame; the run stops."""


class BulkWriteError(BulkImportError):
    """The import files were not all written (an upload failed, a flush lost rows): nothing was deleted or imported,
    so the sink loads that commit by upserts instead (:class:`chunker.index.bulk.ChunkSink`)."""


class ImportUnanswered(BulkImportError):
    """The request that starts an import got no answer (the connection timed out after it was sent): the server may
    have started the job, which then lands whatever happens next. The sink looks for it (:meth:`BulkOps.find_import`)
    before it writes those rows any other way."""


class BulkTargetError(StoreError, SetupError):
    """The bulk bucket cannot be used (missing, wrong keys, no answer): found by the probe before any work."""


class BulkOps(Protocol):
    """The server-side steps of a bulk load."""

    def write_files(self, rows: list[dict[str, Any]]) -> list[list[str]]:
        """Write rows as import files; return them grouped as ``bulk_import`` wants them."""

    def start_import(self, files: list[list[str]]) -> str:
        """Start an import job; return its id."""

    def progress(self, job_id: str) -> dict[str, Any]:
        """The job's state: ``{"state": Pending|Importing|Completed|Failed, "progress": 0-100, "reason": str}``;
        raises :class:`ImportPollError` when the poll itself gets no answer."""

    def delete_ids(self, ids: list[str]) -> None:
        """Delete rows by primary key."""

    def find_import(self, files: list[list[str]]) -> str | None:
        """The id of an import job of this collection that reads ``files`` (one whose start got no answer), or
        None; raises :class:`ImportPollError` when the server cannot be asked."""


class Store(Protocol):
    """What the sink needs of :class:`chunker.index.store.ChunkStore`."""

    lite: bool
    collection: str
    client: Any

    def upsert(self, chunks: list[Chunk], vectors: np.ndarray) -> int: ...

    def count(self) -> int: ...


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


def _sent_unanswered(exc: BaseException) -> bool:
    """Whether a pymilvus REST error is a request that was sent and got no answer (a read timeout, a connection
    dropped mid-answer): pymilvus raises every failure of its HTTP call as a MilvusException with the requests error
    as its context (bulk_writer/bulk_import.py, ``_post_request``), so the type of that error, not the message, tells
    a lost answer from a refusal."""
    import requests
    from urllib3.exceptions import ProtocolError

    seen = exc.__context__
    while seen is not None:
        if isinstance(seen, (requests.exceptions.ReadTimeout, requests.exceptions.ChunkedEncodingError)):
            return True
        # "Connection aborted": the connection broke after the request went out (a refused connection, which never
        # sent anything, is a NewConnectionError instead).
        if isinstance(seen, requests.exceptions.ConnectionError) and seen.args \
                and isinstance(seen.args[0], ProtocolError):
            return True
        seen = seen.__context__
    return False


def reason(exc: BaseException) -> str:
    """An error as one bounded line of text, for log lines and error messages."""
    return safe_text(f"{type(exc).__name__}: {getattr(exc, 'message', None) or exc}")[:500]


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
            # StoreError: a setup error the jobs report in one line, before any work.
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
                                  f"${self.cfg.bulk_secret_key_env}: {reason(exc)}") from None

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
                        errors.append(reason(exc))
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
                               api_key=self.api_key, timeout=self.cfg.write_timeout_s).json()
        except MilvusException as exc:  # HTTP error, a non-zero "code", or no answer at all
            if _sent_unanswered(exc):
                raise ImportUnanswered(f"bulk_import into {self.store.collection!r} got no answer within "
                                       f"{self.cfg.write_timeout_s:g} s (milvus.write_timeout_s)") from None
            raise ImportRefused(f"bulk_import into {self.store.collection!r} was refused: {exc.message}") from None
        job_id = (body.get("data") or {}).get("jobId")
        if not job_id:
            raise ImportRefused(f"bulk_import into {self.store.collection!r} returned no job id: {body}")
        return str(job_id)

    def find_import(self, files: list[list[str]]) -> str | None:
        from pymilvus.bulk_writer import list_import_jobs
        from pymilvus.exceptions import MilvusException

        ours = {f for group in files for f in group}
        try:
            body = list_import_jobs(url=self.cfg.uri, collection_name=self.store.collection, api_key=self.api_key,
                                    page_size=100, timeout=self.cfg.call_timeout_s).json()
        except MilvusException as exc:
            raise ImportPollError(exc.message) from None
        for job in (body.get("data") or {}).get("records") or []:
            job_id = str(job.get("jobId") or "")
            if not job_id or job.get("state") == "Failed":
                continue
            details = self.progress(job_id).get("details") or []
            # A detail's fileName is the file (or a group's files, comma-joined) as the create request named it.
            if any(ours & set(str(d.get("fileName") or "").split(",")) for d in details):
                return job_id
        return None

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
