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
