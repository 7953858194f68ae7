"""Pages without a text layer: rendered with pypdfium2 and read with RapidOCR into the same :class:`Line` shape.

Two steps, so that only the first holds the process-wide pdfium lock: :meth:`PageOcr.rasterise` (pdfium, ~10 ms)
and :meth:`PageOcr.recognise` (ONNX Runtime, seconds a page on a CPU), which runs while other threads render.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import pypdfium2 as pdfium

from chunker.convert.pdf_text.textlayer import Line, PageText
from chunker.types import safe_text

_MIN_SCORE = 0.5


def restore_spaces(text: str, char_boxes: Any, pieces: Any, ink: Any, box: Any) -> str:
    """``text`` with a space wherever two recognised characters sit either side of a blank column run in the line
    image wider than a fifth of the line's height (a word gap; letters sit a few pixels apart). ``pieces`` and
    ``char_boxes`` are RapidOCR's per-character text and boxes; on any mismatch the text is returned as it is."""
    pieces = [str(p) for p in pieces or []]
    if not pieces or len(pieces) != len(char_boxes or []) or "".join(pieces).replace(" ", "") != text.replace(" ", ""):
        return text
    xs = [p[0] for p in box]
    ys = [p[1] for p in box]
    h, w = ink.shape
    x0, x1 = max(0, int(min(xs))), min(w, int(max(xs)) + 1)
    y0, y1 = max(0, int(min(ys))), min(h, int(max(ys)) + 1)
    if x1 - x0 < 2 or y1 - y0 < 2:
        return text
    blank = ~ink[y0:y1, x0:x1].any(axis=0)
    min_gap = 0.2 * (y1 - y0)
    gaps: list[float] = []  # centres (image x) of word-wide blank runs
    k = 0
    while k < len(blank):
        if blank[k]:
            j = k
            while j < len(blank) and blank[j]:
                j += 1
            if j - k >= min_gap and k > 0 and j < len(blank):
                gaps.append(x0 + (k + j) / 2)
            k = j
        else:
            k += 1
    centres = [sum(pt[0] for pt in b) / len(b) for b in char_boxes]
    out: list[str] = []
    for i, piece in enumerate(pieces):
        if i and piece.strip() and out and out[-1].strip() \
                and any(centres[i - 1] < g < centres[i] for g in gaps):
            out.append(" ")
        out.append(piece)
    return "".join(out)


@dataclass
class Scan:
    """A page rasterised for OCR: RGB pixels, the scale they were rendered at, and the page size in points."""

    pixels: Any  # numpy uint8 array, height x width x 3
    scale: float
    width: float
    height: float


class PageOcr:
    """RapidOCR, loaded on first use and kept for the converter's life (loading costs more than a small page)."""

    def __init__(self, max_side_px: int) -> None:
        self.max_side_px = max_side_px
        self._engine: Any = None
        # One recognition at a time per converter: ONNX Runtime already spreads one page over every core, and
        # RapidOCR's Python pipeline is not documented as thread-safe. This lock is not pdfium's.
        self._lock = threading.Lock()

    def _load(self) -> Any:
        if self._engine is None:
            try:
                from rapidocr_onnxruntime import RapidOCR
            except ImportError as exc:  # pragma: no cover - depends on the install
                raise RuntimeError("OCR needs rapidocr-onnxruntime (pip install rapidocr-onnxruntime)") from exc
            self._engine = RapidOCR()
        return self._engine

    def rasterise(self, page: pdfium.PdfPage) -> Scan:
        """The page's pixels for OCR. Call with the pdfium lock held (it is the only pdfium step)."""
        import numpy as np

        width, height = page.get_size()
        scale = self.max_side_px / max(width, height, 1.0)
        pixels = np.asarray(page.render(scale=scale).to_pil().convert("RGB"))  # an owned copy of the bitmap
        return Scan(pixels, scale, width, height)

    def recognise(self, scan: Scan, page_no: int) -> PageText:
        """Lines read from a rasterised page: no pdfium, so no pdfium lock."""
        pixels, scale = scan.pixels, scan.scale
        # Word boxes: the recogniser often drops the space between words; the ink gaps put it back.
        with self._lock:
            result, _ = self._load()(pixels, return_word_box=True)
        ink = pixels.min(axis=2) < 128
        lines: list[Line] = []
        for row in result or []:
            box, text, score = row[0], str(row[1]), row[2]
            if len(row) >= 5:
                text = restore_spaces(text, row[3], row[4], ink, box)
            # One character per box slot below: surrogate halves (if a recogniser ever emits them) become one.
            text = safe_text(text).strip()
            if not text or float(score) < _MIN_SCORE:
                continue
            xs = [p[0] / scale for p in box]
            ys = [p[1] / scale for p in box]
            x0, x1, y0, y1 = min(xs), max(xs), min(ys), max(ys)
            step = (x1 - x0) / max(len(text), 1)
            ln = Line(
                chars=list(text),
                xs0=[x0 + k * step for k in range(len(text))],
                xs1=[x0 + (k + 1) * step for k in range(len(text))],
                bolds=[False] * len(text),
                x0=x0, y0=y0, x1=x1, y1=y1,
                # Box height approximates the font size; OCR pages never set heading levels from it.
                size=round((y1 - y0) * 0.8, 1),
            )
            lines.append(ln)
        lines.sort(key=lambda ln: (round(ln.y0 / 4), ln.x0))
        return PageText(page_no, scan.width, scan.height, lines, sum(len(ln.text) for ln in lines), {}, ocr=True)

    def read(self, page: pdfium.PdfPage, page_no: int) -> PageText:
        """Both steps at once (the caller holds the pdfium lock throughout: prefer the two steps)."""
        return self.recognise(self.rasterise(page), page_no)
