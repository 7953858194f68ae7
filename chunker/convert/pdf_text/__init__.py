"""The ``pdf-text`` converter: the PDF text layer (and OCR for pages without one) in the Markdown contract.

Modules by responsibility: :mod:`.textlayer` (characters, lines, fonts), :mod:`.notemarks` (note marks drawn
apart, back into their lines), :mod:`.headings` (levels from font statistics), :mod:`.furniture` (headers, footers,
page numbers, TOC), :mod:`.tables` (ruled tables), :mod:`.figures` (image objects and captions), :mod:`.ocr`
(RapidOCR), :mod:`.blocks` (paragraphs, lists, Markdown), :mod:`.converter` (the :class:`PdfTextConverter`).
"""

from chunker.convert.pdf_text.converter import PdfTextConverter

__all__ = ["PdfTextConverter"]
