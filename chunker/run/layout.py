"""The run folder: the one module that spells a folder or part name inside it.

A run's output lives on a local path or any pyarrow filesystem URI (``s3://``, ``gs://``)::

    {run}/batches/{doc_id}-{segment:05d}.parquet     converted Markdown: the expensive artefact (CONVERTED_BATCH)
    {run}/elements/{doc_id}-{segment:05d}.parquet    parsed elements (ELEMENT)
    {run}/chunks/{doc_id}-{copy}-{segment:05d}.parquet   planned chunks (CHUNK), per copy of the bytes (below)
    {run}/documents/documents-{part:05d}.parquet     one row per document: status and problems (DOCUMENT)
    {run}/ledger/{config_hash}/{doc_id}.json         the done ledger (chunker.run.ledger)
    {run}/listing/part-{part:05d}.jsonl              the streamed input listing (chunker.run.listing)
    {run}/attempts/{doc_id}-{segment:05d}/{copy}-{id}  one marker per start of a segment's conversion (this run)
    {run}/normalized/{doc_id}.pdf                    PDFs normalised from images and office files
    {run}/summary.json, planning_report.json/.txt, chunk_health.json/.txt/.png

``{copy}`` is :func:`copy_key` of the document's absolute source URI: the same bytes at two paths are two documents
(one content, two sets of chunks, see chunker.run.attempts), whose converted batches and elements are one content's
and shared, and whose chunks are each copy's own.

Parts are named by their key, so a re-run overwrites instead of duplicating, and workers on different nodes write
without coordination. A part is complete or absent: on a local disk it is written then renamed; on object storage it
is written to its final key at once (an upload becomes visible only when it completes, and a rename there would be
a copy and a delete per part). Object storage has no folders, so none are made there: a part is one PutObject (a
multipart upload when large), with no folder-marker objects or existence checks around it.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from chunker.errors import SetupError
from chunker.intake import sources

BATCHES = "batches"
ELEMENTS = "elements"
CHUNKS = "chunks"
DOCUMENTS = "documents"
LEDGER = "ledger"
LISTING = "listing"
ATTEMPTS = "attempts"
NORMALIZED = "normalized"
SUMMARY = "summary.json"
PLANNING_REPORT = "planning_report"
CHUNK_HEALTH = "chunk_health"
# Every folder of a run, for whoever accounts for a run by area (the dry-run benchmark's request count).
AREAS = (BATCHES, ELEMENTS, CHUNKS, DOCUMENTS, LEDGER, LISTING, ATTEMPTS, NORMALIZED)


def copy_key(source_uri: str) -> str:
    """A short stable name for one copy of a document's bytes: its absolute source URI, hashed."""
    return hashlib.sha256(source_uri.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def segment_part(doc_id: str, segment_index: int, source_uri: str | None = None) -> str:
    """The part name of one segment's rows in ``batches/`` and ``elements/`` (one per content), or, with the
    copy's ``source_uri``, in ``chunks/`` (one per copy)."""
    if source_uri is None:
        return f"{doc_id}-{segment_index:05d}"
    return f"{doc_id}-{copy_key(source_uri)}-{segment_index:05d}"


def documents_part(index: int) -> str:
    return f"documents-{index:05d}"


def listing_part(index: int) -> str:
    return f"part-{index:05d}.jsonl"


def child_run(uri: str, name: str) -> str:
    """The URI of run folder ``name`` inside the run folder ``uri`` (a shard's: ``jobs.ingest --shard``), in ``uri``'s
    own spelling: ``file://`` stays ``file://``, the explicit word for a filesystem every node mounts, which the
    multi-node checks look for (a bare path there means one machine's folder)."""
    if uri.startswith("file://"):
        return uri.rstrip("/") + "/" + name
    return sources.join_uri(uri, name)


class OutputError(SetupError):
    """The run folder cannot be used at all (a missing bucket, a store that refuses the credentials)."""


class RunStore:
    """Reads and writes the parts of one run folder."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.fs, self.root = sources.open_fs(uri)
        self.local = isinstance(self.fs, pafs.LocalFileSystem)
        self.makedirs(self.root)

    def makedirs(self, folder: str) -> None:
        """A folder on a local disk; nothing on object storage, where pyarrow's create_dir would put a marker
        object per level (and check the bucket) before every part."""
        if self.local:
            self.fs.create_dir(folder, recursive=True)

    def check(self) -> None:
        """Raise :class:`OutputError` (one line) when the run's bucket is missing or unreachable: the driver asks
        before any work, since no marker object is written that would fail earlier on object storage."""
        if self.local:
            return  # the folder was made in __init__
        try:
            # One List request on the run's own prefix (a HeadBucket would need rights on the whole bucket). Not
            # allowing "not found" is what makes a missing bucket raise; a missing prefix is a first run.
            self.fs.get_file_info(pafs.FileSelector(self.root))
        except FileNotFoundError:
            return
        except OSError as exc:
            raise OutputError(f"output {self.uri!r} cannot be used (a missing bucket, wrong keys or "
                              f"AWS_ENDPOINT_URL?): {exc}") from None

    def path(self, *parts: str) -> str:
        return "/".join([self.root.rstrip("/"), *parts])

    def uri_of(self, *parts: str) -> str:
        """A URI another process (or node) can open for a path inside the run."""
        return sources.uri_of(self.fs, self.path(*parts), self.uri)

    def normalized_uri(self, doc_id: str) -> str:
        return sources.join_uri(self.uri, f"{NORMALIZED}/{doc_id}.pdf")

    def ledger_folder(self, cfg_hash: str) -> str:
        return self.path(LEDGER, cfg_hash)

    def write(self, stage: str, key: str, table: pa.Table) -> str:
        folder = self.path(stage)
        self.makedirs(folder)
        target = f"{folder}/{key}.parquet"
        if not self.local:
            pq.write_table(table, target, filesystem=self.fs)
            return target
        # A name of its own per writer: two files with the same bytes share a doc_id and so a segment key, and their
        # conversions may write it at the same moment; each rename then lands whole (same content either way).
        tmp = f"{target}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp"
        pq.write_table(table, tmp, filesystem=self.fs)
        self.fs.move(tmp, target)
        return target

    def write_segment(self, stage: str, doc_id: str, segment_index: int, table: pa.Table,
                      source_uri: str | None = None) -> str:
        """One segment's part; ``source_uri`` names the copy for a stage whose rows are per copy (chunks)."""
        return self.write(stage, segment_part(doc_id, segment_index, source_uri), table)

    def segment_mtime(self, stage: str, doc_id: str, segment_index: int) -> float | None:
        """When one segment's part was last written (seconds since the epoch), or None when it does not exist."""
        info = self.fs.get_file_info(f"{self.path(stage)}/{segment_part(doc_id, segment_index)}.parquet")
        return info.mtime.timestamp() if info.type == pafs.FileType.File and info.mtime else None

    def read_segment(self, stage: str, doc_id: str, segment_index: int) -> pa.Table:
        return pq.read_table(f"{self.path(stage)}/{segment_part(doc_id, segment_index)}.parquet", filesystem=self.fs)

    def entries(self, folder: str) -> list[tuple[str, float]]:
        """``(name, modification time)`` of the files directly in ``folder`` of the run (none when it does not
        exist); one List request on object storage."""
        sel = pafs.FileSelector(self.path(folder), allow_not_found=True)
        return [(i.base_name, i.mtime.timestamp() if i.mtime else 0.0) for i in self.fs.get_file_info(sel)
                if i.type == pafs.FileType.File]

    def parts(self, stage: str) -> list[str]:
        sel = pafs.FileSelector(self.path(stage), allow_not_found=True)
        return sorted(i.path for i in self.fs.get_file_info(sel) if i.path.endswith(".parquet"))

    def read(self, stage: str, schema: pa.Schema | None = None) -> pa.Table:
        tables = [pq.read_table(p, filesystem=self.fs) for p in self.parts(stage)]
        if not tables:
            return schema.empty_table() if schema is not None else pa.table({})
        return pa.concat_tables(tables, promote_options="default")

    def clear(self, stage: str) -> None:
        """Empty one folder of the run (a listing or the documents table is per run)."""
        self.makedirs(self.path(stage))
        self.fs.delete_dir_contents(self.path(stage), missing_dir_ok=True)

    def count(self, folder: str) -> int:
        """Files directly in ``folder`` of the run (0 when it does not exist)."""
        sel = pafs.FileSelector(self.path(folder), allow_not_found=True)
        return sum(1 for i in self.fs.get_file_info(sel) if i.type == pafs.FileType.File)

    def names(self, folder: str) -> list[str]:
        """Names of the files directly in ``folder`` of the run (none when it does not exist)."""
        sel = pafs.FileSelector(self.path(folder), allow_not_found=True)
        return [i.base_name for i in self.fs.get_file_info(sel) if i.type == pafs.FileType.File]

    def write_bytes(self, name: str, data: bytes) -> str:
        target = self.path(name)
        if self.local:
            self.fs.create_dir(target.rsplit("/", 1)[0], recursive=True)
        with self.fs.open_output_stream(target) as fh:
            fh.write(data)
        return target

    def claim(self, name: str, data: bytes) -> bytes | None:
        """Create ``name`` holding ``data`` unless it exists; returns what it holds afterwards, the first claimer's
        ``data``. Atomic on local disks and NFS: the bytes are written under a name of their own, then hard-linked
        into place (a link fails when the name exists, and never shows a half-written file). None on object
        storage, where pyarrow has no create-if-absent: the caller decides another way."""
        if not self.local:
            return None
        target = self.path(name)
        self.fs.create_dir(target.rsplit("/", 1)[0], recursive=True)
        tmp = f"{target}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp"
        with open(tmp, "wb") as fh:
            fh.write(data)
        try:
            os.link(tmp, target)
        except FileExistsError:
            with open(target, "rb") as fh:
                return fh.read()
        finally:
            os.unlink(tmp)
        return data

    def read_bytes(self, name: str) -> bytes:
        with self.fs.open_input_stream(self.path(name)) as fh:
            return fh.read()

    def write_json(self, name: str, obj: Any) -> str:
        return self.write_bytes(name, json.dumps(obj, indent=2, sort_keys=True, default=str).encode())

    def read_json(self, name: str) -> Any:
        with self.fs.open_input_stream(self.path(name)) as fh:
            return json.loads(fh.read().decode())

    def write_text(self, name: str, text: str) -> str:
        return self.write_bytes(name, text.encode())
