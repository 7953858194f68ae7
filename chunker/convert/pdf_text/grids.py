"""Ruled grids among a stack of rules: where one grid ends and the next begins, and what above a grid is not in it.

A stack (:func:`chunker.convert.pdf_text.tables.find_tables`) gathers the horizontal rules that share an x extent,
so a page banner whose box overlaps a grid, and grids stacked with no gap between them, come as one run of bands.
Exported reports draw each grid cell by cell (a stroked box per cell): its vertical rules say which bands are rows
of which grid.
"""

from __future__ import annotations

from chunker.convert.pdf_text.cells import SEG_GAP_EM
from chunker.convert.pdf_text.textlayer import PageText


def rules_extent(stack: list[tuple[float, float, float]], bands: list[tuple[float, float]], x0: float, x1: float
                 ) -> tuple[float, float]:
    """The x extent of the stack's rules that bound ``bands`` (the stack's own extent when fewer than two do)."""
    own = [r for r in stack if bands and bands[0][0] - 0.5 <= r[2] <= bands[-1][1] + 0.5]
    return (min(r[0] for r in own), max(r[1] for r in own)) if len(own) >= 2 else (x0, x1)


def _crossing(band: tuple[float, float], vertical: list[tuple[float, float, float]]) -> list[float]:
    """x of the vertical rules that cross most of a band's height."""
    a, b = band
    return [x for x, y0, y1 in vertical if min(y1, b) - max(y0, a) > 0.5 * (b - a)]


def _columns(xs: list[float]) -> list[float]:
    """Column rules, each once: the edges of two boxes that meet (or of a narrow bullet cell) a few points apart
    are one column boundary."""
    out: list[float] = []
    for x in sorted(xs):
        if not out or x - out[-1] > 6:
            out.append(x)
    return out


def _lined_up(xs: list[float], ys: list[float]) -> int:
    """How many of ``xs`` have a rule of ``ys`` within 3 pt."""
    return sum(any(abs(x - y) <= 3 for y in ys) for x in xs)


def _new_grid(xs: list[float], before: list[float], after: list[float]) -> bool:
    """Whether a band with column rules ``xs`` opens another grid than the ruled band above it (``before``): none of
    its rules lines up with those above, and two or more go on in the ruled band below it (``after``), so it is a
    grid's row and not a lone box (a shaded heading under a table). A filing printed from HTML draws each row's
    cells as invisible boxes whose edges drift from row to row; they keep a rule or two in common: no new grid."""
    return len(before) >= 2 and _lined_up(xs, before) == 0 and _lined_up(xs, after) >= 2


def split_grids(bands: list[tuple[float, float]], vertical: list[tuple[float, float, float]],
                extent: tuple[float, float]) -> list[list[tuple[float, float]]]:
    """A run of bands cut where one ruled grid ends and another begins: grids stacked with no gap (one per
    indicator in an agency report) share the frame's edges but no column rule between them. Read as one table, the
    first grid's column rules cut the next one's text mid-word ("assist a | t least 400"). A new grid begins where
    :func:`_new_grid` says so; bands without column rules just above it (its title) go with it. Slivers (the gap
    between two boxes' stroked edges, under 3 pt) are no rows: both grids' rules cross them."""
    ruled = [(k, xs) for k, b in enumerate(bands) if b[1] - b[0] >= 3
             for xs in [_columns([x for x in _crossing(b, vertical) if extent[0] + 3 < x < extent[1] - 3])] if xs]
    starts = [0]
    for n in range(1, len(ruled) - 1):
        (prev, before), (k, xs), (_, after) = ruled[n - 1], ruled[n], ruled[n + 1]
        if _new_grid(xs, before, after):
            title = [j for j in range(prev + 1, k) if bands[j][1] - bands[j][0] >= 3]
            starts.append(title[0] if title else k)
    return [bands[a:b] for a, b in zip(starts, starts[1:] + [len(bands)]) if bands[a:b]]


def above_grid(page: PageText, bands: list[tuple[float, float]], vertical: list[tuple[float, float, float]],
               centres: list[tuple[float, float]], taken: set[int]) -> int:
    """How many leading bands lie above a ruled grid rather than in it: a page banner or a title set above the
    grid whose rules joined the grid's stack. The grid starts at the first band that shares a vertical rule with
    the band below it; a band above it is outside when none of its vertical rules lines up with the grid's and it
    is a box of its own (rules of its own) or holds titles only (each line one cell, alone on its row, and some
    line running across a column rule of the grid). Cut at the grid's column rules, a title would read
    "Performance Indicato | rs" as a row, and the banner as its header."""
    start = next((k for k in range(len(bands) - 1)
                  if _lined_up(_crossing(bands[k], vertical), _crossing(bands[k + 1], vertical))), 0)
    grid = _crossing(bands[start], vertical) if start else []
    for band in bands[:start]:
        own = _crossing(band, vertical)
        if _lined_up(own, grid):
            return 0
        if not own:
            idx = [i for i, (cy, _) in enumerate(centres) if band[0] < cy < band[1] and i not in taken]
            rows = [centres[i][0] for i in idx]
            if any(abs(a - b) < 2 for n, a in enumerate(rows) for b in rows[n + 1:]) or any(
                    len(page.lines[i].segments(SEG_GAP_EM * page.lines[i].size)) > 1 for i in idx):
                return 0  # cells side by side: rows of the table whose rules are not drawn, not a title
            if not any(page.lines[i].x0 + 1 < x < page.lines[i].x1 - 1 for i in idx for x in grid):
                return 0  # a line within one column (a unit over the stub) can be the grid's own header
    return start
