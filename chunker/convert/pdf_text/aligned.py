"""Tables of aligned figures, found from the text layer alone: financial statements, KPI and schedule tables.

Such a table is a run of visual rows, each a row label at the left and figures ("16,388", "$ 3,642", "(2,980)",
"36.8%", "—") that line up at their right edges in columns. Rules are not needed (many filings draw none, others
draw one per cell), so they are not used here. Above the first row sits the header: rows of labels that line up
with the columns. A label over several columns spans them ("Three Months Ended" over two dates), so every column
gets a path, top down. The table's unit ("In millions, except per share data") is written in the header's stub or
on a line just above it. Row labels ending a section ("Operating expenses:") carry over to the rows below them.

Extraction only: :class:`AlignedTable` holds rows, columns and paths; :mod:`chunker.convert.pdf_text.statements`
resolves the header, and :func:`chunker.contract.figure_row_sentence` writes the rows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from chunker.contract import is_figure
from chunker.convert.pdf_text.cells import SEG_GAP_EM
from chunker.convert.pdf_text.textlayer import CURRENCY, Line, PageText

_YEAR = re.compile(r"^(?:fy\s?)?(?:19|20)\d{2}[a-z]?$", re.I)
_SPACED = re.compile(r"(?<=\d)\s+(?=[.,]\d)|(?<=\d\.)\s+(?=\d)|(?<=\d,)\s+(?=\d{3}\b)")  # not "31, 2023"
COLUMN_NO = re.compile(r"^\(\d{1,2}\)$")


def is_year(text: str) -> bool:
    return bool(_YEAR.match(text.strip()))


@dataclass
class Seg:
    text: str
    x0: float
    x1: float
    line: int  # index of the page line it came from
    src: Line | None = None  # that line, for the positions of the segment's characters

    def split_at(self, x: float, slack: float) -> tuple["Seg", "Seg"] | None:
        """Two segments cut at the character boundary nearest to ``x`` (within ``slack`` points) where a word
        ends: labels of neighbouring columns that the text layer ran together ("April 1, 2023March 30, 2024")."""
        if self.src is None:
            return None
        ln = self.src
        idx = [k for k, (a, b) in enumerate(zip(ln.xs0, ln.xs1)) if self.x0 - 0.5 <= (a + b) / 2 <= self.x1 + 0.5]
        best: tuple[float, int] | None = None
        for k, nxt in zip(idx, idx[1:]):
            a, b = ln.chars[k], ln.chars[nxt]
            cut = (ln.xs1[k] + ln.xs0[nxt]) / 2
            boundary = a.isspace() or b.isspace() or (a.isdigit() and b.isalpha()) or ln.xs0[nxt] - ln.xs1[k] > 1.0
            if boundary and abs(cut - x) <= slack and (best is None or abs(cut - x) < best[0]):
                best = (abs(cut - x), nxt)
        if best is None:
            return None
        k = best[1]
        left = "".join(ln.chars[i] for i in idx if i < k).strip()
        right = "".join(ln.chars[i] for i in idx if i >= k).strip()
        if not left or not right:
            return None
        return (Seg(left, self.x0, ln.xs1[max(i for i in idx if i < k)], self.line, ln),
                Seg(right, ln.xs0[k], self.x1, self.line, ln))


@dataclass
class Row:
    """One visual row of the page: segments of every text line at that height, left to right."""

    segs: list[Seg]
    y0: float
    y1: float
    size: float
    bold: bool
    lines: set[int] = field(default_factory=set)

    @property
    def x0(self) -> float:
        return self.segs[0].x0

    @property
    def x1(self) -> float:
        return max(s.x1 for s in self.segs)

    @property
    def text(self) -> str:
        return " ".join(s.text for s in self.segs)


@dataclass
class Cells:
    """A row read as a table row: its label (leading text) and its figures (currency signs joined)."""

    label: str = ""
    label_x0: float = 0.0
    label_x1: float = 0.0
    label_segs: list[Seg] = field(default_factory=list)
    figures: list[Seg] = field(default_factory=list)
    mixed: bool = False  # text after a figure: prose or a text column, not a figure row

    @property
    def numeric(self) -> bool:
        """Has figures that are not all years or column numbers (a row of "2024 2023" or of "(1) (2) (3)" is part
        of the header; beside a row label, "(2)  (21)" are negative figures)."""
        return bool(self.figures) and not all(is_year(f.text) or (COLUMN_NO.match(f.text) and not self.label)
                                              for f in self.figures)


def visual_rows(page: PageText, skip: set[int]) -> list[Row]:
    """The page's lines outside ``skip`` grouped into visual rows (one text line per row is not guaranteed: many
    PDFs write each cell as a text object of its own), top to bottom."""
    items = []
    for i, ln in enumerate(page.lines):
        if i in skip or not ln.text or ln.y1 <= ln.y0:
            continue
        items.append((ln.y0, ln.y1, i, ln))
    items.sort(key=lambda t: ((t[0] + t[1]) / 2, t[3].x0))
    rows: list[Row] = []
    for y0, y1, i, ln in items:
        mid = (y0 + y1) / 2
        segs = [Seg(t, a, b, i, ln) for t, a, b in ln.segments(SEG_GAP_EM * max(ln.size, 4), split_currency=True)
                if t]
        if not segs:
            continue
        last = rows[-1] if rows else None
        if last is not None and abs(mid - (last.y0 + last.y1) / 2) < 0.35 * max(ln.size, last.size, 4) \
                and not any(s.x0 < o.x1 and o.x0 < s.x1 for s in segs for o in last.segs):
            last.segs = sorted(last.segs + segs, key=lambda s: s.x0)
            last.y0, last.y1 = min(last.y0, y0), max(last.y1, y1)
            last.lines.add(i)
            last.bold = last.bold and ln.bold
            continue
        rows.append(Row(segs, y0, y1, ln.size, ln.bold, {i}))
    return rows


def read_cells(row: Row) -> Cells:
    """Label and figures of a row. A year at the left margin followed by figures is a label ("2024  1,250"), and
    so is a year alone in bold on its row: the group label over a year's rows of a schedule ("2022")."""
    out = Cells()
    sign: Seg | None = None
    label: list[Seg] = []
    for k, s in enumerate(row.segs):
        t = _SPACED.sub("", s.text.strip())  # "21 .1", "1 ,405": a figure the text layer spaced out
        if t in CURRENCY:
            sign = s
            continue
        if label and not out.figures and COLUMN_NO.match(t) and s.src is not None and label[-1].src is not None \
                and s.src.size < 0.85 * label[-1].src.size:
            label.append(s)  # a note mark set small after the label ("Accrued rebates (1)"), no figure
            continue
        if is_figure(t) and not (k == 0 and is_year(t) and len(row.segs) > 1 and not out.figures
                                 and row.segs[1].x0 - s.x1 > 2 * row.size) \
                and not (len(row.segs) == 1 and row.bold and is_year(t)):
            if sign is not None:
                out.figures.append(Seg(f"{sign.text}{t}", sign.x0, s.x1, s.line, s.src))
                sign = None
            else:
                out.figures.append(Seg(t, s.x0, s.x1, s.line, s.src) if t != s.text else s)
            continue
        if out.figures or sign is not None:
            out.mixed = True
            continue
        label.append(s)
    if label:
        out.label_segs = label
        out.label = " ".join(s.text.strip() for s in label)
        out.label_x0, out.label_x1 = label[0].x0, label[-1].x1
    return out


@dataclass
class Column:
    right: float  # where its figures end (they are right-aligned)
    left: float  # where its widest figure (with its currency sign) starts
    path: list[str] = field(default_factory=list)  # header labels, top down

    def overlap(self, x0: float, x1: float) -> float:
        return max(0.0, min(x1, self.right) - max(x0, self.left))


@dataclass
class BodyRow:
    label: str
    values: list[str]  # one per column, "" where the row has none
    indent: float
    row: Row
    texts: list[str] = field(default_factory=list)  # the row's text columns after the label (see AlignedTable.stub)
    segs: list[Seg] = field(default_factory=list)  # the label's pieces, wrapped lines included, in reading order


@dataclass
class AlignedTable:
    bbox: tuple[float, float, float, float]
    columns: list[Column]
    rows: list[BodyRow]  # label-only rows (section labels, wrapped labels) included, in order
    lines: set[int]  # page lines the table consumed (its header included)
    unit: str = ""
    # Headers of the text columns left of the figures, the row label's first ("Fastener", "Thread"); empty when
    # the label column has no header of its own (a statement's stub holds its unit, or nothing).
    stub: list[str] = field(default_factory=list)
    text_cuts: list[float] = field(default_factory=list)  # where the text columns after the first start
    header_found: bool = False
    at_top: bool = False
    at_bottom: bool = False


def columns_of(cells: list[Cells], tol: float) -> list[Column]:
    """Columns from the figures' right edges: sorted edges closer than ``tol`` are one column."""
    edges = sorted((f.x1, f.x0) for c in cells for f in c.figures)
    cols: list[list[tuple[float, float]]] = []
    for e in edges:
        if cols and e[0] - cols[-1][-1][0] <= tol:
            cols[-1].append(e)
        else:
            cols.append([e])
    return [Column(right=max(x1 for x1, _ in c), left=min(x0 for _, x0 in c)) for c in cols]


def split_label(segs: list[Seg], cuts: list[float], size: float) -> list[str]:
    """A row label's pieces by text column: one text per column, the first being the row label itself."""
    parts = [""] * (len(cuts) + 1)
    for s in segs:
        k = sum(1 for x in cuts if s.x0 >= x - size)
        parts[k] = f"{parts[k]} {s.text.strip()}".strip()
    return parts


def column_index(columns: list[Column], seg: Seg) -> int:
    """The column a figure belongs to: the one whose right edge is nearest to the figure's."""
    return min(range(len(columns)), key=lambda k: abs(columns[k].right - seg.x1))


def find_regions(rows: list[Row]) -> list[tuple[int, int]]:
    """(first, last) row indexes of runs that read as figure tables: at least two figure rows whose figures start
    right of their labels, joined by at most three label-only rows, no wide vertical gaps."""
    regions = []
    cells = [read_cells(r) for r in rows]
    i, n = 0, len(rows)
    while i < n:
        if not _figure_row(cells[i], rows[i]):
            i += 1
            continue
        first = last = i
        count, pending = 1, 0
        j = i + 1
        while j < n:
            gap = rows[j].y0 - rows[j - 1].y1
            size = max(rows[j].size, 4)
            if gap > 2.6 * size:
                break
            if _figure_row(cells[j], rows[j]):
                last, count, pending = j, count + 1, 0
            elif cells[j].label and not cells[j].figures and not cells[j].mixed and pending < 3 \
                    and _short_label(rows[j], rows[first:last + 1], cells[first:last + 1]):
                pending += 1
            else:
                break
            j += 1
        if count >= 2:
            regions.append((first, last))
        i = last + 1
    return regions


def _figure_row(c: Cells, row: Row) -> bool:
    if c.mixed or not c.numeric:
        return False
    if not c.label:
        return True
    return c.figures[0].x0 - c.label_x1 >= 1.0 * max(row.size, 4)


def _short_label(row: Row, table: list[Row], cells: list[Cells]) -> bool:
    """A label-only row inside a table (a section label or a wrapped label) ends before the figures start."""
    first_fig = min((f.x0 for c in cells for f in c.figures), default=row.x1 + 1)
    return row.x1 < first_fig - 0.5 * max(row.size, 4)
