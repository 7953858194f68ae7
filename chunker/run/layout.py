"""A run's output folder: one Parquet part per (stage, key), on a local path or any pyarrow filesystem URI.

Parts are named by their key (``{doc_id}-{segment}``), so a re-run overwrites instead of duplicating, and workers on
different nodes can write without coordination.
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq


class RunStore:
    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.fs, self.root = pafs.FileSystem.from_uri(uri) if "://" in uri else (pafs.LocalFileSystem(), _abs(uri))
        self.fs.create_dir(self.root, recursive=True)

    def path(self, *parts: str) -> str:
        return "/".join([self.root.rstrip("/"), *parts])

    def write(self, stage: str, key: str, table: pa.Table) -> str:
        folder = self.path(stage)
        self.fs.create_dir(folder, recursive=True)
        target = f"{folder}/{key}.parquet"
        tmp = f"{target}.tmp"
        # Write then move, so a reader (or a resumed run) never sees half a file.
        pq.write_table(table, tmp, filesystem=self.fs)
        self.fs.move(tmp, target)
        return target

    def parts(self, stage: str) -> list[str]:
        sel = pafs.FileSelector(self.path(stage), allow_not_found=True)
        return sorted(i.path for i in self.fs.get_file_info(sel) if i.path.endswith(".parquet"))

    def read(self, stage: str, schema: pa.Schema | None = None) -> pa.Table:
        tables = [pq.read_table(p, filesystem=self.fs) for p in self.parts(stage)]
        if not tables:
            return schema.empty_table() if schema is not None else pa.table({})
        return pa.concat_tables(tables, promote_options="default")

    def write_json(self, name: str, obj: Any) -> str:
        target = self.path(name)
        with self.fs.open_output_stream(target) as fh:
            fh.write(json.dumps(obj, indent=2, sort_keys=True, default=str).encode())
        return target

    def read_json(self, name: str) -> Any:
        with self.fs.open_input_stream(self.path(name)) as fh:
            return json.loads(fh.read().decode())

    def write_text(self, name: str, text: str) -> str:
        target = self.path(name)
        with self.fs.open_output_stream(target) as fh:
            fh.write(text.encode())
        return target


def _abs(path: str) -> str:
    import os

    return os.path.abspath(path)
