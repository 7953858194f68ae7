"""What one table hands on to the next (split from :mod:`chunker.convert.pdf_text.blocks`): the columns, unit and
open section labels an aligned-figure table leaves to its continuation on the next page, and the column labels and
group label a ruled table lends to the rows just below its rules that the aligned-figure reader took up."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from chunker.contract import UNIT
from chunker.convert.pdf_text.aligned import BodyRow, Column, split_label
from chunker.convert.pdf_text.cells import DIGITS, YEAR_OR_DATE
from chunker.convert.pdf_text.colheads import Section

_FIRST_WORD = re.compile(r"[^\W\d_]+")


@dataclass
class OpenAligned:
    """An aligned-figure table open at a page end: what its continuation on the next page inherits."""

    columns: list[Column]
    unit: str
    sections: list[Section]
    stub: list[str] = field(default_factory=list)  # its text columns' headers (see AlignedTable.stub)
    text_cuts: list[float] = field(default_factory=list)


def same_columns(a: list[Column], b: list[Column], tol: float = 12.0) -> bool:
    return len(a) == len(b) and all(abs(x.right - y.right) <= tol for x, y in zip(a, b))


def relabel(row: BodyRow, cuts: list[float], size: float) -> BodyRow:
    parts = split_label(row.segs, cuts, size)
    return BodyRow(parts[0], row.values, row.indent, row.row, parts[1:], row.segs)


def inherit(columns: list[Column], before: list[Column], tol: float = 12.0) -> list[Column] | None:
    """``columns`` with the paths of the columns of ``before`` they line up with, or None unless every one does."""
    out = []
    for c in columns:
        match = [b for b in before if abs(b.right - c.right) <= tol and b.path]
        if not match:
            return None
        out.append(Column(c.right, c.left, list(min(match, key=lambda b: abs(b.right - c.right)).path)))
    return out


def is_data_row(cells: list[str]) -> bool:
    """Half or more of the cells after the first hold figures other than years and dates."""
    rest = [c for c in cells[1:] if c.strip()]
    return bool(rest) and 2 * sum(bool(DIGITS.search(YEAR_OR_DATE.sub("", c))) for c in rest) >= len(rest)


def broken_label(label: str) -> bool:
    """A column label cut where a spanning label crossed a column rule ("ths Ended June 30", "(In th"): it starts
    inside a word or leaves a parenthesis open. Such labels stay on their own table and are lent to no other."""
    word = _FIRST_WORD.search(label)
    return bool(word and word.group()[0].islower()) or label.count("(") != label.count(")")


def open_group(rows: list[list[str]]) -> list[Section]:
    """The group label a ruled table's last rows sit under: its last row with a label and no values ("2022"),
    unless a total closed it since."""
    for r in reversed(rows):
        if r and r[0].lower().startswith("total"):
            return []
        if r and r[0] and not any(r[1:]):
            return [Section(-1e9, r[0])]
    return []


def lend_to_aligned(header: list[str], lefts: list[float], rights: list[float],
                    rows: list[list[str]]) -> OpenAligned | None:
    """A ruled table's labels as an aligned table's columns, for the rows below it: each labelled value column
    (left and right x as found), the stub's unit, its open group label. None when the columns are not known or a
    label is broken."""
    if len(rights) != len(header) or len(lefts) != len(header) or any(broken_label(h) for h in header[1:]):
        return None
    # The stub's unit without a group label set beside it ("In millions December 31, 2022"): the rows lent to may
    # sit under another date.
    date = YEAR_OR_DATE.search(header[0])
    unit = header[0][:date.start()].strip() if date else header[0]
    columns = [Column(r, lf, [h]) for lf, r, h in zip(lefts[1:], rights[1:], header[1:]) if h]
    return OpenAligned(columns, unit if UNIT.search(unit) else "", open_group(rows))


@dataclass
class FlowState:
    """What one page hands the next within a segment: the open heading path and a table still open at the page
    end (written by :mod:`~chunker.convert.pdf_text.blocks` and :mod:`~chunker.convert.pdf_text.tablewrite`)."""

    heading_path: list[tuple[int, str]] = field(default_factory=list)
    table_header: list[str] = field(default_factory=list)  # header of a table still open at the last page end
    table_columns: list[float] = field(default_factory=list)  # that table's column lefts (its layout)
    aligned: OpenAligned | None = None  # an aligned-figure table open at the last page end
    keep_hard_hyphens: bool = False  # the document marks hyphenation with soft hyphens: a '-' at line end is real

    def push_heading(self, level: int, text: str) -> None:
        self.heading_path = [(lv, t) for lv, t in self.heading_path if lv < level] + [(level, text)]
