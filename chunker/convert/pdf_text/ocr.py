"""Pages without a text layer: rendered with pypdfium2 and read with RapidOCR into the same :class:`Line` shape."""

from __future__ import annotations

from typing import Any

import pypdfium2 as pdfium

from chunker.convert.pdf_text.textlayer import Line, PageText

_MIN_SCORE = 0.5


class PageOcr:
    """RapidOCR, loaded on first use and kept for the converter's life (loading costs more than a small page)."""

    def __init__(self, max_side_px: int) -> None:
        self.max_side_px = max_side_px
        self._engine: Any = None

    def _load(self) -> Any:
        if self._engine is None:
            try:
                from rapidocr_onnxruntime import RapidOCR
            except ImportError as exc:  # pragma: no cover - depends on the install
                raise RuntimeError("OCR needs rapidocr-onnxruntime (pip install rapidocr-onnxruntime)") from exc
            self._engine = RapidOCR()
        return self._engine

    def read(self, page: pdfium.PdfPage, page_no: int) -> PageText:
        import numpy as np

        width, height = page.get_size()
        scale = self.max_side_px / max(width, height, 1.0)
        image = page.render(scale=scale).to_pil().convert("RGB")
        result, _ = self._load()(np.asarray(image))
        lines: list[Line] = []
        for box, text, score in result or []:
            text = str(text).strip()
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
        return PageText(page_no, width, height, lines, sum(len(ln.text) for ln in lines), {}, ocr=True)
