"""The converter interface every conversion path implements.

A converter turns one :class:`SegmentJob` into its batches, strictly in page order, each carrying the Markdown
contract of :mod:`chunker.contract` and the context it hands to the next batch. Converters are async so one actor can
keep many documents' chains in flight; CPU-bound converters run their work in a thread.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Protocol

from chunker.types import ConvertedBatch, SegmentJob

# Who hears of each batch the moment it is converted (the run's progress line counts pages as they come, not when a
# 64-page segment is done). Set per segment by chunker.run.segment.convert_segment. A context variable rather than a
# parameter of convert(): the interface stays pages + context in, batches out, and asyncio.to_thread hands it to the
# thread a CPU-bound converter works in.
ON_BATCH: ContextVar[Callable[[ConvertedBatch], None] | None] = ContextVar("on_batch", default=None)


def batch_done(batch: ConvertedBatch) -> None:
    """Tell whoever listens (:data:`ON_BATCH`) that ``batch`` is converted; a listener's failure is not the batch's."""
    listener = ON_BATCH.get()
    if listener is not None:
        try:
            listener(batch)
        except Exception:  # noqa: BLE001, S110 - progress is a convenience, never a reason to lose a conversion
            pass


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
