"""Normalise non-PDF inputs to PDF with deterministic tools, so every later stage sees one format.

Images (PNG/JPEG/TIFF, every TIFF frame a page) go through Pillow; DOCX/PPTX/XLSX through LibreOffice headless
(``soffice --headless --convert-to pdf``) with a throw-away profile per call, because two soffice processes sharing
one profile block each other. The document's ``doc_id`` is the hash of the original file, never of this PDF (the
PDF bytes carry a creation date and would change on every run).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from chunker.errors import ChunkerError

IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".tif", ".tiff"})
OFFICE_SUFFIXES = frozenset({".docx", ".pptx", ".xlsx", ".doc", ".ppt", ".xls", ".odt", ".odp", ".ods"})
SOFFICE_NAMES = ("soffice", "libreoffice")


class NormalizeError(ChunkerError):
    """The file could not be turned into a PDF; the message is the per-document reason."""


def kind_of(path: str) -> str:
    """``pdf``, ``image`` or ``office`` by suffix; anything else is treated as a PDF and checked as one."""
    suffix = Path(path.split("?", 1)[0]).suffix.lower()
    if suffix in IMAGE_SUFFIXES:
        return "image"
    if suffix in OFFICE_SUFFIXES:
        return "office"
    return "pdf"


def soffice_path() -> str | None:
    for name in SOFFICE_NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


def image_to_pdf(src: Path, dst: Path) -> Path:
    from PIL import Image, ImageSequence, UnidentifiedImageError

    try:
        with Image.open(src) as im:
            # RGB: PDF has no alpha, and palette/16-bit modes are not all writable.
            frames = [f.convert("RGB") for f in ImageSequence.Iterator(im)]
    except (UnidentifiedImageError, OSError, ValueError) as exc:
        raise NormalizeError(f"unreadable image ({exc})") from None
    if not frames:
        raise NormalizeError("image has no frames")
    # A fixed resolution keeps page sizes (and so rendering) deterministic across runs.
    frames[0].save(dst, "PDF", save_all=True, append_images=frames[1:], resolution=150.0)
    return dst


def office_to_pdf(src: Path, dst: Path, timeout_s: float) -> Path:
    exe = soffice_path()
    if exe is None:
        raise NormalizeError(
            "LibreOffice not installed (needed for DOCX/PPTX/XLSX): apt-get install libreoffice-writer-nogui "
            "libreoffice-impress-nogui libreoffice-calc-nogui"
        )
    with tempfile.TemporaryDirectory(prefix="soffice-") as tmp:
        profile = Path(tmp) / "profile"
        outdir = Path(tmp) / "out"
        cmd = [exe, f"-env:UserInstallation=file://{profile}", "--headless", "--norestore", "--nologo",
               "--convert-to", "pdf", "--outdir", str(outdir), str(src)]
        try:
            proc = subprocess.run(cmd, capture_output=True, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            raise NormalizeError(f"LibreOffice conversion timed out after {timeout_s:.0f} s") from None
        produced = outdir / (src.stem + ".pdf")
        if proc.returncode != 0 or not produced.is_file() or produced.stat().st_size == 0:
            err = (proc.stderr or proc.stdout or b"").decode(errors="replace").strip()[-300:]
            raise NormalizeError(f"LibreOffice could not convert the file (exit {proc.returncode}): {err or 'no PDF'}")
        shutil.move(str(produced), dst)
    return dst


def to_pdf(src: Path, workdir: Path, timeout_s: float = 180.0) -> Path:
    """The PDF for ``src``: ``src`` itself for PDFs, else a new file in ``workdir``."""
    kind = kind_of(src.name)
    if kind == "pdf":
        return src
    dst = workdir / (src.stem + ".normalized.pdf")
    if kind == "image":
        return image_to_pdf(src, dst)
    return office_to_pdf(src, dst, timeout_s)
