"""One page's lines, tables and figures -> Markdown blocks of the contract (see :mod:`chunker.contract`).

State that must survive page and batch boundaries (open heading path, an open table's header) lives in
:class:`FlowState`, which the converter threads through a segment's pages in order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from chunker.contract.markup import REST_OF_SENTENCE, SENTENCE_END
from chunker.convert.pdf_text.aligned import AlignedTable
from chunker.convert.pdf_text.figures import Figure
from chunker.convert.pdf_text.handover import FlowState, OpenAligned
from chunker.convert.pdf_text.headings import (
    FontStats,
    heading_level,
    lead_in_sentence,
    numbered_title,
    prose_in_heading_type,
)
from chunker.convert.pdf_text.tables import Table
from chunker.convert.pdf_text.tablewrite import MD_ESCAPE, TableWriting
from chunker.convert.pdf_text.textlayer import WORD_BREAK, Line, PageText, join_wrapped

_BULLET = re.compile(r"^\s*([•●▪■◦‣∙·○◆◇►▸➢✓✔\-–*])\s*")
_NUMBER = re.compile(r"^\s*\(?(\d{1,3})[.)]\s+")
_LETTER = re.compile(r"^\s*\(?([a-zA-Z]|[ivxIVX]{1,4})[.)]\s+")
# A line that cannot end a title: it stops on a comma, "and", "of", ... (the title wraps onto the next line).
_OPEN_END = re.compile(r"(?:,|&|\b(?:and|or|of|for|to|in|on|the|a|an|with|by))$", re.I)
_LITERAL_MARKER = re.compile(r"^(?:#{1,6}|\*\*|__)\s*|\s*(?:\*\*|__|\s#{1,6})$")


def _list_marker(text: str) -> tuple[str, int] | None:
    """Markdown marker and the length of the source marker, for a line that starts a list item."""
    m = _NUMBER.match(text)
    if m:
        return f"{m.group(1)}. ", m.end()
    m = _BULLET.match(text)
    if m and m.end() < len(text) and (m.group(1) not in "-–*" or text[m.end() - 1] == " "):
        return "- ", m.end()
    m = _LETTER.match(text)
    if m and len(text) > m.end() + 2:
        return f"- {text[:m.end()].strip()} ", m.end()
    return None


def _ocr_title(text: str) -> bool:
    """A scanned page's title line: OCR gives no font facts, but a short line of capitals standing on its own
    ("ACME PUMPS CUSTOMER NOTICE", "NOTICE OF ASSESSMENT") is how notices, letters and forms set a title."""
    letters = [c for c in text if c.isalpha()]
    return 6 <= len(letters) and len(text) <= 60 and all(c.isupper() for c in letters) \
        and not SENTENCE_END.search(text) and _list_marker(text) is None


def md_is_number(marker: str) -> bool:
    return marker[:1].isdigit()


def _join(prev: str, nxt: str, soft: bool, keep_hard: bool) -> str:
    if not prev:
        return nxt
    if soft:
        return prev + nxt
    if prev.endswith("-") and len(prev) > 1 and prev[-2].isalpha() and nxt[:1].islower():
        return prev + nxt if keep_hard else prev[:-1] + nxt
    return prev + " " + nxt


def join_split_paragraph(prev: PageWriter, prev_body: str, nxt: PageWriter, body: str,
                         keep_hard: bool) -> tuple[str, str] | None:
    """A paragraph cut by a page break (the page's last paragraph ends mid-sentence, the next page's text starts
    lower-case) as one: (previous page's body without it, next page's body starting with the whole paragraph)."""
    if not (prev.ends_open and nxt.starts_lower):
        return None
    head, _, last = prev_body.rpartition("\n\n")
    first, sep, rest = body.partition("\n\n")
    return head, _join(last, first, prev.soft_end, keep_hard) + sep + rest


def _lead_in(line: Line, skip: int, whole: bool = False) -> tuple[str, str]:
    """(bold lead-in, rest) of a line's text after ``skip`` characters of its stripped text."""
    raw = "".join(line.chars)
    offset = len(raw) - len(raw.lstrip())
    chars, bolds = line.chars[offset + skip:], line.bolds[offset + skip:]
    text = "".join(chars).strip()
    n = 0
    while n < len(chars) and (bolds[n] or chars[n].isspace()):
        n += 1
    lead = "".join(chars[:n]).strip()
    if not lead or (n >= len(chars) and not whole) or not any(c.isalnum() for c in lead):
        return "", text
    return lead, "".join(chars[n:]).strip()


def _bold(lead: str, rest: str) -> str:
    sep = "" if not rest or rest[0] in ",.;:!?)" else " "
    return f"**{lead}**{sep}{rest}"


@dataclass
class _Block:
    kind: str  # para | list
    items: list[str]
    x0: float
    last: Line
    indents: list[float] = field(default_factory=list)  # marker x positions of open nesting levels
    in_heading_type: bool = False  # a paragraph read as a heading until its wraps showed it: its next wraps join it


class PageWriter(TableWriting):
    """Turns one page into Markdown, reading and updating the segment's :class:`FlowState` (its tables, forms
    and figures: :class:`~chunker.convert.pdf_text.tablewrite.TableWriting`)."""

    def __init__(self, page: PageText, stats: FontStats, state: FlowState, skip: set[int]) -> None:
        self.page, self.stats, self.state, self.skip = page, stats, state, skip
        self.out: list[str] = []
        self.kinds: list[str] = []  # kind of each ``out`` entry: para | list | other
        self.soft_end = False  # the last paragraph's last line ended on a soft hyphen
        self.block: _Block | None = None
        body = [ln for i, ln in enumerate(page.lines) if i not in skip]
        self.right = max((ln.x1 for ln in body), default=page.width)
        self.left = min((ln.x0 for ln in body), default=0.0)
        self.last_was_open_table = False
        self.last_aligned: OpenAligned | None = None  # the aligned table written last on this page
        # Header and column lefts of the last ruled table on this page that labelled its value columns.
        self.last_ruled: tuple[list[str], list[float]] | None = None
        self.lent_at = -1  # len(out) right after that table was written
        self.path_before: list[tuple[int, str]] = []  # the heading path before the last heading written here
        self.ends_open = self.starts_lower = False  # set by render(): see join_split_paragraph

    # -- blocks -------------------------------------------------------------------------------------------
    def _flush(self) -> None:
        b = self.block
        if b is not None:
            if b.kind == "list":
                self.out.append("\n".join(b.items))
            else:
                text = " ".join(b.items).strip()
                self.out.append(MD_ESCAPE.sub(r"\\\1", text))
                self.soft_end = b.last.soft_end
            self.kinds.append(b.kind)
        self.block = None

    def _emit(self, markdown: str) -> None:
        self._flush()
        self.out.append(markdown)
        self.kinds.append("other")
        self.last_was_open_table = False

    def heading(self, level: int, text: str) -> None:
        # Markdown markers printed literally on the page ("# Usage Guide" from an unrendered source) are markup,
        # not words: kept, they would reach every breadcrumb under this heading.
        text = _LITERAL_MARKER.sub("", text).strip() or text
        self.path_before = list(self.state.heading_path)
        self.state.push_heading(level, text)
        self._emit("#" * level + " " + text)

    # -- lines --------------------------------------------------------------------------------------------
    def _standalone(self, line: Line, prev: Line | None, nxt: Line | None) -> bool:
        if self._centred(line) and not SENTENCE_END.search(line.text) \
                and any(other is not None and self._centred(other) and not SENTENCE_END.search(other.text)
                        for other in (prev, nxt)):
            # A stack of centred lines well inside the margins is a title block ("Consolidated Balance Sheets"
            # over the company's name): each line stands on its own, where a paragraph's lines run margin to margin.
            return True
        if prev is not None and line.y0 - prev.y1 < 0.5 * max(line.size, 4) and prev.size == line.size \
                and not (prev.bold and prev.x1 < self.left + 0.75 * (self.right - self.left)):
            return False  # runs on from the line above (a wrapped item or sentence)
        if nxt is None:
            return True
        gap = nxt.y0 - line.y1
        if line.bold and gap <= 0.5 * max(line.size, 4) and nxt.size == line.size and self._full(line, nxt.x0) \
                and _list_marker(nxt.text) is None:
            # A bold line that runs to the right edge with the next line close under it is a paragraph's first
            # line set in bold ("Highlights: - Multiple appetizers, mains, and dessert options on every" over
            # "flight - Refined cuisine..."): a heading ends short of the edge or wraps onto a bold line.
            return False
        return gap > 0.5 * max(line.size, 4) or nxt.bold != line.bold or _list_marker(nxt.text) is not None

    def _full(self, line: Line, start: float) -> bool:
        """The line runs from where its block's lines start (``start``: an item's text is indented) or from the
        text's usual left edge to the right edge, with no wide gap inside (a row of column labels spread over the
        width is no paragraph line): a paragraph line that wrapped."""
        left, right = self._edges()
        size = max(line.size, 4)
        return (line.x0 <= left + size or abs(line.x0 - start) < 2) and line.x1 >= right - size \
            and len(line.segments(2 * size)) == 1

    def _edges(self) -> tuple[float, float]:
        return (self.stats.text_left or self.left), (self.stats.text_right or self.right)

    def _centred(self, line: Line) -> bool:
        """Centred on the page or on the text, standing well inside the text's usual edges (the lines of a
        paragraph set in a narrow centred column start and end at its edges; a title's do not)."""
        left, right = self._edges()
        margin = 2 * max(line.size, 4)
        mid, tol = (line.x0 + line.x1) / 2, 0.02 * self.page.width
        return line.x0 > left + margin and line.x1 < right - margin and (
            abs(mid - self.page.width / 2) < tol or abs(mid - (left + right) / 2) < tol)

    def _wraps_heading(self, prev: Line, line: Line) -> bool:
        """``line`` continues the heading on ``prev``: close below it, or a little further (titles are often set
        with generous leading) when ``prev`` could not have ended there (it breaks a word, or it ran full width) or
        both are lines of one title block."""
        gap = line.y0 - prev.y1
        if gap < 0.5 * line.size:
            return True
        if gap > 1.1 * line.size:
            return False
        full = prev.x1 >= self.left + 0.8 * (self.right - self.left)
        if prev.soft_end or prev.text.endswith("-") or full or line.text[:1].islower():
            return True
        # A numbered title ("8. Debt") stacked over the first heading inside it ("Short-Term Debt") is two
        # headings; it runs on only where it cannot have ended ("2. Acquisitions, Divestitures and").
        if numbered_title(prev):
            return bool(_OPEN_END.search(prev.text))
        return self._stacked(prev, line)

    def _stacked(self, prev: Line, line: Line) -> bool:
        """Two short lines of one title block: both centred, or both starting at the same left edge."""
        if self._centred(prev) and self._centred(line):
            return True
        short = max(prev.x1, line.x1) < self._edges()[1] - 2 * max(line.size, 4)  # neither runs to the right edge
        return short and abs(prev.x0 - line.x0) < 2

    def _heading_to_paragraph(self, text: str, line: Line) -> None:
        """The heading written last grew into prose as its wraps joined it: it becomes a paragraph (its further
        wraps join it too), and the heading path is what it was before it."""
        self.out.pop()
        self.kinds.pop()
        self.state.heading_path = self.path_before
        self._paragraph_in_heading_type(text, line)

    def _paragraph_in_heading_type(self, text: str, line: Line) -> None:
        """Opens a paragraph whose lines are set in heading type: its next wraps join it instead of heading it."""
        self._flush()
        self.block = _Block("para", [text], line.x0, line, in_heading_type=True)
        self.last_was_open_table = False

    def line(self, i: int, line: Line, prev: Line | None, nxt: Line | None) -> None:
        text = line.text
        standalone = self._standalone(line, prev, nxt)
        if self.page.ocr:
            level = self.stats.bold_level if standalone and _ocr_title(text) else 0
        else:
            level = heading_level(line, self.stats, standalone)
        b = self.block
        gap = line.y0 - prev.y1 if prev is not None else 1e9
        size = max(line.size, 4)
        if level and b is not None and b.last is prev and b.in_heading_type and abs(b.last.size - line.size) < 0.3 \
                and self._wraps_heading(prev, line):
            level = 0  # the next wrap of a paragraph set in heading type (_heading_to_paragraph)
        if level and b is not None and b.last is prev and self.stats.size_level(line.size) \
                and abs(b.last.size - line.size) < 0.3 \
                and (gap < 0.55 * size or (gap < 0.9 * size and text[:1].islower())):
            # The wrap of a paragraph or item set in heading type whose first line is no heading (a table's note a
            # point above the body: "(2) Included in ... Note 8." / "Receivables derived from ..."): it goes on.
            level = 0
        if level:
            if prev is not None and self.out and self.out[-1].startswith("#" * level + " ") and self.block is None \
                    and (prev.size == line.size or self._stacked(prev, line)) and not numbered_title(line) \
                    and self._wraps_heading(prev, line):
                # A heading wrapped over two lines is one heading (a word cut by a hyphen joined again); so is a
                # title block stacked at one level ("Consolidated Statements of Income" over the company's name,
                # a point smaller), which would otherwise leave only its last line in the breadcrumb.
                first = self.out[-1][level + 1:] + (WORD_BREAK if prev.soft_end else "")
                merged = join_wrapped(first, text, self.state.keep_hard_hyphens)
                if prose_in_heading_type(merged) or lead_in_sentence(merged):
                    self._heading_to_paragraph(merged, line)
                    return
                self.out[-1] = "#" * level + " " + merged
                self.state.heading_path[-1] = (level, merged)
                return
            if lead_in_sentence(text):
                self._paragraph_in_heading_type(text, line)
                return
            # A line in heading type that starts in lower case and continues no heading is the rest of a sentence
            # ("other post adjudication activities. ..." had titled 44 chunks of one report).
            if not REST_OF_SENTENCE.match(text):
                self.heading(level, text)
                return
        marker = _list_marker(text)
        if marker is not None and text[:1] in "-–" and b is not None and b.kind == "para" and gap < 0.55 * size \
                and abs(b.last.size - line.size) < 0.6 and self._full(b.last, b.x0) and line.x0 < b.last.x0 + 2:
            # A dash that opens a line right under a paragraph's full line is where the paragraph wrapped
            # ("... Indian Royal, Pan-Asian, and more" / "- Exclusive beverage pairings: ..."): a list would
            # have begun its first item on a line of its own; joined, so the item's own wrap stays with it too.
            b.items[-1] = _join(b.items[-1], text, b.last.soft_end, self.state.keep_hard_hyphens)
            b.last = line
            return
        if marker is not None and md_is_number(marker[0]) and line.bold and nxt is not None and len(text) < 90 \
                and _list_marker(nxt.text) is not None and nxt.x0 > line.x0 + 5 and not SENTENCE_END.search(text):
            # A bold numbered line over an indented list is a numbered sub-heading (job titles, steps with detail).
            self.heading(self.stats.bold_level, text)
            return
        if marker is not None:
            md, skip = marker
            lead, rest = _lead_in(line, skip, whole=True)
            item = md + (_bold(lead, rest) if lead else text[skip:].strip())
            if b is None or b.kind != "list":
                self._flush()
                self.block = b = _Block("list", [], line.x0, line, [line.x0])
            while len(b.indents) > 1 and line.x0 < b.indents[-1] - 3:
                b.indents.pop()
            if line.x0 > b.indents[-1] + 5 and len(b.indents) < 4:
                b.indents.append(line.x0)
            b.items.append("  " * (len(b.indents) - 1) + item)
            b.x0, b.last = line.x0, line
            self.last_was_open_table = False
            return
        # Where the segment's body is set with generous leading (FontStats.wrap_gap), a gap up to a little over it
        # wraps a paragraph and, under an item's line that ends mid-sentence, a list item.
        wrap = self.stats.wrap_gap
        item_wrap = wrap if b is not None and wrap > 0.55 and not SENTENCE_END.search(b.last.text) else 0.35
        if b is not None and b.kind == "list" and (line.x0 > b.x0 + 2 or gap < item_wrap * size) \
                and not (gap > 0.9 * size and abs(b.last.size - line.size) > 0.1 * size):
            # An indented line a line's space further down in another type size is no wrap of the item: a table's
            # footnote ("(1) Included within ...") over the body sentence after it, which then reads on its own.
            b.items[-1] = _join(b.items[-1], text, b.last.soft_end, self.state.keep_hard_hyphens)
            b.last = line
            return
        ended = b is not None and b.last.x1 < self.left + 0.75 * (self.right - self.left) \
            and bool(SENTENCE_END.search(b.last.text))
        # Glyph boxes are tight: a line of x-height letters ("menus", "or are") starts lower than its neighbours,
        # so a lower-case line under a paragraph's full line is its continuation a little further down too.
        if b is not None and b.kind == "para" and not ended and abs(b.last.size - line.size) < 0.6 and (
                gap < wrap * size or (gap < 0.9 * size and text[:1].islower() and self._full(b.last, b.x0))):
            b.items[-1] = _join(b.items[-1], text, b.last.soft_end, self.state.keep_hard_hyphens)
            b.last = line
            return
        self._flush()
        lead, rest = _lead_in(line, 0)
        first = _bold(lead, rest) if lead and rest else text
        self.block = _Block("para", [first], line.x0, line)
        self.last_was_open_table = False

    def render(self, tables: list[Table], figures: list[Figure], aligned: list[AlignedTable] | None = None) -> str:
        objects: list[tuple[float, Table | Figure | AlignedTable]] = sorted(
            [(t.bbox[1], t) for t in tables] + [(f.bbox[1], f) for f in figures]
            + [(t.bbox[1], t) for t in aligned or []], key=lambda o: o[0]
        )
        lines = [(i, ln) for i, ln in enumerate(self.page.lines) if i not in self.skip]
        k = 0
        for n, (i, ln) in enumerate(lines):
            while k < len(objects) and objects[k][0] <= ln.y0:
                self._object(objects[k][1])
                k += 1
            prev = lines[n - 1][1] if n else None
            nxt = lines[n + 1][1] if n + 1 < len(lines) else None
            self.line(i, ln, prev, nxt)
        for _, obj in objects[k:]:
            self._object(obj)
        self._flush()
        if not self.last_was_open_table:
            self.state.table_header, self.state.table_columns, self.state.aligned = [], [], None
        kept = [(k, s) for k, s in zip(self.kinds, self.out) if s.strip()]
        self.ends_open = bool(kept) and kept[-1][0] == "para" and not SENTENCE_END.search(kept[-1][1])
        self.starts_lower = bool(kept) and kept[0][0] == "para" and kept[0][1][:1].islower()
        return "\n\n".join(s for _, s in kept)

    def _object(self, obj: Table | Figure | AlignedTable) -> None:
        if isinstance(obj, AlignedTable):
            self.aligned(obj)
        elif isinstance(obj, Table):
            self.table(obj)
        else:
            self.figure(obj)
