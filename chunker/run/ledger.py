"""The done ledger: one small JSON per finished document, keyed by (config hash, doc_id), in the run's output
storage (``{output}/ledger/{config_hash}/{doc_id}.json``).

An entry is written only once every chunk of the document is in Milvus and its stale chunks are deleted, so a job
killed at any point re-does exactly the documents without an entry. An entry also names the Milvus target it was
loaded into: pointing the same output at another collection loads everything again instead of skipping it.

Beside it, ``by-uri/{sha256(uri)}.json`` records which doc_id the absolute source URI held at which version (size
and modification time, as the object store reports them): intake asks this first, so an unchanged file is skipped
without being downloaded or hashed. The content-hash doc_id stays the identity; the version only saves the fetch.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pyarrow.fs as pafs

from chunker.run.layout import RunStore


def store_target(uri: str, collection: str) -> str:
    return f"{uri}#{collection}"


class Ledger:
    def __init__(self, out_uri: str, cfg_hash: str, target: str) -> None:
        self.runstore = RunStore(out_uri)
        self.fs = self.runstore.fs
        self.folder = self.runstore.ledger_folder(cfg_hash)
        self.target = target
        self.runstore.makedirs(self.folder)  # no marker objects on object storage
        self._pool: ThreadPoolExecutor | None = None  # mark_all's writers, made on first use
        self._pool_threads = 0

    def _path(self, doc_id: str) -> str:
        return f"{self.folder}/{doc_id}.json"

    def _uri_path(self, uri: str) -> str:
        return f"{self.folder}/by-uri/{hashlib.sha256(uri.encode('utf-8', 'surrogateescape')).hexdigest()[:32]}.json"

    def _read(self, path: str) -> dict[str, Any] | None:
        # Opened at once: on object storage that is one HeadObject for a missing entry and a HeadObject + GetObject
        # for one that is there, where asking get_file_info first added a HeadObject (and a ListObjectsV2 for a
        # missing one: is it a folder?) per entry, i.e. per document at intake. Where a missing object comes back
        # as a plain OSError (some filesystems), get_file_info decides.
        try:
            with self.fs.open_input_stream(path) as fh:
                return json.loads(fh.read().decode())
        except (FileNotFoundError, json.JSONDecodeError):
            return None
        except OSError:
            if self.fs.get_file_info(path).type != pafs.FileType.File:
                return None
            raise

    def entry(self, doc_id: str) -> dict[str, Any] | None:
        return self._read(self._path(doc_id))

    def is_done(self, doc_id: str, uri: str = "") -> bool:
        """Whether ``doc_id`` is loaded into this target; with ``uri``, as the copy at that absolute URI (the same
        bytes at two paths are two documents: a copy added later is not done because the other one is)."""
        e = self.entry(doc_id)
        if not e or e.get("target") != self.target:
            return False
        if not uri:
            return True
        u = self._read(self._uri_path(uri))
        return bool(u) and u.get("uri") == uri and u.get("doc_id") == doc_id and u.get("target") == self.target

    def done_by_uri(self, uri: str, version: str) -> str | None:
        """The doc_id finished for ``uri`` at ``version`` (and still done), or None: nothing needs fetching then."""
        if not version:
            return None
        e = self._read(self._uri_path(uri))
        if not e or e.get("uri") != uri or e.get("version") != version or e.get("target") != self.target:
            return None
        doc_id = str(e.get("doc_id") or "")
        return doc_id if doc_id and self.is_done(doc_id) else None

    def mark_done(self, doc_id: str, source_uri: str = "", source_version: str = "", **info: Any) -> None:
        """The document's entry, then its URI's (the copy's): a reader that finds the second finds the first."""
        now = time.time()
        self._write(self._path(doc_id), {"doc_id": doc_id, "target": self.target, "finished_at": now,
                                         "source_uri": source_uri, "source_version": source_version, **info})
        if source_uri:  # also without a version: it is this copy's done record (is_done with a uri)
            self._write(self._uri_path(source_uri), {"uri": source_uri, "version": source_version, "doc_id": doc_id,
                                                     "target": self.target, "finished_at": now})

    def forget_copy(self, uri: str) -> None:
        """This copy is no longer done (its URI's record goes; :meth:`is_done` with its URI and
        :meth:`done_by_uri` then say no). ``--force`` calls it before the document is redone: its load deletes the
        old rows before it imports the new ones, and a run stopped in between must not leave a record that skips
        the document with its rows gone. The document's own record stays: another copy of the same bytes is still
        done."""
        try:
            self.fs.delete_file(self._uri_path(uri))
        except FileNotFoundError:
            pass

    def mark_all(self, entries: list[dict[str, Any]], threads: int = 16) -> None:
        """:meth:`mark_done` for each entry (its keyword arguments), up to ``threads`` documents at once; returns
        once every entry is written (raising the first error). Each document's two writes stay in their order; a
        commit's documents no longer wait for one another's round trips (two PUTs each on object storage)."""
        if len(entries) <= 1 or threads <= 1:
            for e in entries:
                self.mark_done(**e)
            return
        if self._pool is None or self._pool_threads != threads:
            self._pool, self._pool_threads = ThreadPoolExecutor(threads, thread_name_prefix="ledger"), threads
        for f in [self._pool.submit(self.mark_done, **e) for e in entries]:
            f.result()

    def _write(self, path: str, obj: dict[str, Any]) -> None:
        body = json.dumps(obj, sort_keys=True, ensure_ascii=True).encode()
        if not self.runstore.local:  # an object becomes visible only once its upload completes
            with self.fs.open_output_stream(path) as fh:
                fh.write(body)
            return
        self.fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
        # A name of its own per write: two inputs with the same bytes share a doc_id, and their entries may be
        # written at the same moment (each rename lands whole).
        tmp = f"{path}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp"
        with self.fs.open_output_stream(tmp) as fh:
            fh.write(body)
        self.fs.move(tmp, path)  # a reader never sees half an entry

    def count(self) -> int:
        sel = pafs.FileSelector(self.folder, allow_not_found=True)
        return sum(1 for i in self.fs.get_file_info(sel) if i.path.endswith(".json"))
