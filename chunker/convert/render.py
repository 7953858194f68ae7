"""Page rendering with pypdfium2, directly at the capped scale (never rendered large and shrunk), encoded once."""

from __future__ import annotations

import io
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from chunker.config import RenderConfig

POINTS_PER_INCH = 72.0

# pdfium is not thread-safe within a process: every call into it from a worker thread holds this lock.
PDFIUM_LOCK = threading.Lock()


def render_scale(width_pt: float, height_pt: float, cfg: RenderConfig) -> float:
    """Scale factor (pixels per point) for ``cfg.dpi`` capped so the longest side is at most ``cfg.max_side_px``."""
    scale = cfg.dpi / POINTS_PER_INCH
    longest = max(width_pt, height_pt) * scale
    if longest > cfg.max_side_px:
        scale *= cfg.max_side_px / longest
    return scale


@dataclass
class RenderedPage:
    page: int  # 1-based
    width: int
    height: int
    data: bytes
    render_ms: float
    encode_ms: float


@dataclass
class RenderedDocument:
    """Rendered pages of one document, filled on demand and kept so a retry never renders twice.

    Implements :class:`chunker.convert.base.PageImages`. The cache keeps the last ``max_cached`` pages only, so a
    chain over a long segment holds a few batches of images, never the whole document. Safe to call from threads.
    """

    path: str
    cfg: RenderConfig
    max_cached: int = 16
    pages: OrderedDict[int, RenderedPage] = field(default_factory=OrderedDict)
    _pdf: object | None = None

    @property
    def mime(self) -> str:
        return "image/jpeg" if self.cfg.image_format == "jpeg" else "image/png"

    def _doc(self):  # noqa: ANN202 - pypdfium2 type stays a lazy import
        if self._pdf is None:
            import pypdfium2 as pdfium

            self._pdf = pdfium.PdfDocument(self.path)
        return self._pdf

    def render(self, page: int) -> RenderedPage:
        with PDFIUM_LOCK:
            if page not in self.pages:
                self.pages[page] = render_page(self._doc(), page, self.cfg)
                while len(self.pages) > self.max_cached:
                    self.pages.popitem(last=False)
            self.pages.move_to_end(page)
            return self.pages[page]

    def image(self, page: int) -> bytes:
        return self.render(page).data

    def size(self, page: int) -> tuple[int, int]:
        r = self.render(page)
        return r.width, r.height

    def drop(self, pages: range | list[int]) -> None:
        """Free pages a finished batch no longer needs (memory stays bounded on 500-page documents)."""
        for p in pages:
            self.pages.pop(p, None)

    def close(self) -> None:
        with PDFIUM_LOCK:
            if self._pdf is not None:
                self._pdf.close()  # type: ignore[attr-defined]
                self._pdf = None
            self.pages.clear()


def render_page(pdf, page: int, cfg: RenderConfig) -> RenderedPage:  # noqa: ANN001 - pypdfium2 document
    t0 = time.perf_counter()
    pg = pdf[page - 1]
    try:
        w, h = pg.get_size()
        bitmap = pg.render(scale=render_scale(w, h, cfg))
        image = bitmap.to_pil()
    finally:
        pg.close()
    t1 = time.perf_counter()
    buf = io.BytesIO()
    if cfg.image_format == "jpeg":
        image.convert("RGB").save(buf, format="JPEG", quality=cfg.jpeg_quality)
    else:
        image.save(buf, format="PNG")
    t2 = time.perf_counter()
    return RenderedPage(page=page, width=image.width, height=image.height, data=buf.getvalue(),
                        render_ms=(t1 - t0) * 1000, encode_ms=(t2 - t1) * 1000)
