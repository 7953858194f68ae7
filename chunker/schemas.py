"""The Arrow schemas of every persisted stage, and the only code that turns stage rows into tables.

Every table also carries ``config_hash`` so a row's lineage (which settings made it) is never lost.
"""

from __future__ import annotations

import json
from dataclasses import fields, is_dataclass
from typing import Any

import pyarrow as pa

from chunker.types import DocumentRecord, Problem, Stage, Status, safe_text

PROBLEM = pa.struct([("stage", pa.string()), ("code", pa.string()), ("message", pa.string())])

DOCUMENT = pa.schema([
    ("doc_id", pa.string()),
    ("source_uri", pa.string()),
    ("source", pa.string()),
    ("num_pages", pa.int32()),
    ("status", pa.string()),
    ("error", pa.string()),  # the problems' messages joined, for people and SQL-ish filters
    ("problems", pa.list_(PROBLEM)),
    ("size_bytes", pa.int64()),
    ("num_chunks", pa.int32()),
    ("fallback_pages", pa.int32()),
    ("config_hash", pa.string()),
    ("identity", pa.string()),
])

CONVERTED_BATCH = pa.schema([
    ("doc_id", pa.string()),
    ("segment_index", pa.int32()),
    ("batch_index", pa.int32()),
    ("page_start", pa.int32()),
    ("page_end", pa.int32()),
    ("markdown", pa.large_string()),
    ("context_out", pa.string()),
    ("model", pa.string()),
    ("prompt_version", pa.string()),
    ("input_tokens", pa.int64()),
    ("output_tokens", pa.int64()),
    ("finish_reason", pa.string()),
    ("attempts", pa.int32()),
    ("fallback", pa.bool_()),
    ("fallback_pages", pa.list_(pa.int32())),
    ("lost_pages", pa.list_(pa.int32())),
    ("context_only", pa.bool_()),
    ("error", pa.string()),
    ("config_hash", pa.string()),
])

ELEMENT = pa.schema([
    ("element_id", pa.string()),
    ("doc_id", pa.string()),
    ("ordinal", pa.int64()),
    ("kind", pa.string()),
    ("text", pa.large_string()),
    ("level", pa.int8()),
    ("heading_path", pa.list_(pa.string())),
    ("page_start", pa.int32()),
    ("page_end", pa.int32()),
    ("bbox", pa.list_(pa.float32())),
    ("group", pa.string()),
    ("attrs", pa.string()),  # JSON
    ("config_hash", pa.string()),
])

CHUNK = pa.schema([
    ("chunk_id", pa.string()),
    ("doc_id", pa.string()),
    ("element_ids", pa.list_(pa.string())),
    ("text", pa.large_string()),
    ("breadcrumb", pa.string()),
    ("page_start", pa.int32()),
    ("page_end", pa.int32()),
    ("modality", pa.string()),
    ("planner", pa.string()),
    ("config_hash", pa.string()),
    ("source", pa.string()),
    ("source_uri", pa.string()),
    ("identity", pa.string()),
])

def _safe(value: Any) -> Any:
    if isinstance(value, str):
        return safe_text(value)
    if isinstance(value, list):
        return [_safe(v) for v in value]
    if isinstance(value, dict):
        return {k: _safe(v) for k, v in value.items()}
    return value


def _row(obj: Any) -> dict[str, Any]:
    if is_dataclass(obj):
        return {f.name: getattr(obj, f.name) for f in fields(obj)}
    return dict(obj)


def to_table(rows: list[Any], schema: pa.Schema, **constants: Any) -> pa.Table:
    """Rows (dataclasses or dicts) -> a table of exactly ``schema``; ``constants`` fill columns for every row
    (e.g. ``config_hash``). Missing columns become nulls; unknown attributes are ignored; every string is made
    safe UTF-8 (:func:`safe_text`)."""
    dicts = [_row(r) for r in rows]
    cols: dict[str, list[Any]] = {}
    for name in schema.names:
        if name in constants:
            cols[name] = [_safe(constants[name])] * len(dicts)
            continue
        values = [d.get(name) for d in dicts]
        if name == "attrs":
            values = [json.dumps(v or {}, sort_keys=True) for v in values]
        cols[name] = [_safe(v) for v in values]
    return pa.Table.from_pydict(cols, schema=schema)


def from_table(table: pa.Table, cls: type) -> list[Any]:
    """Table rows -> dataclass instances (the inverse of :func:`to_table` for the dataclass's own fields)."""
    names = {f.name for f in fields(cls)}
    out = []
    for row in table.to_pylist():
        kwargs = {k: v for k, v in row.items() if k in names}
        if "attrs" in kwargs and isinstance(kwargs["attrs"], str):
            kwargs["attrs"] = json.loads(kwargs["attrs"] or "{}")
        out.append(cls(**kwargs))
    return out


def document_row(doc: DocumentRecord, num_chunks: int, fallback_pages: int) -> dict[str, Any]:
    """A document's outcome as a ``DOCUMENT`` row."""
    return {"doc_id": doc.doc_id, "source_uri": doc.source_uri, "source": doc.source, "num_pages": doc.num_pages,
            "status": str(doc.status), "error": doc.error, "problems": [p.to_dict() for p in doc.problems],
            "size_bytes": doc.size_bytes, "num_chunks": num_chunks, "fallback_pages": fallback_pages,
            "identity": doc.identity}


def read_documents(table: pa.Table) -> list[DocumentRecord]:
    """``DOCUMENT`` rows -> records (older runs without a ``problems`` column keep their reason as one problem)."""
    out = []
    for row in table.to_pylist():
        problems = [Problem.from_dict(p) for p in row.get("problems") or []]
        if not problems and row.get("error"):
            problems = [Problem(Stage.CONVERT, "unknown", row["error"])]
        out.append(DocumentRecord(doc_id=row["doc_id"], source_uri=row["source_uri"] or "", source=row["source"] or "",
                                  num_pages=row["num_pages"] or 0, status=Status(row["status"]), problems=problems,
                                  size_bytes=row.get("size_bytes") or 0, identity=row.get("identity") or ""))
    return out
