"""Markdown (the conversion contract) -> ID-addressable elements.

The contract every converter writes, model or not:

* ``<!-- page N -->`` on its own line: what follows is on 1-based page N.
* ``#`` .. ``######`` headings: real heading levels.
* Paragraphs: blocks separated by blank lines.
* Lists: items starting ``- ``, ``* ``, ``+ ``, ``1. `` or ``1) ``; indented lines continue the item. One list block is
  one element (steps are never split).
* Tables, two spellings, both parsed into one ``table_row`` element per row whose text names every column:
  a GitHub pipe table (header row, ``---`` row, body rows), or a block between ``<!-- table -->`` and
  ``<!-- /table -->`` holding one self-contained row sentence per line. ``<!-- table continued -->`` opens a block
  that continues the previous table (same group).
* Figures: ``![caption or description](figure)``, optionally followed by ``<!-- bbox x0 y0 x1 y1 -->`` on the same
  line; lines directly below without a blank line extend the description.
* Fenced code blocks (```) are one ``code`` element.

This module is the contract's one home: its grammar (the patterns below), its writers (:func:`page_marker`,
:func:`table_block`, :func:`figure_row_sentence`, :func:`figure_line`; every converter writes through them) and its parser.

Element IDs are ``{doc_id}:{ordinal}``; ordinals restart per segment at ``segment_index * SEGMENT_STRIDE`` so
segments parsed on different workers never collide and one document's IDs sort in reading order.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from chunker.forms import label_pair, read_form
from chunker.tabletext import UNIT, unit_text
from chunker.types import ConvertedBatch, Element

SEGMENT_STRIDE = 1_000_000

PAGE_MARKER = re.compile(r"^\s*<!--\s*page\s+(\d+)\s*-->\s*$", re.I)
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
LIST_ITEM = re.compile(r"^(\s*)([-*+•]|\d{1,3}[.)])\s+(.*)$")
_TABLE_OPEN = re.compile(r"^\s*<!--\s*table(\s+continued)?\s*-->\s*$", re.I)
_TABLE_CLOSE = re.compile(r"^\s*<!--\s*/table\s*-->\s*$", re.I)
_FIGURE = re.compile(r"^!\[(.*?)\]\(figure\)\s*(?:<!--\s*bbox\s+([\d.\s-]+?)\s*-->)?\s*$", re.I)
_COMMENT = re.compile(r"^\s*<!--.*-->\s*$")
PIPE_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")


# --- writers ---------------------------------------------------------------------------------------------------
TABLE_OPEN = "<!-- table -->"
TABLE_CONTINUED = "<!-- table continued -->"
TABLE_CLOSE = "<!-- /table -->"


def page_marker(page: int) -> str:
    """The line that says: what follows is on 1-based page ``page``."""
    return f"<!-- page {page} -->"


def page_numbers(markdown: str) -> list[int]:
    """The pages named by the page markers of ``markdown``, in order of appearance."""
    return [int(m.group(1)) for line in markdown.splitlines() if (m := PAGE_MARKER.match(line))]


def table_block(rows: Iterable[str], continued: bool = False) -> list[str]:
    """The lines of a row-sentence table block (one self-contained sentence per row)."""
    return [TABLE_CONTINUED if continued else TABLE_OPEN, *rows, TABLE_CLOSE]


def figure_row_sentence(label_path: list[str], cells: list[tuple[list[str], str]], unit: str = "",
                        unit_each: bool = False) -> str:
    """A table row of figures as one sentence in which every figure carries its column path and unit:
    ``Total net sales | Three Months Ended April 1, 2023 | $ in millions: 94,836; Three Months Ended ...``.

    ``label_path``: the row label under its section labels, outermost first ("Operating expenses" > "Research and
    development"); ``cells``: (column path top down, figure) per column, empty figures left out. The unit is
    written once, after the row label, and holds for every figure of the row (``unit_each``: after every figure's
    path instead, as in the example above; longer for the same facts)."""
    label = " > ".join(p.strip().rstrip(":").strip() for p in label_path if p.strip().rstrip(":").strip())
    unit = unit_text(unit) if unit.strip() else ""
    figs = []
    for path, value in cells:
        if not value.strip():
            continue
        head = " > ".join(p for p in path if p)
        if unit and unit_each:
            head = f"{head} | {unit}" if head else unit
        figs.append(f"{head}: {value.strip()}" if head else value.strip())
    lead = f"{label} | {unit}" if unit and not unit_each and label else (label or (unit if not unit_each else ""))
    body = "; ".join(figs)
    return f"{lead} | {body}" if lead and body else (lead or body)


FIGURE_PLACEHOLDER = "Image"  # what a figure with no description is written as
# Words a converter or model writes for a figure it could not describe.
_PLACEHOLDERS = {"", FIGURE_PLACEHOLDER.casefold(), "figure", "picture", "graphic", "photo", "logo", "chart"}


def says_nothing(figure_text: str) -> bool:
    """Whether a figure's text is only a placeholder: no description, nothing a question could match."""
    return figure_text.strip().strip(".:").casefold() in _PLACEHOLDERS


def figure_line(description: str, bbox: Iterable[float] | None = None) -> str:
    """A figure: its description (brackets made safe) and, where known, its box in PDF points."""
    text = (description or FIGURE_PLACEHOLDER).replace("]", ")").replace("[", "(")
    box = f" <!-- bbox {' '.join(str(v) for v in bbox)} -->" if bbox is not None else ""
    return f"![{text}](figure){box}"


# --- parser ----------------------------------------------------------------------------------------------------
@dataclass
class _Block:
    kind: str
    text: str
    page_start: int
    page_end: int
    level: int = 0
    bbox: list[float] | None = None
    group: str = ""
    ordered: bool = False


def _split_pipe_row(line: str) -> list[str]:
    s = line.strip()
    if s.startswith("|"):
        s = s[1:]
    if s.endswith("|"):
        s = s[:-1]
    return [c.strip() for c in re.split(r"(?<!\\)\|", s)]


def table_row_sentence(headers: list[str], cells: list[str]) -> str:
    """One self-contained sentence for a table row: every value with its column header. A column without a header
    gets no placeholder ("Column 2" names no meaning and matches every question alike): its value stands bare, and
    in a table with no header at all the first cell labels the rest ("2024: 3,417", a two-column schedule)."""
    filled = [((headers[i] if i < len(headers) else "").strip().rstrip(":").rstrip(), c) for i, c in enumerate(cells) if c]
    if not any(h for h, _ in filled) and len(filled) >= 2:
        parts = [f"{filled[0][1]}: " + "; ".join(c for _, c in filled[1:])]
    else:
        parts = [f"{h}: {c}" if h else c for h, c in filled]
    return "; ".join(parts) + ("." if parts and not parts[-1].endswith(".") else "")


# A figure as tables print it: sign, currency, digits with separators, decimals, parentheses, percent, a footnote
# star; or a dash / "n/m" standing for an empty value.
_FIGURE_CELL = re.compile(r"^[(\[]?[-–—−+]?[$€£¥₹]?\s?[-–—−]?\(?\d[\d,]*(?:\.\d+)?\)?\s?(?:%|pts?|bps|x)?[)\]]?\*?$"
                     r"|^(?:[-–—−]{1,2}|n/?[am]|nm|\*)$", re.I)


# A line set like a heading that only qualifies what follows: "(unaudited)", "(in millions, except per share
# data)", "In thousands", "Unaudited". As a heading it would stand in the breadcrumb of every chunk below it and
# leave a chunk of its own; it is a paragraph (a table's unit line the converter did not claim).
_QUALIFIER = re.compile(r"^\(.*\)$|^(?:\$\s*)?(?:in\s+)?(?:thousands|millions|billions)\b.{0,60}$|^unaudited$", re.I | re.S)


def not_a_heading(text: str) -> bool:
    """Whether a heading line is only a parenthetical or a unit line (see ``_QUALIFIER``)."""
    t = text.strip().strip("*_").strip()
    return bool(_QUALIFIER.match(t)) and len(t) <= 80


def is_figure(text: str) -> bool:
    return bool(_FIGURE_CELL.match(text.strip()))


def row_labelled(headers: list[str], rows: list[list[str]]) -> bool:
    """A table of figures with row labels: the first column has no header of its own (empty, a unit, or a
    placeholder), holds words on most rows, and at least half of the other filled cells are figures. Its rows are
    written label first, each figure with its column header (see :func:`figure_row_sentence`)."""
    if len(headers) < 2 or not rows:
        return False
    stub = headers[0].strip()
    if stub and not UNIT.search(stub):
        return False
    # A stub cell with nothing beside it labels the rows below it, whatever it reads (a year over its rows).
    labels = sum(1 for r in rows if r and r[0].strip() and (not is_figure(r[0]) or not any(c.strip() for c in r[1:])))
    rest = [c.strip() for r in rows for c in r[1:] if c.strip()]
    figs = sum(1 for c in rest if is_figure(c))
    return labels >= 0.8 * len(rows) and bool(rest) and figs >= 0.5 * len(rest)


class _Scanner:
    """Line scanner that turns the contract into blocks, tracking the current page."""

    def __init__(self, default_page: int) -> None:
        self.page = default_page
        self.blocks: list[_Block] = []
        self.table_seq = 0
        self.last_table_group = ""
        self.level = 1  # the level of the last heading: a form's title goes one below it

    @staticmethod
    def _ends_block(line: str) -> bool:
        return bool(_HEADING.match(line.strip()) or PAGE_MARKER.match(line))

    def _new_table_group(self, continued: bool) -> str:
        if continued and self.last_table_group:
            return self.last_table_group
        self.table_seq += 1
        self.last_table_group = f"t{self.table_seq}"
        return self.last_table_group

    def scan(self, lines: list[str]) -> None:
        i, n = 0, len(lines)
        while i < n:
            line = lines[i]
            stripped = line.strip()
            m = PAGE_MARKER.match(line)
            if m:
                self.page = int(m.group(1))
                i += 1
                continue
            if not stripped:
                i += 1
                continue
            if stripped.startswith("```"):
                i = self._code(lines, i)
                continue
            m = _TABLE_OPEN.match(line)
            if m:
                i = self._sentence_table(lines, i + 1, continued=bool(m.group(1)))
                continue
            if _COMMENT.match(line):
                i += 1
                continue
            m = _HEADING.match(stripped)
            if m and m.group(2) and not_a_heading(m.group(2)):
                self.blocks.append(_Block("paragraph", m.group(2).strip(), self.page, self.page))
                i += 1
                continue
            pair = label_pair(lines, i, m.group(2), self._ends_block) if m and m.group(2) else None
            if pair is not None:
                self.blocks.append(_Block("paragraph", pair[0], self.page, self.page))
                i = pair[1]
                continue
            if m and m.group(2):
                self.level = len(m.group(1))
                self.blocks.append(_Block("heading", m.group(2).strip(), self.page, self.page, level=self.level))
                i += 1
                continue
            if stripped.startswith("|") and i + 1 < n and PIPE_SEPARATOR.match(lines[i + 1]):
                i = self._pipe_table(lines, i)
                continue
            m = _FIGURE.match(stripped)
            if m:
                i = self._figure(lines, i, m)
                continue
            if LIST_ITEM.match(line):
                i = self._list(lines, i)
                continue
            i = self._paragraph(lines, i)

    def _code(self, lines: list[str], i: int) -> int:
        start_page = self.page
        body = [lines[i]]
        i += 1
        while i < len(lines):
            body.append(lines[i])
            i += 1
            if lines[i - 1].strip().startswith("```"):
                break
        self.blocks.append(_Block("code", "\n".join(body).strip(), start_page, self.page))
        return i

    def _sentence_table(self, lines: list[str], i: int, continued: bool) -> int:
        group = self._new_table_group(continued)
        while i < len(lines) and not _TABLE_CLOSE.match(lines[i]):
            m = PAGE_MARKER.match(lines[i])
            if m:
                self.page = int(m.group(1))
            elif lines[i].strip() and not _COMMENT.match(lines[i]):
                row = lines[i].strip()
                row = re.sub(r"^([-*+•]|\d{1,3}[.)])\s+(?!\|)", "", row)  # a list marker, not a row label "2. |"
                self.blocks.append(_Block("table_row", row, self.page, self.page, group=group))
            i += 1
        return i + 1

    def _pipe_table(self, lines: list[str], i: int) -> int:
        headers = _split_pipe_row(lines[i])
        group = self._new_table_group(False)
        i += 2
        body: list[list[str]] = []
        while i < len(lines) and lines[i].strip().startswith("|"):
            body.append(_split_pipe_row(lines[i]))
            i += 1
        form = read_form([headers] + body)
        if form is not None:
            # A key-value grid: each value after its own label, the title row as a heading under the current one.
            for title in form.titles:
                self.blocks.append(_Block("heading", title, self.page, self.page, level=min(6, self.level + 1)))
            self.blocks += [_Block("table_row", r, self.page, self.page, group=group) for r in form.rows]
            return i
        labelled = row_labelled(headers, body)
        for cells in body:
            if labelled:
                stub = headers[0].strip() if headers else ""
                sentence = figure_row_sentence([cells[0]], [([h], v) for h, v in zip(headers[1:], cells[1:])],
                                               stub if UNIT.search(stub) else "")
            else:
                sentence = table_row_sentence(headers, cells)
            if sentence:
                self.blocks.append(_Block("table_row", sentence, self.page, self.page, group=group))
        return i

    def _figure(self, lines: list[str], i: int, m: re.Match[str]) -> int:
        bbox = None
        if m.group(2):
            try:
                vals = [float(v) for v in m.group(2).split()]
                bbox = vals if len(vals) == 4 else None
            except ValueError:
                bbox = None
        text = [m.group(1).strip()]
        i += 1
        while i < len(lines) and lines[i].strip() and not PAGE_MARKER.match(lines[i]) and not _HEADING.match(lines[i].strip()):
            text.append(lines[i].strip())
            i += 1
        self.blocks.append(_Block("figure", "\n".join(t for t in text if t), self.page, self.page, bbox=bbox))
        return i

    def _list(self, lines: list[str], i: int) -> int:
        start_page = self.page
        items: list[str] = []
        first = LIST_ITEM.match(lines[i])
        ordered = bool(first and first.group(2)[0].isdigit())
        while i < len(lines):
            line = lines[i]
            if PAGE_MARKER.match(line):
                # A page break inside a list does not end it: steps continue over pages.
                j = i + 1
                while j < len(lines) and not lines[j].strip():
                    j += 1
                if j < len(lines) and LIST_ITEM.match(lines[j]):
                    self.page = int(PAGE_MARKER.match(line).group(1))  # type: ignore[union-attr]
                    i = j
                    continue
                break
            if not line.strip():
                # A blank line ends the list unless the next content line (past page markers) is another item.
                j, page = i + 1, self.page
                while j < len(lines) and (not lines[j].strip() or PAGE_MARKER.match(lines[j])):
                    m = PAGE_MARKER.match(lines[j])
                    page = int(m.group(1)) if m else page
                    j += 1
                if j < len(lines) and LIST_ITEM.match(lines[j]):
                    self.page, i = page, j
                    continue
                break
            m = LIST_ITEM.match(line)
            if m:
                items.append(line.rstrip())
            elif items and (line.startswith((" ", "\t")) or not _starts_block(line)):
                items[-1] = items[-1] + " " + line.strip()
            else:
                break
            i += 1
        self.blocks.append(_Block("list", "\n".join(items), start_page, self.page, ordered=ordered))
        return i

    def _paragraph(self, lines: list[str], i: int) -> int:
        buf: list[str] = []
        while i < len(lines):
            line = lines[i]
            if not line.strip() or PAGE_MARKER.match(line) or (buf and _starts_block(line)):
                break
            buf.append(line.strip())
            i += 1
        self.blocks.append(_Block("paragraph", " ".join(buf), self.page, self.page))
        return i


def _starts_block(line: str) -> bool:
    s = line.strip()
    return bool(
        _HEADING.match(s)
        or LIST_ITEM.match(line)
        or s.startswith("```")
        or _TABLE_OPEN.match(line)
        or _FIGURE.match(s)
        or PAGE_MARKER.match(line)
        or (s.startswith("|") and s.endswith("|"))
    )


def parse_markdown(
    doc_id: str,
    markdown_pages: Iterable[tuple[str, int]],
    segment_index: int = 0,
    heading_path: list[str] | None = None,
    heading_levels: list[int] | None = None,
) -> list[Element]:
    """Parse Markdown pieces (text, first page of the piece) into elements with stable IDs.

    ``heading_path`` seeds the heading chain (a segment starts under the headings its overlap left open), at
    ``heading_levels`` (one per entry; when not given, or not one per entry, 1, 2, ...).
    """
    scanner = _Scanner(default_page=1)
    for text, first_page in markdown_pages:
        scanner.page = first_page
        scanner.scan(text.splitlines())
    path = seed_path(heading_path, heading_levels)
    elements: list[Element] = []
    base = segment_index * SEGMENT_STRIDE
    for block in scanner.blocks:
        if block.kind == "heading":
            path = [(lvl, h) for lvl, h in path if lvl < block.level]
            path.append((block.level, block.text))
            hp = [h for _, h in path]
        else:
            hp = [h for _, h in path]
        ordinal = base + len(elements)
        elements.append(
            Element(
                element_id=f"{doc_id}:{ordinal}",
                doc_id=doc_id,
                ordinal=ordinal,
                kind=block.kind,  # type: ignore[arg-type]
                text=block.text,
                level=block.level,
                heading_path=hp,
                page_start=block.page_start,
                page_end=block.page_end,
                bbox=block.bbox,
                group=block.group,
                attrs={"ordered": True} if block.ordered else {},
            )
        )
    return elements


def seed_path(heading_path: list[str] | None, heading_levels: list[int] | None = None) -> list[tuple[int, str]]:
    """A handed-in heading chain as (level, text); levels 1, 2, ... where they are not known one per entry."""
    texts = list(heading_path or [])
    levels = list(heading_levels or [])
    if len(levels) != len(texts) or any(not 1 <= lv <= 6 for lv in levels):
        levels = list(range(1, len(texts) + 1))
    return list(zip(levels, texts))


def open_headings(elements: list[Element], seed: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """The (level, text) chain in force after ``elements``, started from ``seed``: what the next batch inherits."""
    path = list(seed)
    for e in elements:
        if e.kind == "heading":
            path = [(lv, h) for lv, h in path if lv < e.level] + [(e.level, e.text)]
    return path


def parse_batches(doc_id: str, batches: list[ConvertedBatch], segment_index: int = 0,
                  heading_path: list[str] | None = None, heading_levels: list[int] | None = None) -> list[Element]:
    """Elements of a segment's converted batches, in batch order, overlap (context-only) batches left out."""
    kept = sorted((b for b in batches if not b.context_only), key=lambda b: b.batch_index)
    return parse_markdown(doc_id, [(b.markdown, b.page_start) for b in kept], segment_index, heading_path,
                          heading_levels)
