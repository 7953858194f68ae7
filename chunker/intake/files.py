"""Intake: find input files, check each one, give it a content-hash ``doc_id`` and cut it into segments.

Every check failure is a per-file outcome with a reason (``DocumentRecord.status == "failed"``), never an exception
that stops the run.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from chunker.intake import sources
from chunker.config import IntakeConfig
from chunker.intake.normalize import NormalizeError, kind_of, to_pdf
from chunker.types import DocumentRecord, SegmentJob

_HASH_CHUNK = 1 << 20


class InputError(ValueError):
    """The input argument itself (not one file in it) is unusable."""


@dataclass
class InputFile:
    path: str  # local path or URI
    source: str  # path relative to the input root


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
    else:
        raw = line
    full = raw if "://" in raw or Path(raw).is_absolute() else sources.join_uri(base_uri, raw)
    return InputFile(path=str(full), source=source or raw)


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


def iter_inputs(input_path: str, cfg: IntakeConfig) -> Iterator[InputFile]:
    """Stream the files named by a directory or object-store prefix, a glob, a single file or a manifest
    (``.txt``/``.jsonl``/``.manifest``), local or ``s3://``/``gs://``/``file://``. Nothing is listed up front."""
    if _is_glob(input_path):
        for uri, rel in sources.iter_glob(input_path):
            yield InputFile(path=uri, source=rel)
        return
    try:
        what = sources.kind(input_path)
    except (OSError, ValueError) as exc:  # unknown scheme, unreachable bucket, missing credentials
        raise InputError(f"input {input_path!r} cannot be opened: {exc}") from None
    if what == "dir":
        for uri, rel in sources.iter_tree(input_path, cfg.patterns):
            yield InputFile(path=uri, source=rel)
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
    with tempfile.TemporaryDirectory(prefix="intake-") as tmp:
        return prepare(file, cfg, Path(tmp))[0]


def prepare(file: InputFile, cfg: IntakeConfig, workdir: Path,
            skip: Callable[[str], bool] | None = None) -> tuple[DocumentRecord, str]:
    """Fetch (object storage) and hash the original, normalise it to PDF, check the PDF.

    ``skip(doc_id)`` is asked right after hashing (before any normalising): True gives a ``skipped`` record.

    Returns the record and a local PDF path ("" when the file failed); fetched and normalised files are written
    into ``workdir``, which the caller owns and removes. The ``doc_id`` is always the hash of the original bytes.
    """
    uri = file.path
    remote = sources.is_remote(uri)
    shown = uri if remote else sources.local_path(uri)

    def record(status: str, error: str, doc_id: str = "", size: int = 0, pages: int = 0) -> DocumentRecord:
        return DocumentRecord(doc_id=doc_id, source_uri=shown, source=file.source, num_pages=pages,
                              status=status, error=error, size_bytes=size)  # type: ignore[arg-type]

    if remote:
        local = workdir / ("original" + Path(uri.split("?", 1)[0]).suffix.lower())
        try:
            doc_id, size = sources.fetch(uri, local)
        except FileNotFoundError:
            return record("failed", "missing: object not found"), ""
        except OSError as exc:
            return record("failed", f"unreadable: {exc}"), ""
    else:
        local = Path(shown)
        if not local.exists():
            return record("failed", "missing: file not found"), ""
        if not local.is_file():
            return record("failed", "not a regular file"), ""
        try:
            doc_id, size = file_digest(str(local))
        except OSError as exc:
            return record("failed", f"unreadable: {exc.strerror or exc}"), ""
    if size == 0:
        # An empty file still gets an id so its outcome is addressable in the ledger.
        return record("failed", "empty file", doc_id), ""
    if skip is not None and skip(doc_id):
        return record("skipped", "already done (ledger)", doc_id, size), ""
    if kind_of(uri) != "pdf":
        try:
            local = to_pdf(local, workdir, cfg.normalize_timeout_s)
        except NormalizeError as exc:
            return record("failed", f"normalise to PDF: {exc}", doc_id, size), ""
    try:
        pages, reason = check_pdf(str(local), cfg)
    except Exception as exc:  # pdfium can fail in ways it does not classify; the file, not the run, fails
        pages, reason = 0, f"unreadable PDF ({type(exc).__name__}: {exc})"
    if reason:
        return record("failed", reason, doc_id, size, pages), ""
    return record("ok", "", doc_id, size, pages), str(local)


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
