"""Fetch and check one input file: its content-hash ``doc_id``, a PDF (normalised if needed) and its page count.

Every check failure is this file's outcome, a ``failed`` record with a typed problem, never an exception that
stops the run.

A file of an input folder whose name matches no ``intake.patterns`` (``InputFile.matched`` False: ``report.dat``,
``scan`` without an extension) is sniffed: when its first KiB holds ``%PDF`` it is taken as a PDF, whatever its name;
otherwise it fails ``not_matched`` without being read further, so every file the run was pointed at is accounted for.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

from chunker.config import IntakeConfig
from chunker.intake import sources
from chunker.intake.cache import FetchCache
from chunker.intake.identity import document_identity
from chunker.intake.inputs import InputFile
from chunker.intake.normalize import NormalizeError, kind_of, to_pdf
from chunker.types import DocumentRecord, Problem, Stage, Status

_HASH_CHUNK = 1 << 20
PDF_MAGIC = b"%PDF"
SNIFF_BYTES = 1024  # where a PDF's header may sit (readers accept leading junk; pdfium looks this far)


def is_pdf_head(head: bytes) -> bool:
    return PDF_MAGIC in head[:SNIFF_BYTES]


def file_digest(path: str) -> tuple[str, int]:
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        while block := fh.read(_HASH_CHUNK):
            h.update(block)
            size += len(block)
    return h.hexdigest()[:32], size


def check_pdf(path: str, cfg: IntakeConfig) -> tuple[int, Problem | None]:
    """(page count, None) for a usable PDF, else (pages known, the problem)."""
    import pypdfium2 as pdfium

    def bad(code: str, message: str) -> Problem:
        return Problem(Stage.INTAKE, code, message)

    with open(path, "rb") as fh:
        head = fh.read(SNIFF_BYTES)
    if not head:
        return 0, bad("empty", "empty file")
    if not is_pdf_head(head):
        return 0, bad("not_pdf", "not a PDF (no %PDF header)")
    try:
        pdf = pdfium.PdfDocument(path, password=cfg.password)
    except pdfium.PdfiumError as exc:
        why = _load_failure(path, cfg.password)
        if why == "encrypted":
            return 0, bad("encrypted", "encrypted: needs a password"
                          + (" (the configured one is wrong)" if cfg.password else ""))
        if why == "zero_pages":
            return 0, bad("zero_pages", "zero pages")
        return 0, bad("unreadable", f"unreadable PDF ({exc})")
    try:
        n = len(pdf)
    finally:
        pdf.close()
    if n == 0:
        return 0, bad("zero_pages", "zero pages")
    if n > cfg.max_pages:
        return n, bad("too_many_pages", f"{n} pages exceeds intake.max_pages={cfg.max_pages}")
    return n, None


def _load_failure(path: str, password: str | None) -> str:
    """Why pdfium would not open ``path``: ``encrypted``, ``zero_pages`` or ``unreadable``.

    pypdfium2 raises one error for a file pdfium cannot load and for one it loads with no page, and the error code
    it attaches is pdfium's last error, which only a failed load sets: after an encrypted file, a zero-page one on the
    same thread reads "password". So the file is loaded again through the C API, where a handle means it loaded."""
    import pypdfium2.raw as raw

    pw = None if password is None else (password + "\x00").encode("utf-8")
    handle = raw.FPDF_LoadDocument((os.path.abspath(path) + "\x00").encode("utf-8", "surrogateescape"), pw)
    if handle:
        raw.FPDF_CloseDocument(handle)
        return "zero_pages"
    return "encrypted" if raw.FPDF_GetLastError() == raw.FPDF_ERR_PASSWORD else "unreadable"


def inspect(file: InputFile, cfg: IntakeConfig) -> DocumentRecord:
    """Check one file. Never raises for a bad file: the reason goes on the record."""
    with tempfile.TemporaryDirectory(prefix="intake-") as tmp:
        return prepare(file, cfg, Path(tmp))[0]


def prepare(file: InputFile, cfg: IntakeConfig, workdir: Path, skip: Callable[[str], bool] | None = None, *,
            version: str = "", done: Callable[[str, str], str | None] | None = None,
            cache: FetchCache | None = None) -> tuple[DocumentRecord, str]:
    """Fetch (object storage) and hash the original, normalise it to PDF, check the PDF.

    ``done(uri, version)`` is asked first, before any byte is read: a doc_id gives a ``skipped`` record (the done
    ledger knows this URI at this version). ``skip(doc_id)`` is asked right after hashing (before any normalising):
    True gives a ``skipped`` record.

    Returns the record and a local PDF path ("" when the file failed); fetched and normalised files are written
    into ``workdir``, which the caller owns and removes. With a ``cache`` an object-store original is fetched into
    this node's cache instead (once per node, and reused by the conversion actors there); the path returned for
    such a PDF is only valid until the cache evicts it. The ``doc_id`` is always the hash of the original bytes.
    """
    uri = file.path
    shown = sources.absolute_uri(uri)
    if done is not None and version:
        known = done(shown, version)
        if known:
            return DocumentRecord(doc_id=known, source_uri=shown, source=file.source, num_pages=0,
                                  status=Status.SKIPPED, problems=[Problem(Stage.INTAKE, "done", "already done (ledger)")],
                                  size_bytes=int(version.split(":", 1)[0] or 0)), ""
    if not file.matched:
        try:
            head = sources.head(uri, SNIFF_BYTES)
        except FileNotFoundError:
            return _failed(file, shown, "missing", "missing: file not found")
        except OSError as exc:
            return _failed(file, shown, "unreadable", f"unreadable: {exc.strerror or exc}")
        if not is_pdf_head(head):
            what = "empty" if not head else "not a PDF (no %PDF header)"
            return _failed(file, shown, "not_matched", f"not taken: the name matches none of intake.patterns and the "
                           f"content is {what}", size=int(version.split(":", 1)[0] or 0) if version else 0)
    if cache is not None and sources.is_remote(uri):
        with ExitStack() as stack:
            try:
                local, digest, size = stack.enter_context(cache.open(uri, version))
            except FileNotFoundError:
                return _failed(file, shown, "missing", "missing: object not found")
            except OSError as exc:
                return _failed(file, shown, "unreadable", f"unreadable: {exc}")
            return _prepare(file, cfg, workdir, skip, shown, local, digest, size)
    return _prepare(file, cfg, workdir, skip, shown)


def _failed(file: InputFile, shown: str, code: str, message: str, doc_id: str = "", size: int = 0,
            pages: int = 0) -> tuple[DocumentRecord, str]:
    return DocumentRecord(doc_id=doc_id, source_uri=shown, source=file.source, num_pages=pages, status=Status.FAILED,
                          problems=[Problem(Stage.INTAKE, code, message)], size_bytes=size), ""


def _prepare(file: InputFile, cfg: IntakeConfig, workdir: Path, skip: Callable[[str], bool] | None, shown: str,
             cached: Path | None = None, cached_digest: str = "", cached_size: int = 0) -> tuple[DocumentRecord, str]:
    uri = file.path
    remote = sources.is_remote(uri)

    def failed(code: str, message: str, doc_id: str = "", size: int = 0, pages: int = 0) -> tuple[DocumentRecord, str]:
        return _failed(file, shown, code, message, doc_id, size, pages)

    if cached is not None:
        local, doc_id, size = cached, cached_digest, cached_size
    elif remote:
        local = workdir / ("original" + Path(uri.split("?", 1)[0]).suffix.lower())
        try:
            doc_id, size = sources.fetch(uri, local)
        except FileNotFoundError:
            return failed("missing", "missing: object not found")
        except OSError as exc:
            return failed("unreadable", f"unreadable: {exc}")
    else:
        local = Path(shown)
        if not local.exists():
            return failed("missing", "missing: file not found")
        if not local.is_file():
            return failed("not_a_file", "not a regular file")
        try:
            doc_id, size = file_digest(str(local))
        except OSError as exc:
            return failed("unreadable", f"unreadable: {exc.strerror or exc}")
    if size == 0:
        # An empty file still gets an id so its outcome is addressable in the ledger.
        return failed("empty", "empty file", doc_id)
    if skip is not None and skip(doc_id):
        return DocumentRecord(doc_id=doc_id, source_uri=shown, source=file.source, num_pages=0, status=Status.SKIPPED,
                              problems=[Problem(Stage.INTAKE, "done", "already done (ledger)")], size_bytes=size), ""
    if file.matched and kind_of(uri) != "pdf":  # an unmatched file got here because its bytes are a PDF
        try:
            local = to_pdf(local, workdir, cfg.normalize_timeout_s)
        except NormalizeError as exc:
            return failed("normalize", f"normalise to PDF: {exc}", doc_id, size)
    try:
        pages, problem = check_pdf(str(local), cfg)
    except Exception as exc:  # noqa: BLE001 - pdfium can fail in ways it does not classify; the file, not the run, fails
        pages, problem = 0, Problem(Stage.INTAKE, "unreadable", f"unreadable PDF ({type(exc).__name__}: {exc})")
    if problem is not None:
        return failed(problem.code, problem.message, doc_id, size, pages)
    identity = document_identity(str(local), pages, cfg.password) if cfg.identity else ""
    return DocumentRecord(doc_id=doc_id, source_uri=shown, source=file.source, num_pages=pages,
                          size_bytes=size, identity=identity), str(local)
