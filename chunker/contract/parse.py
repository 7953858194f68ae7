"""The contract's parser: Markdown pieces -> blocks (:class:`_Scanner`) -> elements with stable IDs, and the heading
chain one batch hands the next (:func:`seed_path`, :func:`open_headings`). The grammar it reads, and the writers,
live in :mod:`chunker.contract.markup`: kept apart so each module reads in one sitting.

Element IDs are ``{doc_id}:{ordinal}``; ordinals restart per segment at ``segment_index * SEGMENT_STRIDE`` so
segments parsed on different workers never collide and one document's IDs sort in reading order.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from chunker.contract.markup import (_COMMENT, _FIGURE, _HEADING, _TABLE_CLOSE, _TABLE_OPEN, LIST_ITEM, PAGE_MARKER,
                                     PIPE_SEPARATOR, REST_OF_SENTENCE, SENTENCE_END, figure_row_sentence,
                                     is_contents_title, not_a_heading, row_labelled, table_row_sentence)
from chunker.forms import label_pair, read_form
from chunker.tabletext import UNIT
from chunker.types import ConvertedBatch, Element

SEGMENT_STRIDE = 1_000_000


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


class _Scanner:
    """Line scanner that turns the contract into blocks, tracking the current page."""

    def __init__(self, default_page: int) -> None:
        self.page = default_page
        self.blocks: list[_Block] = []
        self.table_seq = 0
        self.last_table_group = ""
        self.level = 1  # the level of the last heading: a form's title goes one below it
        self.piece_start = 0  # blocks before the piece being scanned (a batch's Markdown)

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
        self.piece_start = len(self.blocks)
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
        text = " ".join(buf)
        prev = self.blocks[-1] if self.blocks else None
        if len(self.blocks) == self.piece_start and prev is not None and prev.kind == "paragraph" \
                and not SENTENCE_END.search(prev.text) and REST_OF_SENTENCE.match(text):
            # A batch that opens with the rest of the sentence the batch before stopped in: the page break fell
            # between two batches, where no converter sees both sides (pdf-text joins it inside a batch). One
            # paragraph, as on the page; alone, each half read as a fragment and a chunk could end between them.
            glue = "" if prev.text.endswith("-") and prev.text[-2:-1].isalpha() else " "
            prev.text, prev.page_end = prev.text + glue + text, self.page
            return i
        self.blocks.append(_Block("paragraph", text, self.page, self.page))
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
            path = _under(path, block.level)
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
            path = _under(path, e.level) + [(e.level, e.text)]
    return path


def _under(path: list[tuple[int, str]], level: int) -> list[tuple[int, str]]:
    """The chain a new heading at ``level`` sits under: the entries above its level, a table of contents' title
    left out (it heads its entries only)."""
    return [(lv, h) for lv, h in path if lv < level and not is_contents_title(h)]


def parse_batches(doc_id: str, batches: list[ConvertedBatch], segment_index: int = 0,
                  heading_path: list[str] | None = None, heading_levels: list[int] | None = None) -> list[Element]:
    """Elements of a segment's converted batches, in batch order, overlap (context-only) batches left out."""
    kept = sorted((b for b in batches if not b.context_only), key=lambda b: b.batch_index)
    return parse_markdown(doc_id, [(b.markdown, b.page_start) for b in kept], segment_index, heading_path,
                          heading_levels)
