"""An aligned-figure table's header, columns and rows (see :mod:`chunker.convert.pdf_text.aligned`).

The header is read upwards from the first figure row: label-only rows in the label column first (section labels
of the body), then header rows, whose every label lines up with the columns (a label spilling into the row-label
column, or a single line centred on the page over one column of several, is a title, and ends the header). A
header label belongs to every column whose figures it covers; labels stacked over the same columns are one
label ("December 2," over "2022"); labels over different column sets are levels of the columns' paths, the wider
first ("Years Ended" > "December 2, 2022").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from chunker.tabletext import is_sentence_piece, is_unit_line, split_unit, unit_text
from chunker.convert.pdf_text.aligned import (COLUMN_NO, AlignedTable, BodyRow, Cells, Column, Row, Seg, column_index,
                                              columns_of, find_regions, is_year, read_cells, split_label,
                                              visual_rows)
from chunker.convert.pdf_text.spans import Label, group_columns
from chunker.convert.pdf_text.textlayer import PageText

_DATEISH = re.compile(r"^(?:fy\s?)?(?:19|20)\d{2}\b|^(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+\d"
                      r"|^\d{1,2}[/.]\d{1,2}[/.]\d{2,4}$|^\d{1,2},?\s+(?:19|20)\d{2}\b|^q[1-4]\b", re.I)
_OPEN_END = re.compile(r"(?:,|\bended|\bending|\bof|\bat|\bas of|\bfor|\bthe|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|"
                       r"sept|oct|nov|dec)[a-z]*\.?)$", re.I)
_CONNECTIVE_END = re.compile(r"(?:,|-|\band|\bor|\bof|\bto|\bfor|\bthe|\bin|\bfrom|\bon|\bwith|\bby|\bat|\bnet of)$",
                             re.I)
# Words of a period header, the kind set narrow and centred over all the columns of its period.
_PERIOD = re.compile(r"\b(?:months?|weeks?|years?|quarters?|ended|ending|as\s+of|fiscal|period|at)\b", re.I)
_MAX_HEADER_ROWS = 6
_MAX_WRAP_LINES = 4  # lines of one wrapped row label, the figure row included


def is_unit(text: str) -> bool:
    """A unit line, not a sentence that names a unit (chunker.tabletext)."""
    return is_unit_line(text)


def find_aligned_tables(page: PageText, skip: set[int]) -> list[AlignedTable]:
    """Aligned-figure tables of one page, top to bottom (``skip``: furniture and TOC lines, never table text). A
    single column of figures without a header is left to the prose (a list of page references, a footnote run)
    unless it opens the page, where it may go on from a table on the page before."""
    rows = visual_rows(page, skip)
    tables = [build_table(rows, a, b, page.width) for a, b in find_regions(rows)]
    content = [i for i in range(len(page.lines)) if i not in skip]
    for t in tables:
        mids = [(page.lines[i].y0 + page.lines[i].y1) / 2 for i in content if i not in t.lines]
        t.at_top = all(m >= t.bbox[1] for m in mids)
        t.at_bottom = all(m <= t.bbox[3] for m in mids)
    # One column of figures without a header is a table only where it may go on from the page before.
    return [t for t in tables if len(t.columns) >= 2 or t.header_found or t.at_top]


def build_table(rows: list[Row], first: int, last: int, page_width: float) -> AlignedTable:
    """The table whose figure rows run from ``rows[first]`` to ``rows[last]``, its header read from above."""
    body = rows[first:last + 1]
    cells = [read_cells(r) for r in body]
    size = sorted(r.size for r in body)[len(body) // 2] or 8.0
    columns = columns_of(cells, tol=max(4.0, 0.9 * size))
    label_x0 = min((c.label_x0 for c in cells if c.label), default=min(col.left for col in columns))
    fig_left = min(col.left for col in columns)
    label_right = max((c.label_x1 for c in cells if c.label), default=fig_left - 1.5 * size)
    # Label-only rows just above the first figure row are the body's own section labels ("Revenue:").
    top = first
    while top > 0 and first - top < 2:
        r = rows[top - 1]
        c = read_cells(r)
        if c.figures or c.mixed or r.x1 > fig_left - 0.5 * size or r.x0 < label_x0 - 2 * size \
                or is_unit(r.text) or body[0].y0 - r.y1 > 2.6 * size:
            break
        top -= 1
    head, unit, head_top, unit_row = _header(rows, top, columns, label_right, fig_left, size, page_width)
    if not unit:
        unit, unit_row = _unit_above(rows, head_top, size)
    stub = _stub_columns(head, fig_left, size)
    if stub and _OPEN_END.search(stub[0][1]) and any(c.path and _DATEISH.match(c.path[0]) for c in columns):
        # "At December 31," in the stub over columns of years: the lead-in of those columns (not of a "% Change"
        # beside them), never a header of the row labels.
        for c in columns:
            if c.path and _DATEISH.match(c.path[0]):
                c.path = [f"{stub[0][1]} {c.path[0]}", *c.path[1:]]
        stub = [(stub[0][0], ""), *stub[1:]]
    table_rows = rows[top:last + 1]
    out_rows = _body_rows(table_rows, columns, [x for x, _ in stub[1:]], size)
    # The unit line read from above belongs to the table: every figure carries it, and left to the prose it
    # would run on from the title over it (a statement's title read as a paragraph, not a heading).
    lines = set().union(*(r.lines for r in table_rows), *(r.lines for r in head), *(r.lines for r in unit_row))
    every = table_rows + head
    bbox = (min(r.x0 for r in every), min(r.y0 for r in every), max(r.x1 for r in every),
            max(r.y1 for r in every))
    return AlignedTable(bbox, columns, out_rows, lines, unit, [t for _, t in stub], [x for x, _ in stub[1:]],
                        bool(head))


def _header(rows: list[Row], top: int, columns: list[Column], label_right: float, fig_left: float, size: float,
            page_width: float) -> tuple[list[Row], str, int, list[Row]]:
    """(header rows, unit written in the header's stub, index of the topmost header row, a row that held only the
    unit). ``label_right``: where the body's row labels end; a header label reaching left of it is a title or a
    sentence, not a header."""
    head: list[Row] = []
    moved: list[Row] = []  # header rows that turned out to be the unit's last line
    unit = ""
    k = top - 1
    below = rows[top].y0 if top < len(rows) else 0.0
    while k >= 0 and len(head) < _MAX_HEADER_ROWS:
        r = rows[k]
        if below - r.y1 > 2.2 * max(r.size, size, 4):  # header type is often smaller than the body's
            break
        c = read_cells(r)
        if c.numeric:
            break  # figures: another table's row
        stub = [s for s in r.segs if s.x1 < fig_left - 0.5 * size]
        over = [s for s in r.segs if s not in stub]
        units = [s for s in over if is_unit(s.text) and not _DATEISH.match(s.text.strip())
                 and s.x0 >= label_right + 0.5 * size and len(s.text) <= 60 and not s.text.strip().endswith(".")]
        if units and len(units) < len(over) or units and head:
            # The unit set over the columns ("(dollars in millions)" above the last one) is no column's label.
            text = " ".join(s.text for s in units)
            if head and text.count("(") > text.count(")") and _closes(head[-1].text):
                # "(dollars in millions," over "except ARPA)": the unit wrapped, its last line no column's label.
                moved.append(head.pop())
                text = f"{text} {moved[-1].text.strip()}"
            unit = unit or unit_text(text)
            over = [s for s in over if s not in units]
            r.segs = [s for s in r.segs if s not in units]
            if not over and not stub:
                return _done(head, columns, fig_left, size), unit, k + 1, [r, *moved]  # a line that is only the unit
        if any(s.x0 < label_right + 0.5 * size for s in over):
            break  # a title or a sentence running from the label column into the columns
        if any(is_sentence_piece(s.text) for s in r.segs):
            break  # the lead-in's last line set over the columns: prose, never a column's path
        if stub and not over:
            if is_unit(r.text) and head:
                unit = unit or unit_text(r.text)
                head.append(r)
                below, k = r.y0, k - 1
                continue
            break
        if not over or not all(_covered(columns, s) for s in over):
            break
        if len(over) == 1 and len(_covered(columns, over[0])) < len(columns) \
                and abs((over[0].x0 + over[0].x1) / 2 - page_width / 2) < 0.02 * page_width \
                and len(columns) > 1:
            break  # one label centred on the page over some of the columns: a title such as "(Unaudited)"
        if stub and is_unit(" ".join(s.text for s in stub)):
            unit = unit or unit_text(" ".join(s.text for s in stub))
        if not head:
            r.segs = stub + [p for s in over for p in _per_column(columns, s)]
        head.append(r)
        below, k = r.y0, k - 1
    return _done(head, columns, fig_left, size), unit, k + 1, moved


def _closes(text: str) -> bool:
    """A short line that closes a parenthesis it did not open: the end of a unit wrapped over two lines."""
    text = text.strip()
    return len(text) <= 40 and text.count(")") > text.count("(")


def _done(head: list[Row], columns: list[Column], fig_left: float, size: float) -> list[Row]:
    if head:
        _paths(head, columns, fig_left, size)
    return head


def _covered(columns: list[Column], s: Seg) -> list[int]:
    """Columns a header label sits over: those it overlaps by half of its own or of the column's width, or the
    nearest one when it sits between columns."""
    width = s.x1 - s.x0
    got = [k for k, c in enumerate(columns) if c.overlap(s.x0, s.x1) >= 0.5 * min(width, c.right - c.left)]
    if not got:
        mid = (s.x0 + s.x1) / 2
        k = min(range(len(columns)), key=lambda j: abs((columns[j].left + columns[j].right) / 2 - mid))
        spacing = _spacing(columns)
        return [k] if abs((columns[k].left + columns[k].right) / 2 - mid) < 0.6 * spacing else []
    return got


def _per_column(columns: list[Column], s: Seg) -> list[Seg]:
    """A label of the header row just above the figures that covers several columns, cut into one label per
    column where words end in the gutters between them (that row labels single columns: dates, years)."""
    cov = _covered(columns, s)
    out = [s]
    for k in cov[:-1]:
        gutter = (columns[k].right + columns[k + 1].left) / 2
        last = out[-1]
        cut = last.split_at(gutter, slack=max(3.0, (columns[k + 1].left - columns[k].right) / 2 + 4.0))
        if cut is not None:
            out[-1:] = list(cut)
    return out


def _stub_columns(head: list[Row], fig_left: float, size: float) -> list[tuple[float, str]]:
    """(left x, header) of the text columns left of the figures, from the header's labels there that are not the
    unit or a column number; labels starting within two ems of each other are one column's header over several
    lines, read top down."""
    segs = sorted(((r.y0, s) for r in head for s in r.segs if s.x1 < fig_left - 0.5 * size
                   and not is_unit(s.text) and not COLUMN_NO.match(s.text.strip())), key=lambda ys: ys[1].x0)
    cols: list[tuple[float, list[tuple[float, str]]]] = []
    for y, s in segs:
        if cols and s.x0 - cols[-1][0] < 2 * size:
            cols[-1][1].append((y, s.text.strip()))
        else:
            cols.append((s.x0, [(y, s.text.strip())]))
    return [(x, " ".join(t for _, t in sorted(parts))) for x, parts in cols]


def _spacing(columns: list[Column]) -> float:
    if len(columns) < 2:
        return 80.0
    return (columns[-1].right - columns[0].right) / (len(columns) - 1)


def _stacked_labels(head: list[Row], columns: list[Column], fig_left: float, size: float) -> list[Label]:
    """Header labels over the columns, a label wrapped over lines joined: the line below one label, close under it
    (less than half a line apart), over the same columns, with no sibling beside it under the same label ("EPS" /
    "(Diluted" / "US cents)"); a label over more columns, or with two or more under it, spans them instead ("Three
    Months Ended" over "July 2, 2023" and "July 3, 2022")."""
    pieces = sorted((Label(s.text.strip(), s.x0, s.x1, r.y0, r.y1, max(r.size, 4)) for r in head for s in r.segs
                     if s.x1 >= fig_left - 0.5 * size and s.text.strip() and not COLUMN_NO.match(s.text.strip())),
                    key=lambda p: (p.top, p.x0))

    spacing = _spacing(columns)

    def cover(lab: Label) -> list[int]:
        return _covered(columns, Seg(lab.text, lab.x0, lab.x1, -1))

    merged: list[Label] = []
    for p in pieces:
        above = [m for m in merged if m.overlap(p) >= 0.5 * min(m.x1 - m.x0, p.x1 - p.x0)
                 and -0.3 * p.size <= p.top - m.bottom <= 0.5 * p.size and cover(m) == cover(p)]
        if len(above) == 1:
            m = above[0]
            line = [q for q in pieces if abs(q.top - p.top) < 0.5 * p.size]
            beside = [q for q in line if q is not p
                      and (m.overlap(q) > 0.3 * (q.x1 - q.x0) or _sibling_date(m, p, q, spacing, pieces))]
            if not beside and not _centred_inside(m, p, line):
                m.text, m.x0, m.x1, m.bottom = f"{m.text} {p.text}", min(m.x0, p.x0), max(m.x1, p.x1), p.bottom
                continue
        merged.append(p)
    return merged


def _centred_inside(m: Label, p: Label, line: list[Label]) -> bool:
    """Whether ``m`` is centred over a run of three or more years or dates on ``p``'s line with ``p`` inside it: a
    group header narrower than its group ("Sales to Customers" over "2022  2021  2020"), not ``p``'s first line."""
    if _DATEISH.match(m.text):
        return False
    line = sorted(line, key=lambda q: q.x0)
    k = line.index(p)
    mid = (m.x0 + m.x1) / 2
    # Only over a row of years or dates: a label wrapped over lines is centred over its neighbours' run too.
    return any(abs((line[a].x0 + line[b].x1) / 2 - mid) <= 0.05 * (line[b].x1 - line[a].x0) + 0.5 * m.size
               and all(_DATEISH.match(q.text) for q in line[a:b + 1])
               for a in range(k) for b in range(k + 1, len(line)))


def _sibling_date(m: Label, p: Label, q: Label, spacing: float, pieces: list[Label]) -> bool:
    """``q``, a year or date beside ``p`` on its line, sits within a column's spacing of the label ``m`` above
    ``p``, and ``m`` stands alone on its line as an open lead-in: ``m`` is set narrower than the columns it spans
    ("Years ended June 30," centred over "2023  2022  2021"), not a date wrapped onto ``p`` ("July 2," over "2023")
    nor a label of ``p``'s column alone ("% Change" over "2022-2021")."""
    return bool(_DATEISH.match(p.text) and _DATEISH.match(q.text)) \
        and bool(_OPEN_END.search(m.text)) and not _DATEISH.match(m.text) \
        and max(0.0, m.x0 - q.x1, q.x0 - m.x1) < spacing \
        and not any(r is not m and abs(r.top - m.top) < 0.5 * m.size for r in pieces)


def _paths(head: list[Row], columns: list[Column], fig_left: float, size: float) -> None:
    """Each column's path, top down. Labels ending on one line form a level (column labels are set on the line
    above the figures, spanning labels above them). A level with a label for every column gives each its own
    column; a level with fewer labels than columns is one of group headers, split over the columns by
    ``spans.group_columns``."""
    labels = _stacked_labels(head, columns, fig_left, size)
    levels: list[list[Label]] = []
    for lab in sorted(labels, key=lambda lab: -lab.bottom):
        # Stacked labels end a little off the line the single-line ones sit on: within three quarters of a line.
        if levels and abs(levels[-1][0].bottom - lab.bottom) < 0.75 * lab.size:
            levels[-1].append(lab)
        else:
            levels.append([lab])
    spacing = _spacing(columns)
    paths: list[list[str]] = [[] for _ in columns]
    under: list[Label | None] = [None] * len(columns)  # the label each column took at the levels below
    for n, level in enumerate(levels):
        spans = n > 0 and len(level) < len(columns)
        took: list[Label | None] = [None] * len(columns)
        if spans:
            took = group_columns(level, under, [(c.left, c.right) for c in columns], spacing,
                                 [_is_period(lab.text) for lab in level])
            for k, lab in enumerate(took):
                if lab is not None:
                    paths[k].insert(0, lab.text)
            under = [t or u for t, u in zip(took, under)]
            continue
        for k, col in enumerate(columns):
            best = None
            for lab in level:
                seg = Seg(lab.text, lab.x0, lab.x1, -1)
                if k in _covered(columns, seg) and (best is None or col.overlap(lab.x0, lab.x1) > best[0]):
                    best = (col.overlap(lab.x0, lab.x1), lab)
            if best is not None:
                paths[k].insert(0, best[1].text)
                took[k] = best[1]
        under = [t or u for t, u in zip(took, under)]
    for col, path in zip(columns, paths):
        out: list[str] = []
        for label in path:
            if out and (_DATEISH.match(label) or _OPEN_END.search(out[-1])):
                out[-1] = f"{out[-1]} {label}"
            else:
                out.append(label)
        col.path = out


def _is_period(text: str) -> bool:
    """A date or period header ("2022", "Years ended June 30,"): the only kind that spans by being centred."""
    return bool(_DATEISH.match(text) or _OPEN_END.search(text) or _PERIOD.search(text))


def _unit_above(rows: list[Row], head_top: int, size: float) -> tuple[str, list[Row]]:
    """A unit written on its own line just above the header ("(In millions, except per share data)"), and that
    line's row; or the unit a lead-in names in its closing parenthetical, with no row (the lead-in stays prose);
    ("", []) when there is none."""
    k = head_top - 1
    below = rows[head_top].y0 if head_top < len(rows) else 0.0
    for _ in range(3):
        if k < 0 or below - rows[k].y1 > 3.0 * max(rows[k].size, 4):
            return "", []
        # A unit line stands alone and short ("(In millions, except per share data)"); a sentence of the prose
        # above that names the unit is not one.
        text = rows[k].text.strip()
        sentence, unit = split_unit(text) if not read_cells(rows[k]).numeric else ("", "")
        if unit and not sentence:
            return unit, [rows[k]]
        if unit:
            # "Cash flows were as follows ($ in millions):": the table's unit, and the table's lead-in, which stays
            # prose (the planner opens the table's chunk with it); never the unit of every row.
            return unit, []
        below, k = rows[k].y0, k - 1
    return "", []


def _wraps(line: Cells, nxt: Cells) -> bool:
    """The label of ``line`` goes on in the row below: it ends on a connective, or the next label starts lower case
    or is missing."""
    return bool(_CONNECTIVE_END.search(line.label)) or nxt.label[:1].islower() or not nxt.label


def _runs_on(cells: list[Cells], k: int, lines: int = _MAX_WRAP_LINES) -> bool:
    """Label-only row ``k`` is the start of a label wrapped over label-only rows onto a figure row below (a
    statement's "Common stock, $0.001 par value; ... authorized at December 31," over three lines), each line
    wrapping onto the next; not a section label."""
    for j in range(k + 1, min(len(cells), k + 1 + lines)):
        if not _wraps(cells[j - 1], cells[j]):
            return False
        if cells[j].figures:
            return True
    return False


def _body_rows(rows: list[Row], columns: list[Column], text_cuts: list[float], size: float) -> list[BodyRow]:
    """Rows with their values by column, and their label split into the text columns starting at ``text_cuts``.
    A label-only row that wraps onto the next row's label (the next label starts lower case, or this one ends on
    a connective), over label-only lines too, is joined to it, column by column."""
    cells = [read_cells(r) for r in rows]
    out: list[BodyRow] = []
    carry: list[Seg] = []  # a wrapped label's first lines
    indent = 0.0
    for k, (r, c) in enumerate(zip(rows, cells)):
        if not carry:
            indent = c.label_x0
        segs = carry + c.label_segs
        if not c.figures:
            if _runs_on(cells, k):
                carry = segs
                continue
            parts = split_label(segs, text_cuts, size)
            out.append(BodyRow(parts[0], [], indent, r, parts[1:], segs))
            carry = []
            continue
        values = [""] * len(columns)
        for f in c.figures:
            j = column_index(columns, f)
            values[j] = f"{values[j]} {f.text}".strip()
        parts = split_label(segs, text_cuts, size)
        carry = []
        out.append(BodyRow(parts[0], values, indent if segs else columns[0].left, r, parts[1:], segs))
    return out


@dataclass
class Section:
    """A section label open over the rows below it."""

    indent: float
    label: str
    indented: bool = False  # its rows sit deeper than it (the table shows sections by indentation)
    bold: bool | None = None  # its first row's weight (a flat table's next row of another weight leaves it)


def label_paths(rows: list[BodyRow], sections: list[Section] | None = None
                ) -> tuple[list[tuple[list[str], BodyRow]], list[Section]]:
    """Each figure row with the section labels above it, outermost first, and the sections still open at the end.

    A label-only row opens a section; it closes at a sibling label (same indent; an ALL-CAPS label, and a year
    alone, stay over a regular one: "2022" over "Major goods/services lines:" over its rows, then "2021"), at a
    row set left of it, at a row at its own indent once its rows were indented deeper (a table that indents its
    sections' rows), at a row of another weight than its first row in a table that does not indent (a bold grand
    total after regular rows), and right after a row whose label starts "Total" (a total is a row of its section,
    never a heading). ``sections``: those open where the table continues from the page
    before.
    """
    stack = [Section(s.indent, s.label, s.indented, s.bold) for s in (sections or [])]
    out: list[tuple[list[str], BodyRow]] = []
    tol = 2.0
    for r in rows:
        if not any(r.values):
            while stack and stack[-1].indent >= r.indent - tol \
                    and not (stack[-1].label.isupper() and not r.label.isupper()) \
                    and not (is_year(stack[-1].label) and not is_year(r.label)):
                stack.pop()
            stack.append(Section(r.indent, r.label))
            continue
        while stack:
            top = stack[-1]
            level = abs(r.indent - top.indent) <= tol
            if r.indent < top.indent - tol or (level and top.indented) \
                    or (level and top.bold is not None and top.bold != r.row.bold):
                stack.pop()
            else:
                break
        if stack:
            stack[-1].indented = stack[-1].indented or r.indent > stack[-1].indent + tol
            if stack[-1].bold is None:
                stack[-1].bold = r.row.bold
        out.append(([s.label for s in stack], r))
        if stack and r.label.lower().startswith("total"):
            stack.pop()
    return out, stack
