"""Column labels set above a ruled table's body, outside its rules (split from
:mod:`chunker.convert.pdf_text.tables`, which asks for them when a table has no header of its own)."""

from __future__ import annotations

import re

from chunker.contract import UNIT
from chunker.convert.pdf_text.cells import DIGITS, SEG_GAP_EM, YEAR_OR_DATE, Seg, column_of
from chunker.convert.pdf_text.textlayer import PageText

_ENDED = re.compile(r"[.:;!?)]\s*$")
_NOTE_MARKS = re.compile(r"(?:\s*(?:\(\d{1,2}\)|\([a-z]\)|\*+|†))+\s*")


def header_above(page: PageText, idx: list[int], segs: list[Seg], seps: list[float],
                  x0: float, x1: float, taken: set[int]) -> list[int]:
    """Lines just above a table found without a header that are its header: filings often rule only the body,
    and set the column labels ("In millions  2022  2021  2020", "Balance at / Beginning of Period  Accruals")
    above the first rule, where the page's text flow would read them as a paragraph and the rows would go
    unlabelled. Read upward by visual row (labels at one height, whatever lines the text layer made of them) from
    the table's first text while each row is close above the one below, lies within the table's width, holds no
    figures but years and dates, is no sentence or lead-in, is no bigger than the table's type, and has labels in
    two columns or more (or one label over the value columns, or the unit in the stub)."""
    if not idx:
        return []
    sizes = sorted(page.lines[i].size for i in idx)
    size = sizes[len(sizes) // 2] or 8.0  # the table's type (a footnote mark "(1)" may be its first line)
    edge = min(page.lines[i].y0 for i in idx)
    value_cols = {column_of(s.x0, s.x1, seps) for s in segs} - {0}
    inside = set(idx) | taken
    rows: list[list[int]] = []
    for i in sorted((i for i, ln in enumerate(page.lines) if ln.y1 <= edge + 1 and i not in inside),
                    key=lambda i: -page.lines[i].y1):
        ln = page.lines[i]
        mid = (ln.y0 + ln.y1) / 2
        if rows and any(page.lines[j].y0 <= mid <= page.lines[j].y1 for j in rows[-1]):
            rows[-1].append(i)
        else:
            rows.append([i])
    picked: list[int] = []
    stop: list[int] = []  # the row that ended the header, when one sits close above it
    for row in rows:
        # Note marks set small beside the labels ("(1) (2) (1)") are no figures, and no row of their own.
        lines = [page.lines[i] for i in row if not (page.lines[i].size < 0.85 * size
                                                   and _NOTE_MARKS.fullmatch(page.lines[i].text))]
        if not lines:
            picked += row
            continue
        top, bottom = min(ln.y0 for ln in lines), max(ln.y1 for ln in lines)
        if bottom < edge - (2.2 if not picked else 1.8) * size:
            break
        stop = row
        text = " ".join(ln.text for ln in sorted(lines, key=lambda ln: ln.x0))
        if min(ln.x0 for ln in lines) < x0 - 6 or max(ln.x1 for ln in lines) > x1 + 6 \
                or max(ln.size for ln in lines) > size * 1.12:
            break
        if not text.strip() or DIGITS.search(YEAR_OR_DATE.sub("", text)) or text.rstrip().endswith((".", ":", ";")):
            break
        parts = [p for ln in lines for p in ln.segments(SEG_GAP_EM * max(ln.size, 4.0))]
        if any(len(t.split()) >= 9 or t.rstrip().endswith(("+", "=", "×")) for t, _, _ in parts):
            break  # a label is a few words on a line: this is running text or a formula
        cols = {column_of(a, b, seps) for _, a, b in parts}
        # One label alone is a spanning label over the value columns ("Year Ended December 31,") or the unit in
        # the stub ("In millions"); a title over the stub is the table's caption, not a column's label.
        if len(parts) < 2 and not (cols & value_cols) and not (len(text) <= 40 and UNIT.search(text)):
            break
        if len(parts) >= 2 and len(cols) < 2:
            break
        picked += row
        edge = top
        stop = []
    if picked and stop and max(page.lines[i].y1 for i in stop) >= edge - 1.3 * size \
            and (len(stop) > 1 or not (page.lines[stop[0]].bold or _ENDED.search(page.lines[stop[0]].text))):
        # Text set tight above the labels that is no bold title and no finished sentence: the labels may go on from
        # it (a paragraph's last line), or be the lower half of a header whose upper half does not read as one.
        # Leave them as they were rather than label the columns with a paragraph or half a header.
        return []
    return sorted(picked, key=lambda i: page.lines[i].y0)
