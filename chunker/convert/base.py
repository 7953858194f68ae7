"""The converter interface every conversion path implements.

A converter turns one :class:`SegmentJob` into its batches, strictly in page order, each carrying the Markdown
contract of :mod:`chunker.contract` and the context it hands to the next batch. Converters are async so one actor can
keep many documents' chains in flight; CPU-bound converters run their work in a thread.
"""

from __future__ import annotations

from typing import Protocol

from chunker.types import ConvertedBatch, SegmentJob


class PageImages(Protocol):
    """Rendered pages of one document, produced on demand (see :mod:`chunker.convert.render`)."""

    def image(self, page: int) -> bytes:
        """Encoded image (JPEG/PNG) of a 1-based page."""
        ...

    def size(self, page: int) -> tuple[int, int]:
        """(width, height) in pixels of the rendered 1-based page."""
        ...

    @property
    def mime(self) -> str: ...


class Converter(Protocol):
    name: str

    async def convert(self, job: SegmentJob, images: PageImages | None) -> list[ConvertedBatch]:
        """Convert every batch of ``job`` in order. Per-batch failures are recorded on the batch (``error``,
        ``fallback``), never raised; only defects and dead engines raise."""
        ...

    def needs_images(self) -> bool:
        """Whether :meth:`convert` needs rendered pages (the pdf-text converter reads the PDF itself)."""
        ...
