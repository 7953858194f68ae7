"""Page rendering with pypdfium2, directly at the capped scale (never rendered large and shrunk), encoded once.

pdfium is one process-wide C library that is not thread-safe, so every call into it holds :data:`PDFIUM_LOCK`; but
only those calls. Rasterising a page holds the lock (~10 ms at 1,568 px); the JPEG encode that follows (~8-10 ms, as
long again) works on a PIL image that owns its pixels and runs outside it, as does the page cache's bookkeeping, so
the chains of a conversion actor render in parallel up to pdfium itself.
"""

from __future__ import annotations

import io
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

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

    def __post_init__(self) -> None:
        self._cache_lock = threading.Lock()  # the page cache only; pdfium has its own lock

    def _doc(self):  # noqa: ANN202 - pypdfium2 type stays a lazy import
        """The open document; call with PDFIUM_LOCK held."""
        if self._pdf is None:
            import pypdfium2 as pdfium

            self._pdf = pdfium.PdfDocument(self.path)
        return self._pdf

    def render(self, page: int) -> RenderedPage:
        with self._cache_lock:
            hit = self.pages.get(page)
            if hit is not None:
                self.pages.move_to_end(page)
                return hit
        # Two threads asking for the same missing page both render it (the result is the same); the converter asks
        # for each page from one thread only.
        with PDFIUM_LOCK:
            image, render_ms = rasterise(self._doc(), page, self.cfg)
        rendered = encode(image, page, self.cfg, render_ms)
        with self._cache_lock:
            self.pages[page] = rendered
            self.pages.move_to_end(page)
            while len(self.pages) > self.max_cached:
                self.pages.popitem(last=False)
        return rendered

    def image(self, page: int) -> bytes:
        return self.render(page).data

    def size(self, page: int) -> tuple[int, int]:
        r = self.render(page)
        return r.width, r.height

    def drop(self, pages: range | list[int]) -> None:
        """Free pages a finished batch no longer needs (memory stays bounded on 500-page documents)."""
        with self._cache_lock:
            for p in pages:
                self.pages.pop(p, None)

    def close(self) -> None:
        with PDFIUM_LOCK:
            if self._pdf is not None:
                self._pdf.close()  # type: ignore[attr-defined]
                self._pdf = None
        with self._cache_lock:
            self.pages.clear()


def rasterise(pdf, page: int, cfg: RenderConfig) -> tuple[Any, float]:  # noqa: ANN001 - pypdfium2 document
    """The page as a PIL image that owns its pixels, and the ms it took. Call with PDFIUM_LOCK held."""
    t0 = time.perf_counter()
    pg = pdf[page - 1]
    try:
        w, h = pg.get_size()
        bitmap = pg.render(scale=render_scale(w, h, cfg))
        # to_pil() may share pdfium's buffer (RGBA/RGBX/L bitmaps): an owned copy (in the colour mode the encoder
        # wants) may outlive the bitmap, which is freed here, under the lock, not by the garbage collector later.
        image = bitmap.to_pil()
        image = image.convert("RGB") if cfg.image_format == "jpeg" else image.copy()
        del bitmap
    finally:
        pg.close()
    return image, (time.perf_counter() - t0) * 1000


def encode(image: Any, page: int, cfg: RenderConfig, render_ms: float = 0.0) -> RenderedPage:
    """Encode a rasterised page (pure PIL: no pdfium, no lock)."""
    t0 = time.perf_counter()
    buf = io.BytesIO()
    if cfg.image_format == "jpeg":
        image.save(buf, format="JPEG", quality=cfg.jpeg_quality)
    else:
        image.save(buf, format="PNG")
    return RenderedPage(page=page, width=image.width, height=image.height, data=buf.getvalue(),
                        render_ms=render_ms, encode_ms=(time.perf_counter() - t0) * 1000)


def render_page(pdf, page: int, cfg: RenderConfig) -> RenderedPage:  # noqa: ANN001 - pypdfium2 document
    """Rasterise (taking PDFIUM_LOCK) and encode (without it) one page of an open document."""
    with PDFIUM_LOCK:
        image, render_ms = rasterise(pdf, page, cfg)
    return encode(image, page, cfg, render_ms)
