"""How big a line's type is and how far apart its characters may sit: the size rules of the text layer's line
reader (:mod:`chunker.convert.pdf_text.textlayer`), which every measure in ems downstream (a word space, the gap
between two cells of a table row) depends on."""

from __future__ import annotations

from typing import Protocol


class Line(Protocol):
    """What these rules read and set of a text layer line (:class:`chunker.convert.pdf_text.textlayer.Line`;
    named structurally so that this lower layer does not import the reader that uses it)."""

    chars: list[str]
    y0: float
    y1: float
    size: float
    bold: bool
    italic: bool
    mono: bool

MIN_SIZE = 3.0  # below this a reported font size is not what the page shows (see finish_line)
# Above this many times its line's glyph height a reported size is not what the page shows either: some filings
# printed from HTML report 416 for 8-point type (their text matrix scales it down). Text as printed has a size
# 1.0-2.1x the height of its line's glyph boxes (measured: all 2,713 pages of financebench-dev, CloudWay and the
# generated set but five filings' 531, which sit at ~50x), so the two cases are far apart. _TYPICAL_RATIO is that
# ratio's usual value, what an oversized page is scaled to.
_OVERSIZE = 4.0
_TYPICAL_RATIO = 1.4


def finish_line(line: Line, sizes: dict[float, int], boldc: int, italc: int, monoc: int, vis: int,
                page_sizes: dict[float, int]) -> None:
    """A closed line's size (its characters' most common one, or its height where pdfium reports a size no page
    shows) and its bold, italic and mono flags (a majority of its visible characters)."""
    best = max(sizes.items(), key=lambda kv: kv[1])[0] if sizes else 0.0
    if best < MIN_SIZE and line.y1 - line.y0 >= MIN_SIZE:
        # pdfium reports the unscaled size of text drawn through a scaled form or a Type 3 font (1.0 where the
        # glyphs stand 9 points tall, in filings printed from HTML): the line's height tells the size instead,
        # which the gaps between cells and words are measured against.
        real = float(round((line.y1 - line.y0) / 0.95))
        page_sizes[best] = page_sizes.get(best, 0) - sizes[best]
        page_sizes[real] = page_sizes.get(real, 0) + sizes[best]
        best = real
    line.size = best
    line.bold = vis > 0 and boldc * 2 > vis
    line.italic = vis > 0 and italc * 2 > vis
    line.mono = vis > 0 and monoc * 2 > vis


def goes_on(x0: float, y0: float, y1: float, size: float, alnum: bool, last_x1: float, ly0: float, ly1: float,
            line_size: float) -> bool:
    """Whether a character after a line break pdfium generated carries on the line: the same size, not back to the
    left, and on the same baseline: a letter or digit centred within 0.4 of the line's height of its middle (a
    header cell set half a line lower is another line), punctuation anywhere in its band (a comma hangs below
    it). A superscript note mark, set smaller, stays apart as before."""
    if ly1 <= ly0 or abs(size - line_size) > 0.05 * line_size:
        return False
    if x0 < last_x1 - 0.25 * gap_size(size, y1 - y0, ly1 - ly0):
        return False
    mid = (y0 + y1) / 2
    if alnum:
        return abs(mid - (ly0 + ly1) / 2) <= 0.4 * (ly1 - ly0)
    return ly0 - 1 <= mid <= ly1 + 1


def gap_size(size: float, glyph_h: float, line_h: float) -> float:
    """The size a gap between two characters of a line is measured against (a gap wider than it is a space):
    the reported size unless the page cannot mean it (see MIN_SIZE, _OVERSIZE), then one read off the glyphs."""
    if size < MIN_SIZE:
        return max(size, glyph_h / 0.7)
    if line_h >= MIN_SIZE and size > _OVERSIZE * line_h:
        return line_h / 0.7
    return size


def rescale_oversized(lines: list[Line], page_sizes: dict[float, int]) -> dict[float, int]:
    """Every size of a page whose text reports sizes many times its glyphs' height, scaled to what the glyphs
    show; any other page's sizes as reported. Relative sizes (a heading over the body) are kept; what this restores
    is every measure in ems: the gap between two cells of a table row (0.8 em), a word space."""
    ratios = [ln.size / (ln.y1 - ln.y0) for ln in lines
              if ln.size > 0 and ln.y1 - ln.y0 >= MIN_SIZE and sum(c.isalnum() for c in ln.chars) >= 4]
    if not ratios:
        return page_sizes
    ratios.sort()
    median = ratios[len(ratios) // 2]
    if median <= _OVERSIZE:
        return _settle_lines(lines, page_sizes)
    k = _TYPICAL_RATIO / median
    for ln in lines:
        ln.size = round(ln.size * k, 1)
    scaled: dict[float, int] = {}
    for size, n in page_sizes.items():
        key = round(size * k, 1)
        scaled[key] = scaled.get(key, 0) + n
    return scaled


def _settle_lines(lines: list[Line], page_sizes: dict[float, int]) -> dict[float, int]:
    """On a page whose text reports sizes as printed, a line reporting many times its glyphs' height (a chart drawn
    through a scaled matrix: "Comparison of Five-Year Total Return" at 900 for 8.5-point glyphs) gets the page's
    usual size: its own says nothing, and as the segment's largest size it would head the rest of the document."""
    odd = [ln for ln in lines if ln.y1 - ln.y0 >= MIN_SIZE and ln.size > _OVERSIZE * (ln.y1 - ln.y0)]
    if not odd:
        return page_sizes
    wrong = {round(ln.size, 1) for ln in odd}
    usual = max((kv for kv in page_sizes.items() if kv[0] not in wrong), key=lambda kv: kv[1], default=(0.0, 0))[0]
    if usual <= 0:
        return page_sizes
    sizes = dict(page_sizes)
    for ln in odd:
        n = sum(1 for c in ln.chars if not c.isspace())
        key = round(ln.size, 1)
        sizes[key] = sizes.get(key, 0) - n
        sizes[usual] = sizes.get(usual, 0) + n
        ln.size = usual
    return {k: v for k, v in sizes.items() if v > 0}
