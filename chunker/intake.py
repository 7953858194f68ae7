"""Intake: find input files, check each one, give it a content-hash ``doc_id`` and cut it into segments.

Every check failure is a per-file outcome with a reason (``DocumentRecord.status == "failed"``), never an exception
that stops the run.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from chunker.config import IntakeConfig
from chunker.types import DocumentRecord, SegmentJob

_HASH_CHUNK = 1 << 20


class InputError(ValueError):
    """The input argument itself (not one file in it) is unusable."""


@dataclass
class InputFile:
    path: str  # local path or URI
    source: str  # path relative to the input root


def _manifest_entries(path: Path) -> Iterator[InputFile]:
    """A manifest is a text file with one path per line, or JSONL with a ``path`` (or ``uri``, ``file``) key."""
    base = path.parent
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if line.startswith("{"):
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise InputError(f"manifest {path} line {lineno}: not valid JSON ({exc.msg})") from None
                raw = entry.get("path") or entry.get("uri") or entry.get("file")
                if not raw:
                    raise InputError(f"manifest {path} line {lineno}: no 'path', 'uri' or 'file' key")
            else:
                raw = line
            p = Path(raw)
            full = p if p.is_absolute() or "://" in raw else base / p
            yield InputFile(path=str(full), source=raw)


def _is_glob(s: str) -> bool:
    return any(ch in s for ch in "*?[")


def _glob_split(pattern: str) -> tuple[Path, str]:
    """The fixed folder in front of the first wildcard, and the rest of the pattern."""
    parts = Path(pattern).parts
    fixed: list[str] = []
    for part in parts:
        if _is_glob(part):
            break
        fixed.append(part)
    return (Path(*fixed) if fixed else Path(".")), str(Path(*parts[len(fixed):]))


def iter_inputs(input_path: str, cfg: IntakeConfig) -> Iterator[InputFile]:
    """Stream the files named by a directory, a glob, a single file or a manifest (``.txt``/``.jsonl``/``.manifest``)."""
    p = Path(input_path)
    if _is_glob(input_path):
        root, pattern = _glob_split(input_path)
        for f in sorted(root.glob(pattern)):
            if f.is_file():
                yield InputFile(path=str(f), source=str(f.relative_to(root)))
        return
    if p.is_dir():
        seen: set[Path] = set()
        for pattern in cfg.patterns:
            for f in sorted(p.rglob(pattern)):
                if f.is_file() and f not in seen:
                    seen.add(f)
                    yield InputFile(path=str(f), source=str(f.relative_to(p)))
        return
    if p.is_file() and p.suffix.lower() in {".txt", ".jsonl", ".manifest"}:
        yield from _manifest_entries(p)
        return
    if p.is_file():
        yield InputFile(path=str(p), source=p.name)
        return
    raise InputError(f"input {input_path!r} is not a file, directory, glob or manifest that exists")


def input_root(input_path: str) -> str:
    """The folder that sources are made relative to."""
    if _is_glob(input_path):
        return str(_glob_split(input_path)[0])
    p = Path(input_path)
    return str(p) if p.is_dir() else str(p.parent)


def file_digest(path: str) -> tuple[str, int]:
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        while block := fh.read(_HASH_CHUNK):
            h.update(block)
            size += len(block)
    return h.hexdigest()[:32], size


def check_pdf(path: str, cfg: IntakeConfig) -> tuple[int, str]:
    """(page count, "") for a usable PDF, else (0, reason)."""
    import pypdfium2 as pdfium

    with open(path, "rb") as fh:
        head = fh.read(1024)
    if not head:
        return 0, "empty file"
    if b"%PDF" not in head:
        return 0, "not a PDF (no %PDF header)"
    try:
        pdf = pdfium.PdfDocument(path, password=cfg.password)
    except pdfium.PdfiumError as exc:
        msg = str(exc).lower()
        if "password" in msg:
            return 0, "encrypted: needs a password" + (" (the configured one is wrong)" if cfg.password else "")
        return 0, f"unreadable PDF ({exc})"
    try:
        n = len(pdf)
    finally:
        pdf.close()
    if n == 0:
        return 0, "zero pages"
    if n > cfg.max_pages:
        return n, f"{n} pages exceeds intake.max_pages={cfg.max_pages}"
    return n, ""


def inspect(file: InputFile, cfg: IntakeConfig) -> DocumentRecord:
    """Check one file. Never raises for a bad file: the reason goes on the record."""
    path = file.path[7:] if file.path.startswith("file://") else file.path
    p = Path(path)
    if not p.exists():
        return DocumentRecord(doc_id="", source_uri=file.path, source=file.source, num_pages=0, status="failed",
                              error="missing: file not found")
    if not p.is_file():
        return DocumentRecord(doc_id="", source_uri=file.path, source=file.source, num_pages=0, status="failed",
                              error="not a regular file")
    try:
        doc_id, size = file_digest(path)
    except OSError as exc:
        return DocumentRecord(doc_id="", source_uri=file.path, source=file.source, num_pages=0, status="failed",
                              error=f"unreadable: {exc.strerror or exc}")
    if size == 0:
        # An empty file still gets an id so its outcome is addressable in the ledger.
        return DocumentRecord(doc_id=doc_id, source_uri=str(p), source=file.source, num_pages=0, status="failed",
                              error="empty file", size_bytes=0)
    try:
        pages, reason = check_pdf(path, cfg)
    except Exception as exc:  # pdfium can fail in ways it does not classify; the file, not the run, fails
        pages, reason = 0, f"unreadable PDF ({type(exc).__name__}: {exc})"
    status = "failed" if reason else "ok"
    return DocumentRecord(doc_id=doc_id, source_uri=str(p), source=file.source, num_pages=pages, status=status,
                          error=reason, size_bytes=size)


def plan_segments(doc: DocumentRecord, cfg: IntakeConfig) -> list[SegmentJob]:
    """Cut a document into segments of ``segment_pages`` (the last may be shorter).

    Boundary rule: segment s owns pages [s*S+1, min((s+1)*S, n)]. Every segment after the first also converts the
    ``segment_overlap_pages`` pages before it, only to build its starting context (summary, heading path, open table
    header); that output is dropped. A structure crossing the boundary is therefore cut there: the part on the
    owned pages of each segment becomes that segment's chunks, and the later part keeps its heading path and table
    header from the overlap context. Nothing is dropped or duplicated.
    """
    n, size = doc.num_pages, cfg.segment_pages
    count = max(1, math.ceil(n / size))
    jobs = []
    for s in range(count):
        start = s * size + 1
        end = min((s + 1) * size, n)
        ctx = max(1, start - cfg.segment_overlap_pages) if s > 0 else start
        jobs.append(SegmentJob(doc_id=doc.doc_id, source_uri=doc.source_uri, source=doc.source, num_pages=n,
                               segment_index=s, num_segments=count, page_start=start, page_end=end,
                               context_start=ctx, batch_pages=cfg.batch_pages))
    return jobs
