"""Forms set as grids: each value written after its own label.

A report form ("Location:" <town> "Date & Time:" <date>, two pairs a row; or a row of labels over a row of their
values) is drawn as a grid and read as one. As a table, its first row's labels become column headers and every
value below is bound to the wrong label ("Location:: Date & Time:"). A grid whose cells are mostly labels (short
text ending with ":") and "Label: value" cells is a form: it is written row by row as ``Label: value`` pairs in
reading order, and a row that is only a title (one cell of text, no label) is the form's section title.

A form whose labels are set like headings, each over its one value (:func:`label_pair`), is read the same way at
parse time: one ``Label: value`` paragraph per pair, not a heading per label.

A real table whose header row happens to end its labels with ":" is still a table: its labels are a small share of
its cells, and the figures below them are rows, not values of single labels.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

_LABEL = re.compile(r"^[^:]{1,60}:$")
_PAIR = re.compile(r"^[^:]{1,60}:\s+\S")
# Labels and pair cells must be at least this share of the filled cells of a grid's rows of two or more cells (a
# title row aside) for it to read as a form: two pairs a row are half labels; a table whose row labels end with ":"
# over two or more figure columns stays under it.
FORM_SHARE = 0.4


def _clean(cell: str) -> str:
    return cell.strip().strip("*_").strip()


def is_label(cell: str) -> bool:
    """A cell that is only a label: short text ending with one colon ("Date & Time:")."""
    t = _clean(cell)
    return bool(_LABEL.match(t)) and any(ch.isalpha() for ch in t)


def is_pair(cell: str) -> bool:
    """A cell that holds a label and its value ("Registration: N123AB")."""
    t = _clean(cell)
    return bool(_PAIR.match(t)) and any(ch.isalpha() for ch in t.split(":", 1)[0])


@dataclass
class Form:
    """A grid read as a form: its title rows and one sentence of pairs per row, in reading order."""

    titles: list[str] = field(default_factory=list)
    rows: list[str] = field(default_factory=list)


def is_form(grid: list[list[str]]) -> bool:
    rows = [[c for c in r if _clean(c)] for r in grid]
    filled = [c for r in rows if len(r) >= 2 for c in r]
    labels = sum(1 for c in filled if is_label(c))
    pairs = sum(1 for c in filled if is_pair(c))
    return labels >= 2 and labels + pairs >= FORM_SHARE * len(filled)


def read_form(grid: list[list[str]]) -> Form | None:
    """The grid (header row included, as drawn) as a form, or None when it is a table."""
    if not is_form(grid):
        return None
    form = Form()
    i = 0
    while i < len(grid):
        row = [_clean(c) for c in grid[i]]
        filled = [c for c in row if c]
        nxt = [_clean(c) for c in grid[i + 1]] if i + 1 < len(grid) else []
        if not filled:
            i += 1
            continue
        if len(filled) == 1 and not is_label(filled[0]) and not is_pair(filled[0]) and not form.rows:
            form.titles.append(filled[0])  # a title row over the pairs
            i += 1
            continue
        if all(is_label(c) for c in filled) and nxt and any(nxt) and not any(is_label(c) or is_pair(c) for c in nxt):
            # Labels over their values, column by column.
            pairs = [_pair(lab, nxt[k] if k < len(nxt) else "") for k, lab in enumerate(row) if lab]
            i += 2
        else:
            pairs = _inline(row)
            i += 1
        form.rows.append("; ".join(p for p in pairs if p))
    form.rows = [r for r in form.rows if r]
    return form


def _pair(label: str, value: str) -> str:
    lab = label.rstrip(":").strip()
    return f"{lab}: {value}" if value else f"{lab}:"


def _inline(row: list[str]) -> list[str]:
    """Label cells followed by their value cells, left to right; pair cells and stray values as they are."""
    out: list[str] = []
    label: str | None = None
    values: list[str] = []

    def close() -> None:
        if label is not None:
            out.append(_pair(label, " ".join(values)))
        else:
            out.extend(values)

    for c in row:
        if not c:
            continue
        if is_label(c):
            close()
            label, values = c, []
        elif is_pair(c):
            close()
            out.append(c)
            label, values = None, []
        else:
            values.append(c)
    close()
    return out


# A form's label set like a heading ("OST-P :", "Lead agency:") over the one short value it labels, in a grid of
# such pairs: the next block after the value is another heading. Read as headings, every value sat under the wrong
# breadcrumb and made a chunk of its own; it is one "label: value" paragraph.
_PLAIN_VALUE = re.compile(r"^(?![#|>!*+-]\s|#|\||<!--|```|\d+[.)]\s)\S")
LABEL_MAX_CHARS, VALUE_MAX_CHARS = 60, 120


def _next_filled(lines: list[str], i: int) -> int:
    while i < len(lines) and not lines[i].strip():
        i += 1
    return i


def label_pair(lines: list[str], i: int, heading: str, ends_block: Callable[[str], bool]) -> tuple[str, int] | None:
    """("label: value", index after the value) when heading line ``i`` is a form label over one short value;
    ``ends_block(line)``: whether a line opens the next block (a heading or a page marker, as the parser reads them)."""
    label = heading.strip().strip("*_").strip()
    if not label.endswith(":") or len(label) > LABEL_MAX_CHARS or len(label) < 2:
        return None
    j = _next_filled(lines, i + 1)
    if j >= len(lines) or not _PLAIN_VALUE.match(lines[j].strip()) or len(lines[j].strip()) > VALUE_MAX_CHARS:
        return None
    k = _next_filled(lines, j + 1)
    if k < len(lines) and not ends_block(lines[k]):
        return None
    return f"{label.rstrip(':').rstrip()}: {lines[j].strip()}", j + 1
