"""Note marks drawn apart from the text they belong to.

Filings often draw a note mark ("(a)", "(1)", "*") in a text object of its own, in smaller type, after everything
else on the page: pdfium then reads it as a line of its own at the end of the page. A reference mark that sits
inside a table row's label ("Restructuring charges/(credits) (a)") and the marker that opens the note itself
("(a) Primarily represents ...") both came out as a column of "(a)", "(b)", "(c)" paragraphs after the page's last
line, with the row and the note they belong to left unmarked (Pfizer's 10-K: 350 such marks). A mark line goes back
into the line it sits on: at its place in that line's characters, or before a line that starts just right of it.
"""

from __future__ import annotations

import re

from chunker.convert.pdf_text.textlayer import Line

# "(a)", "(iv)", "(12)", "*", "**", "†", "‡": a bare letter or number could be a page number or a table's figure.
_MARK = re.compile(r"^(\((?:[a-z]|[ivx]{1,4}|\d{1,2})\)|[*†‡]{1,3})$")
_SMALLER = 0.9  # a mark is set smaller than its host line (superscript or note type)
_BEFORE_GAP = 14.0  # points: at most this far left of the first character of the note it opens


def is_mark(line: Line) -> bool:
    return bool(_MARK.match(line.text))


def attach_note_marks(lines: list[Line]) -> list[Line]:
    """``lines`` without the note marks that sit on another line's band, each moved into that line (the host
    lines change in place). A mark with no such line stays where it was."""
    marks = [ln for ln in lines if is_mark(ln)]
    if not marks:
        return lines
    hosts = [ln for ln in lines if not is_mark(ln)]  # a mark never hosts another
    moved: set[int] = set()
    for mark in marks:
        host = _host(mark, hosts)
        if host is not None:
            _insert(host, mark)
            moved.add(id(mark))
    return [ln for ln in lines if id(ln) not in moved] if moved else lines


def _host(mark: Line, hosts: list[Line]) -> Line | None:
    """The line ``mark`` belongs to: one in larger type whose band holds the mark's top (a superscript rises above
    the baseline, never above the line's top by more than a third of its height), the mark either within or just
    after its extent, or just before its first character."""
    best, best_gap = None, 1e9
    for ln in hosts:
        if mark.size > _SMALLER * ln.size:
            continue
        h = ln.y1 - ln.y0
        if h <= 0 or not (ln.y0 - h / 3 <= mark.y0 <= ln.y1 - h / 4):
            continue
        if ln.x0 <= mark.x0 <= ln.x1 + 0.5 * ln.size:
            gap = max(0.0, mark.x0 - ln.x1)
        elif 0 <= ln.x0 - mark.x1 <= _BEFORE_GAP:
            gap = ln.x0 - mark.x1
        else:
            continue
        if gap < best_gap:
            best, best_gap = ln, gap
    return best


def _insert(host: Line, mark: Line) -> None:
    """The mark's characters into ``host`` at their place along the line, a space on either side."""
    chars = [c for c in mark.chars if not c.isspace()]
    x0s = [a for c, a in zip(mark.chars, mark.xs0) if not c.isspace()]
    x1s = [b for c, b in zip(mark.chars, mark.xs1) if not c.isspace()]
    j = next((k for k, a in enumerate(host.xs0) if a >= mark.x0 and not host.chars[k].isspace()), len(host.chars))
    add, a0, a1 = list(chars), list(x0s), list(x1s)
    if j > 0 and not host.chars[j - 1].isspace():
        add, a0, a1 = [" ", *add], [host.xs1[j - 1], *a0], [mark.x0, *a1]
    if j < len(host.chars) and not host.chars[j].isspace():
        add, a0, a1 = [*add, " "], [*a0, mark.x1], [*a1, host.xs0[j]]
    host.chars[j:j] = add
    host.xs0[j:j] = a0
    host.xs1[j:j] = a1
    host.bolds[j:j] = [host.bolds[j - 1] if j else (host.bolds[0] if host.bolds else False)] * len(add)
    host.soft_after = {k + len(add) if k >= j else k for k in host.soft_after}
    # The band stays the host's: a superscript's raised top would narrow the gap to the line above.
    host.x0, host.x1 = min(host.x0, mark.x0), max(host.x1, mark.x1)
