"""The benchmark's real-text corpus: the CloudWay PDFs several times over, each copy with bytes of its own.

A copy is the original followed by one PDF comment line after ``%%EOF`` naming the copy: readers ignore bytes after
the last cross-reference section (pdfium finds ``startxref`` scanning back from the end), so every copy has the same
pages and text, but its own content hash and so its own ``doc_id``: the pipeline treats it as a new document.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def shared_data() -> Path:
    """``$CHUNKER_SHARED_DATA``, else ``../shared/data`` next to the repository (as the tests find it)."""
    return Path(os.environ.get("CHUNKER_SHARED_DATA") or (REPO_ROOT / ".." / "shared" / "data")).resolve()


CLOUDWAY = shared_data() / "rag-multi-corpus-cloudway" / "pdf"


def copies(dest: Path, times: int = 5, source: Path = CLOUDWAY) -> list[Path]:
    """``times`` copies of every PDF of ``source`` under ``dest/copy{i}/``, written once (kept when present and
    whole). Returns the paths in a stable order."""
    pdfs = sorted(source.glob("*.pdf"))
    if not pdfs:
        raise FileNotFoundError(f"no PDFs in {source}")
    out = []
    for i in range(times):
        folder = dest / f"copy{i}"
        folder.mkdir(parents=True, exist_ok=True)
        tag = f"\n% vision-chunker benchmark copy {i}\n".encode()
        for pdf in pdfs:
            target = folder / pdf.name
            want = pdf.stat().st_size + len(tag)
            if not (target.is_file() and target.stat().st_size == want):
                tmp = target.with_suffix(".tmp")
                shutil.copyfile(pdf, tmp)
                with tmp.open("ab") as f:
                    f.write(tag)
                tmp.replace(target)
            out.append(target)
    return out


def blank_pdf(pages: int, tag: str) -> bytes:
    """A valid PDF of ``pages`` empty A4 pages whose bytes carry ``tag`` (its own content hash, hence its own doc_id):
    what intake reads (bytes to hash, a page count) for a dry run whose converter never looks at a page. Written
    by hand, with a correct cross-reference table, in microseconds per page."""
    if pages < 1:
        raise ValueError(f"a PDF needs at least one page, not {pages}")
    objs = ["<< /Type /Catalog /Pages 2 0 R >>",
            "<< /Type /Pages /Kids [" + " ".join(f"{3 + i} 0 R" for i in range(pages)) + f"] /Count {pages} >>"]
    objs += ["<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] >>"] * pages
    out = bytearray(b"%PDF-1.4\n% " + tag.encode("ascii", "replace") + b"\n")
    offsets = []
    for n, body in enumerate(objs, start=1):
        offsets.append(len(out))
        out += f"{n} 0 obj\n{body}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objs) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{o:010d} 00000 n \n" for o in offsets).encode()
    out += f"trailer\n<< /Size {len(objs) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


def dryrun_counts(n_docs: int, seed: int = 0, median: float = 10.0, sigma: float = 0.9,
                  max_pages: int = 600) -> list[int]:
    """Page counts of a dry-run corpus: many short documents (lognormal around ``median``) and a tail of long ones."""
    from chunker.eval.synthetic import page_counts

    return page_counts(n_docs, seed, median=median, sigma=sigma, max_pages=max_pages)


def blank_corpus(dest: Path, counts: list[int], seed: int = 0) -> list[Path]:
    """One blank PDF per page count under ``dest`` (kept when already there: names carry seed, index and pages)."""
    dest.mkdir(parents=True, exist_ok=True)
    out = []
    for i, n in enumerate(counts):
        path = dest / f"blank-s{seed}-{i:06d}-{n}p.pdf"
        if not path.is_file():
            tmp = path.with_suffix(".tmp")
            tmp.write_bytes(blank_pdf(n, f"dry run seed {seed} document {i}"))
            tmp.replace(path)
        out.append(path)
    return out
