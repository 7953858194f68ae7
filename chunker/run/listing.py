"""The input side of the ingest dataset, streamed: the driver never lists or holds every path at once.

* a manifest (``.txt``/``.jsonl``/``.manifest``, local or in object storage) is read by Ray itself
  (``ray.data.read_text``), one line per row, parsed on the workers;
* a folder, object-store prefix, glob or single file is walked lazily and written out as listing parts of
  ``intake.listing_block`` entries under ``{output}/listing/``; Ray then reads those parts like a manifest.

Either way the rows carry only ``path``/``source`` (+ ``error`` for a bad manifest line): workers fetch the bytes.
"""

from __future__ import annotations

import json
from typing import Any

from chunker.config import Config
from chunker.intake.files import InputError, is_manifest, iter_inputs, manifest_entry
from chunker.run.layout import RunStore
from chunker.intake.sources import uri_of


def direct_manifest(input_path: str) -> bool:
    """A manifest file (not a glob matching manifests): Ray reads it itself, no listing is written."""
    return is_manifest(input_path) and not any(ch in input_path for ch in "*?[")


def manifest_rows(row: dict[str, Any], base_uri: str) -> list[dict[str, Any]]:
    """flat_map over manifest lines: one input row, none for blanks, or one failed row for a bad line."""
    line = row["text"]
    try:
        entry = manifest_entry(line, base_uri, "line")
    except InputError as exc:
        return [{"path": "", "source": line.strip()[:200], "error": str(exc)}]
    if entry is None:
        return []
    return [{"path": entry.path, "source": entry.source, "error": ""}]


def write_listing(input_path: str, cfg: Config, runstore: RunStore) -> list[str]:
    """Stream the inputs into JSONL parts of ``listing_block`` entries; returns the parts' URIs (none: no input)."""
    folder = runstore.path("listing")
    runstore.fs.create_dir(folder, recursive=True)
    runstore.fs.delete_dir_contents(folder, missing_dir_ok=True)  # a listing is per run: no stale parts
    parts: list[str] = []
    block: list[str] = []

    def flush() -> None:
        name = f"{folder}/part-{len(parts):05d}.jsonl"
        with runstore.fs.open_output_stream(name) as fh:
            fh.write(("\n".join(block) + "\n").encode())
        parts.append(uri_of(runstore.fs, name, runstore.uri))
        block.clear()

    for f in iter_inputs(input_path, cfg.intake):
        block.append(json.dumps({"path": f.path, "source": f.source}))
        if len(block) >= cfg.intake.listing_block:
            flush()
    if block:
        flush()
    return parts


def input_dataset(input_path: str, cfg: Config, runstore: RunStore,
                  listed: list[str] | None = None):  # noqa: ANN201 - ray.data.Dataset
    """The dataset of input rows, or None when the input names no file. ``listed``: parts already written."""
    import ray

    if listed is None and direct_manifest(input_path):
        uris = [input_path]
        base = input_path.rsplit("/", 1)[0] if "://" in input_path else _parent(input_path)
    else:
        uris = listed if listed is not None else write_listing(input_path, cfg, runstore)
        base = ""
        if not uris:
            return None
    ds = ray.data.read_text(uris)
    return ds.flat_map(manifest_rows, fn_kwargs={"base_uri": base}, num_cpus=cfg.ray.stage_num_cpus)


def _parent(path: str) -> str:
    import os

    return os.path.dirname(os.path.abspath(path))
