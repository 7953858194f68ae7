"""Baseline chunkings scored beside ours in the same run: fixed-size windows over the PDF text layer, and any
reference chunk file (JSONL, one document a line with its ``chunks``)."""

from __future__ import annotations

import json
from pathlib import Path, PurePath

from chunker.types import safe_text
from chunker.plan.deterministic import chunk_id
from chunker.types import Chunk


def text_layer_pages(path: str) -> list[str]:
    import pypdfium2 as pdfium

    pdf = pdfium.PdfDocument(path)
    try:
        out = []
        for i in range(len(pdf)):
            page = pdf[i]
            tp = page.get_textpage()
            # UTF-16 decoding pairs surrogates; a lone one becomes U+FFFD instead of vanishing or reaching Arrow.
            out.append(safe_text(tp.get_text_range(errors="replace")))
            tp.close()
            page.close()
        return out
    finally:
        pdf.close()


def fixed_size_chunks(doc_id: str, source: str, pages: list[str], size: int = 1000, overlap: int = 200,
                      name: str = "fixed-size") -> list[Chunk]:
    """Windows of ``size`` characters advancing by ``size - overlap`` over the concatenated text layer."""
    if overlap >= size:
        raise ValueError(f"overlap ({overlap}) must be less than size ({size})")
    text = ""
    starts: list[int] = []
    for p in pages:
        starts.append(len(text))
        text += p.replace("\r\n", "\n") + "\n"

    def page_of(offset: int) -> int:
        n = 0
        for i, s in enumerate(starts):
            if s <= offset:
                n = i
        return n + 1

    chunks: list[Chunk] = []
    pos = 0
    while pos < len(text):
        piece = text[pos:pos + size]
        if piece.strip():
            ids = [f"{doc_id}:{name}:{pos}"]
            chunks.append(Chunk(chunk_id=chunk_id(doc_id, ids), doc_id=doc_id, element_ids=ids, text=piece,
                                breadcrumb="", page_start=page_of(pos), page_end=page_of(pos + len(piece) - 1),
                                modality="text", planner=name, config_hash=name, source=source))
        if pos + size >= len(text):
            break
        pos += size - overlap
    return chunks


def reference_chunks(path: str | Path, name: str = "reference") -> list[Chunk]:
    """Chunks of a reference file; ``file_name`` X.md (or X.pdf) is matched to X.pdf."""
    out: list[Chunk] = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
            fname, texts = rec["file_name"], rec["chunks"]
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise ValueError(f"{path} line {n}: expected {{'file_name', 'chunks'}} ({exc})") from None
        source = str(PurePath(fname).with_suffix(".pdf"))
        doc_id = f"ref-{chunk_id(source, [])[:16]}"
        for i, t in enumerate(texts):
            ids = [f"{doc_id}:{i}"]
            out.append(Chunk(chunk_id=chunk_id(doc_id, ids), doc_id=doc_id, element_ids=ids, text=str(t),
                             breadcrumb="", page_start=0, page_end=0, modality="text", planner=name,
                             config_hash=name, source=source))
    return out
