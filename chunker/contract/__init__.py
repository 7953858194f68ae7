"""Markdown (the conversion contract) -> ID-addressable elements.

The contract every converter writes, model or not:

* ``<!-- page N -->`` on its own line: what follows is on 1-based page N.
* ``#`` .. ``######`` headings: real heading levels.
* Paragraphs: blocks separated by blank lines.
* Lists: items starting ``- ``, ``* ``, ``+ ``, ``1. `` or ``1) ``; indented lines continue the item. One list block is
  one element (steps are never split).
* Tables, two spellings, both parsed into one ``table_row`` element per row whose text names every column:
  a GitHub pipe table (header row, ``---`` row, body rows), or a block between ``<!-- table -->`` and
  ``<!-- /table -->`` holding one self-contained row sentence per line. ``<!-- table continued -->`` opens a block
  that continues the previous table (same group).
* Figures: ``![caption or description](figure)``, optionally followed by ``<!-- bbox x0 y0 x1 y1 -->`` on the same
  line; lines directly below without a blank line extend the description.
* Fenced code blocks (```) are one ``code`` element.

This package is the contract's one home: its grammar and writers in :mod:`chunker.contract.markup` (every converter
writes through :func:`page_marker`, :func:`table_block`, :func:`figure_row_sentence`, :func:`figure_line`) and its
parser in :mod:`chunker.contract.parse`. Callers import from ``chunker.contract``; the submodules import each other
directly, never this package, so the re-export below forms no import cycle. Element IDs are
``{doc_id}:{ordinal}`` (see :mod:`chunker.contract.parse`).
"""

from chunker.contract.markup import (FIGURE_PLACEHOLDER, LIST_ITEM, PAGE_MARKER, PIPE_SEPARATOR, TABLE_CLOSE,
                                     TABLE_CONTINUED, TABLE_OPEN, UNIT, figure_line, figure_row_sentence, is_figure,
                                     not_a_heading, page_marker, page_numbers, row_labelled, says_nothing,
                                     table_block, table_row_sentence)
from chunker.contract.parse import SEGMENT_STRIDE, open_headings, parse_batches, parse_markdown, seed_path

__all__ = [
    "FIGURE_PLACEHOLDER", "LIST_ITEM", "PAGE_MARKER", "PIPE_SEPARATOR", "SEGMENT_STRIDE", "TABLE_CLOSE",
    "TABLE_CONTINUED", "TABLE_OPEN", "UNIT", "figure_line", "figure_row_sentence", "is_figure", "not_a_heading",
    "open_headings", "page_marker", "page_numbers", "parse_batches", "parse_markdown", "row_labelled", "says_nothing",
    "seed_path", "table_block", "table_row_sentence",
]
