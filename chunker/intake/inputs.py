"""The inputs a run names: a folder or object-store prefix, a glob, a single file or a manifest, streamed.

Nothing is listed up front; an input argument that cannot be used at all is an :class:`InputError` (it stops the
run before any work starts), while each file's own trouble is that file's outcome (see :mod:`chunker.intake.prepare`).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from chunker.config import IntakeConfig
from chunker.errors import SetupError
from chunker.intake import sources


class InputError(SetupError, ValueError):
    """The input argument itself (not one file in it) is unusable."""


@dataclass
class InputFile:
    path: str  # local path or URI
    source: str  # path relative to the input root
    # False: found in an input folder, but its name matches no ``intake.patterns``. Such a file is still listed:
    # taken when its bytes are a PDF, else reported failed ``not_matched`` (see chunker.intake.prepare).
    matched: bool = True


MANIFEST_SUFFIXES = frozenset({".txt", ".jsonl", ".manifest"})


def manifest_entry(line: str, base_uri: str, where: str) -> InputFile | None:
    """One manifest line -> an input (None for blanks and comments). A line is a path or URI, or JSON with a
    ``path`` (or ``uri``, ``file``) key and optionally the ``source`` shown in hits; relative paths are relative to
    the manifest's folder."""
    line = line.strip()
    if not line or line.startswith("#"):
        return None
    source = ""
    if line.startswith("{"):
        try:
            entry = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"manifest {where}: not valid JSON ({exc.msg})") from None
        raw = entry.get("path") or entry.get("uri") or entry.get("file") if isinstance(entry, dict) else None
        if not raw:
            raise InputError(f"manifest {where}: no 'path', 'uri' or 'file' key")
        source = str(entry.get("source") or "")
        matched = not entry.get("unmatched")
    else:
        raw, matched = line, True
    full = raw if "://" in raw or Path(raw).is_absolute() else sources.join_uri(base_uri, raw)
    return InputFile(path=str(full), source=source or raw, matched=matched)


def _manifest_entries(uri: str) -> Iterator[InputFile]:
    fs, path = sources.open_fs(uri)
    base = uri.rsplit("/", 1)[0] if sources.is_remote(uri) else str(Path(sources.local_path(uri)).parent)
    with fs.open_input_stream(path) as raw, io.TextIOWrapper(raw, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            entry = manifest_entry(line, base, f"{uri} line {lineno}")
            if entry is not None:
                yield entry


def is_manifest(uri: str) -> bool:
    return Path(uri.split("?", 1)[0]).suffix.lower() in MANIFEST_SUFFIXES


def _is_glob(s: str) -> bool:
    return any(ch in s for ch in "*?[")


def iter_inputs(input_path: str, cfg: IntakeConfig, unmatched: bool = False) -> Iterator[InputFile]:
    """Stream the files named by a directory or object-store prefix, a glob, a single file or a manifest
    (``.txt``/``.jsonl``/``.manifest``), local or ``s3://``/``gs://``/``file://``. Nothing is listed up front.

    With ``unmatched`` a folder's files whose names match no ``intake.patterns`` come too (``matched=False``), so a
    run can account for every file it was pointed at. A glob, a manifest or a single file names its files itself."""
    if _is_glob(input_path):
        for uri, rel in sources.iter_glob(input_path):
            yield InputFile(path=uri, source=rel)
        return
    try:
        what = sources.kind(input_path)
    except (OSError, ValueError) as exc:  # unknown scheme, unreachable bucket, missing credentials
        raise InputError(f"input {input_path!r} cannot be opened: {exc}") from None
    if what == "dir":
        for uri, rel, matched in sources.iter_tree_all(input_path, cfg.patterns):
            if matched or unmatched:
                yield InputFile(path=uri, source=rel, matched=matched)
        return
    if what == "file" and is_manifest(input_path):
        yield from _manifest_entries(input_path)
        return
    if what == "file":
        yield InputFile(path=input_path, source=input_path.rstrip("/").rsplit("/", 1)[-1])
        return
    raise InputError(f"input {input_path!r} is not a file, directory, glob or manifest that exists")


def input_root(input_path: str) -> str:
    """The folder that sources are made relative to."""
    if _is_glob(input_path):
        return sources.glob_split(input_path)[0]
    p = Path(input_path)
    return str(p) if p.is_dir() else str(p.parent)


