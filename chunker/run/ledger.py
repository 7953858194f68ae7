"""The done ledger: one small JSON per finished document, keyed by (config hash, doc_id), in the run's output
storage (``{output}/ledger/{config_hash}/{doc_id}.json``).

An entry is written only once every chunk of the document is in Milvus, so a job killed at any point re-does
exactly the documents without an entry. An entry also names the Milvus target it was loaded into: pointing the
same output at another collection loads everything again instead of skipping it.
"""

from __future__ import annotations

import json
import time
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

    def _path(self, doc_id: str) -> str:
        return f"{self.folder}/{doc_id}.json"

    def entry(self, doc_id: str) -> dict[str, Any] | None:
        path = self._path(doc_id)
        # Asked first: pyarrow reports a missing object as a plain OSError on some filesystems.
        if self.fs.get_file_info(path).type != pafs.FileType.File:
            return None
        try:
            with self.fs.open_input_stream(path) as fh:
                return json.loads(fh.read().decode())
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def is_done(self, doc_id: str) -> bool:
        e = self.entry(doc_id)
        return bool(e) and e.get("target") == self.target

    def mark_done(self, doc_id: str, **info: Any) -> None:
        body = json.dumps({"doc_id": doc_id, "target": self.target, "finished_at": time.time(), **info},
                          sort_keys=True).encode()
        path = self._path(doc_id)
        if not self.runstore.local:  # an object becomes visible only once its upload completes
            with self.fs.open_output_stream(path) as fh:
                fh.write(body)
            return
        tmp = path + ".tmp"
        with self.fs.open_output_stream(tmp) as fh:
            fh.write(body)
        self.fs.move(tmp, path)  # a reader never sees half an entry

    def count(self) -> int:
        sel = pafs.FileSelector(self.folder, allow_not_found=True)
        return sum(1 for i in self.fs.get_file_info(sel) if i.path.endswith(".json"))
