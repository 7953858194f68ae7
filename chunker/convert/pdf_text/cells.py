"""Table cells from positioned text fragments: visual rows, rows of a band, and the header.

Split from :mod:`chunker.convert.pdf_text.tables` (which finds the rules, bands and columns): what to do with the
text once the geometry is known. Headers may span several rows and columns (financial statements); currency signs
join their figures; words cut by a hyphen at a cell's line end are joined again.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from chunker.contract import is_figure
from chunker.convert.pdf_text.textlayer import CURRENCY, WORD_BREAK, join_wrapped

DIGITS = re.compile(r"\d")
SEG_GAP_EM = 0.8  # a horizontal gap wider than this many ems separates cells (and the labels set above them)
_SIGN_SPACE = re.compile(r"^([" + CURRENCY + r"])\s+(?=[\d(])")
# A header cell may hold years and dates ("June 30, 2024", "FY2023") but no other figures.
YEAR_OR_DATE = re.compile(
    r"\b(?:19|20)\d{2}\b|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+\d{1,2}\b", re.I)


@dataclass
class Seg:
    text: str
    x0: float
    x1: float
    y: float
    line: int
    bold: bool



def visual_rows(segs: list[Seg]) -> list[list[Seg]]:
    """Segments grouped into visual lines (by y), each sorted left to right."""
    by_y: list[list[Seg]] = []
    for s in sorted(segs, key=lambda s: (s.y, s.x0)):
        if by_y and abs(by_y[-1][0].y - s.y) < 3.0:
            by_y[-1].append(s)
        else:
            by_y.append([s])
    return [sorted(row, key=lambda s: s.x0) for row in by_y]


def column_of(x0: float, x1: float, seps: list[float]) -> int:
    mid = (x0 + x1) / 2
    return sum(1 for s in seps if s < mid)



def band_rows(segs: list[Seg], seps: list[float], ncols: int, merge_all: bool) -> list[list[str]]:
    """Rows of one band: visual lines grouped by y; a line with text in the first column opens a new row."""
    rows: list[list[str]] = []
    for vis in visual_rows(segs):
        cells = [""] * ncols
        for s in vis:
            c = column_of(s.x0, s.x1, seps)
            # Fragments side by side on one line: a soft hyphen means "continued on the next line", not here.
            cells[c] = f"{cells[c]} {s.text}".strip()
        # A line with text in the first column only wraps that column's cell of the row above, unless it is a
        # section label ("Current assets:") or follows one.
        wraps = bool(cells[0]) and not any(cells[1:]) and not cells[0].endswith(":") \
            and not (rows and rows[-1][0].endswith(":") and not any(rows[-1][1:]))
        if rows and (merge_all or not cells[0] or wraps or continues(rows[-1], cells)):
            rows[-1] = [join_wrapped(a, b) for a, b in zip(rows[-1], cells)]
        else:
            rows.append(cells)
    return rows


# A cell whose text so far ends like this is not finished: the next line's text in that column goes on with it.
_OPEN_END = re.compile(r"(?:[,\u00ad/&+]|(?<=[a-z])-|(?:^|\s)(?:and|or|of|for|the|a|an|to|in|on|at|by|with|per|"
                       r"from|than|including|includes|except|between|into|over|under|up)\s*)$")
_LOWER_WORD = re.compile(r"^[a-z]+(?:[\s,;.:)]|$)")
_FIGURE_START = re.compile(r"^[(\-–—$€£¥]?\s*\d")


def continues(row: list[str], line: list[str]) -> bool:
    """Whether a visual line with text in the first column still belongs to the row above, in a table with no rule
    between rows (booktabs): several cells wrapped together ("Compressed / Gases / (incl. LPG)" beside "Includes
    butane, propane, / oxygen cylinders ..."), so "text in the first column" does not open a row there. Read from
    the words only, since such tables space wrapped lines and rows alike: some column's text in the row so far
    ends unfinished (a comma, a soft or word hyphen, a connective, an open parenthesis), or the line's text in a
    column the row already fills goes on in lower case. Figures never count (a negative "(2,980)" starts a row)."""
    pairs = [(a, b) for a, b in zip(row, line) if a and b]
    if any(is_figure(a) or (is_figure(b.split()[0]) and any(is_figure(t) for t in a.split())) for a, b in pairs):
        return False  # a figure cell never wraps, nor does wrapping stack one figure on another
    for above, below in pairs:
        if _FIGURE_START.match(below) or _FIGURE_START.match(above.split()[-1]):
            continue
        if _OPEN_END.search(above) or above.count("(") > above.count(")"):
            return True
        # Lower case goes on a sentence: a plain word ("oxygen cylinders"), not a name ("eVisa", "e-Visa") nor a
        # one-word value in a column of them ("yes" under "no").
        if _LOWER_WORD.match(below) and not above.rstrip().endswith((".", "!", "?", ";", ":")) \
                and len(above.split()) + len(below.split()) >= 3:
            return True
    return False


def headerish(cells: list[str]) -> bool:
    """A row that continues a table's header: no row label, and no figures but years and dates."""
    rest = [c for c in cells[1:] if c]
    return not cells[0] and bool(rest) and not any(DIGITS.search(YEAR_OR_DATE.sub("", c)) for c in rest)


def compose_header(segs: list[Seg], whole: list[Seg], seps: list[float], keep: list[int],
                    body: list[Seg], hrules: list[tuple[float, float, float]]) -> list[str]:
    """Header cells from the header's segments (``whole``: the same before labels crossing a column gap were cut).

    A label above further header rows that spans columns (a "Three Months Ended June 30," over its years) belongs
    to each column it spans, so every column's header reads "Three Months Ended June 30, 2024". Its span is the
    rule drawn right under it when there is one (filings and booktabs underline spanning labels), else the label's
    own width; it spans a column when it covers at least half of that column's text. Other labels go to the column
    they sit in."""
    ext: dict[int, tuple[float, float]] = {}
    for sg in body:
        c = column_of(sg.x0, sg.x1, seps)
        lo, hi = ext.get(c, (sg.x0, sg.x1))
        ext[c] = (min(lo, sg.x0), max(hi, sg.x1))
    out = [""] * len(keep)
    vis = visual_rows(segs)
    unsplit = visual_rows(whole)
    for n, row in enumerate(vis):
        upper = n < len(vis) - 1  # only a label with more header below can span (a lone row's long label spills)
        if upper and len(unsplit) == len(vis):
            row = unsplit[n]  # spanning labels as written, not cut at column gaps
        below = vis[n + 1][0].y if upper else 0.0
        line = [""] * len(keep)  # this visual row's labels; side by side they join with a space
        for sg in row:
            lo, hi = sg.x0, sg.x1
            if upper:
                under = [r for r in hrules if sg.y < r[2] < below and r[0] - 2 <= (sg.x0 + sg.x1) / 2 <= r[1] + 2
                         and r[1] - r[0] >= sg.x1 - sg.x0 - 2]
                if under:
                    lo, hi = min(lo, under[0][0]), max(hi, under[0][1])
            covered = [k for k, c in enumerate(keep) if c in ext and upper
                       and min(hi, ext[c][1]) - max(lo, ext[c][0]) >= 0.5 * max(ext[c][1] - ext[c][0], 1.0)]
            own = column_of(sg.x0, sg.x1, seps)
            targets = covered if len(covered) >= 2 else [keep.index(own)] if own in keep else []
            for k in targets:
                line[k] = f"{line[k]} {sg.text}".strip()
        out = [join_wrapped(a, b) for a, b in zip(out, line)]
    return out


def merge_currency_columns(header: list[str], rows: list[list[str]]) -> tuple[list[str], list[list[str]], list[int]]:
    """A column holding nothing but currency signs ("$" on the first row and totals of a statement) joins the
    figures to its right: "$" + "16,425" -> "$16,425"; values never shift into the sign's column."""
    ncols = len(header)
    signs = [c for c in range(ncols - 1)
             if any(r[c] for r in rows) and all(not r[c] or r[c] in CURRENCY for r in rows)
             and (not header[c] or header[c + 1].startswith(header[c]))]
    if not signs:
        return header, rows, list(range(ncols))
    drop = set()
    for c in signs:
        if c + 1 in signs or c in drop:
            continue
        for r in rows:
            if r[c] and r[c + 1]:
                r[c + 1] = r[c] + r[c + 1]
        if header[c] and not header[c + 1]:
            header[c + 1] = header[c]
        drop.add(c)
    keep = [c for c in range(ncols) if c not in drop]
    return [header[c] for c in keep], [[r[c] for c in keep] for r in rows], keep



def merge_percent_columns(header: list[str], rows: list[list[str]]) -> tuple[list[str], list[list[str]], list[int]]:
    """A column holding nothing but percent signs (filings set "25 | %" in two columns) joins the figures to its
    left: "25" + "%" -> "25%", so the figure reads as the percentage it is and the sign takes no header of its own."""
    ncols = len(header)
    signs = [c for c in range(1, ncols)
             if any(r[c] for r in rows) and all(not r[c] or r[c] in ("%", "%)") for r in rows)
             and any(DIGITS.search(r[c - 1]) for r in rows)]
    signs = [c for c in signs if c - 1 not in signs]
    if not signs:
        return header, rows, list(range(ncols))
    for c in signs:
        for r in rows:
            if r[c] and r[c - 1]:
                r[c - 1] = r[c - 1] + r[c]
        if header[c] and not header[c - 1]:
            header[c - 1] = header[c]
    keep = [c for c in range(ncols) if c not in signs]
    return [header[c] for c in keep], [[r[c] for c in keep] for r in rows], keep


def merge_sign_columns(header: list[str], rows: list[list[str]]) -> tuple[list[str], list[list[str]], list[int]]:
    """:func:`merge_currency_columns` then :func:`merge_percent_columns`; the kept indexes are the input's."""
    header, rows, kept = merge_currency_columns(header, rows)
    header, rows, still = merge_percent_columns(header, rows)
    return header, rows, [kept[k] for k in still]


def clean_cells(rows: list[list[str]]) -> list[list[str]]:
    """Cells without the soft-hyphen marks that only guided the joining of wrapped fragments."""
    return [[_SIGN_SPACE.sub(r"\1", c.replace(WORD_BREAK, "").strip()) for c in r] for r in rows]
