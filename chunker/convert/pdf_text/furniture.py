"""Page furniture: running headers/footers, page numbers and tables of contents.

Furniture is decided over all pages of a segment at once (a header is only a header because it repeats).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable

from chunker.convert.pdf_text.textlayer import Line, PageText

_BAND = 0.11  # share of the page height searched for headers/footers at top and bottom
_EDGE_LINES = 3  # lines per band considered
MAX_NUMBERED_FURNITURE = 60  # longest running line whose numbers may change from page to page
_PAGE_NUMBER = re.compile(
    r"^(?:[-–—]\s*)?(?:page|p\.|seite|página|pagina)?\s*(?:\d{1,4}|[ivxlcdm]{1,6})"
    r"(?:\s*(?:of|/|von|de)\s*\d{1,4})?(?:\s*[-–—])?$",
    re.I,
)
_TOC_TITLE = re.compile(r"^(table\s+of\s+)?contents$|^inhalt(sverzeichnis)?$|^sommaire$|^índice$", re.I)
_TOC_ENTRY = re.compile(r"(\.\s*){4,}\s*\d{1,4}$|(\s\.){3,}\s*\d{1,4}$|\s{2,}\d{1,4}$|\S\s+\d{1,4}$")
_DOT_LEADER = re.compile(r"(\.\s*){4,}\s*\d{1,4}$|(\s\.){3,}|…{2,}")


_END_NUMBERS = re.compile(r"^(?:#[\s|.,:;–—-]*)+|(?:[\s|.,:;–—-]*#)+$")


def _norm(text: str) -> str:
    """A line with its numbers as ``#`` and without the numbers at its ends: a running footer that puts the page
    number left on even pages and right on odd ones ("44 Verizon 2022 Annual Report" / "Verizon 2022 Annual Report
    45") is one line repeating on every page, not two lines on half the pages each."""
    t = re.sub(r"\s+", " ", re.sub(r"\d+", "#", text.lower())).strip()
    return _END_NUMBERS.sub("", t).strip() or t


def _band_lines(page: PageText) -> list[tuple[int, Line]]:
    """Indexes and lines near the top and bottom edge of the page."""
    if not page.lines or page.height <= 0:
        return []
    top = [(i, ln) for i, ln in enumerate(page.lines) if ln.y1 <= page.height * _BAND]
    bottom = [(i, ln) for i, ln in enumerate(page.lines) if ln.y0 >= page.height * (1 - _BAND)]
    return top[:_EDGE_LINES] + bottom[-_EDGE_LINES:]


def _end_lines(page: PageText) -> list[tuple[int, Line]]:
    """The page's first and last line in reading order, wherever they sit: a document printed from HTML ends each
    page's text with its running footer right under the last paragraph, mid-page ("Pfizer Inc. 2021 Form 10-K 53"
    at 60 % of the height), and its page number likewise."""
    return [(i, page.lines[i]) for i in dict.fromkeys((0, len(page.lines) - 1))] if page.lines else []


def _counts(per_page: Iterable[list[tuple[int, Line]]]) -> tuple[Counter[str], Counter[str]]:
    """On how many pages each line occurs: by :func:`_norm` and exactly (a line counts once per page)."""
    seen: Counter[str] = Counter()
    exact: Counter[str] = Counter()
    for lines in per_page:
        seen.update({_norm(ln.text) for _, ln in lines})
        exact.update({ln.text.strip() for _, ln in lines})
    return seen, exact


def _repeats(text: str, seen: Counter[str], exact: Counter[str], need: int) -> bool:
    """A running header/footer: the same line on most pages, or a short line that differs only in its numbers
    ("Chapter 3 - Page 12"). A long sentence that differs only in numbers is body text that happens to start every
    page the same way, so it needs to repeat exactly."""
    if not any(c.isalpha() for c in text):
        return False  # a date or a figure at the top of a table on every page is data (page numbers go apart)
    if exact[text.strip()] >= need:
        return True
    return len(text.strip()) <= MAX_NUMBERED_FURNITURE and seen[_norm(text)] >= need


def is_page_number(text: str) -> bool:
    t = text.strip()
    return bool(t) and len(t) <= 24 and bool(_PAGE_NUMBER.match(t))


def furniture_lines(pages: list[PageText], drop_repeated: bool = True, body_size: float = 0.0) -> dict[int, set[int]]:
    """Per page (1-based number), indexes of lines that are headers, footers or page numbers.

    Lines in the edge bands are furniture when they repeat over the pages; a page's first and last line in reading
    order, wherever they sit, only when they repeat with a changing number or count the pages (:func:`_end_lines`).
    A single page cannot show a line repeating; there, with ``body_size`` known, a line in the top band set smaller
    than the body and above all body-size text is a running header, and a small line in the bottom band ending in
    a page label ("... Page 1 of 1") a running footer."""
    out: dict[int, set[int]] = {p.page: set() for p in pages}
    bands = {p.page: _band_lines(p) for p in pages}
    ends = {p.page: _end_lines(p) for p in pages}
    seen, exact = _counts(bands.values())
    # The same over the edge bands and each page's first and last line.
    seen_ends, exact_ends = _counts(bands[p.page] + ends[p.page] for p in pages)
    need = max(2, math.ceil(0.5 * len(pages)))
    numbered = _numbered_pages(pages, ends)
    for p in pages:
        numbers = []
        for i, ln in bands[p.page]:
            if is_page_number(ln.text):
                numbers.append(i)
            elif drop_repeated and len(pages) >= 2 and _repeats(ln.text, seen, exact, need):
                out[p.page].add(i)
        for i, ln in ends[p.page]:
            # A first or last line is furniture by its text alone only where it is what a running line must be:
            # repeating with a number that changes (the page's), or a number that counts the pages. A line
            # repeating unchanged there is a table's header row carried to the next page, which is data.
            if i in out[p.page] or i in numbers:
                continue
            if (p.page, i) in numbered:
                numbers.append(i)
            elif (drop_repeated and len(pages) >= 2 and exact_ends[ln.text.strip()] < need
                  and _repeats(ln.text, seen_ends, exact_ends, need)):
                out[p.page].add(i)
        if drop_repeated and len(pages) == 1 and body_size > 0:
            out[p.page] |= _small_edge_lines(p, bands[p.page], body_size)
        # A lone page number may sit just outside the band on short pages: take the last line if it is one.
        if p.lines and is_page_number(p.lines[-1].text) and p.lines[-1].y0 > p.height * 0.75:
            numbers.append(len(p.lines) - 1)
        # A number is the page's number only where nothing but furniture shares its line: the figures of a table
        # row at the top or bottom of the page are cells, not page numbers.
        out[p.page] |= {i for i in numbers if _alone(p, i, out[p.page])}
    return out


def _numbered_pages(pages: list[PageText], ends: dict[int, list[tuple[int, Line]]]) -> set[tuple[int, int]]:
    """(page, line) of the lone numbers among ``ends`` that count the pages: their value minus the page's number is
    the same on at least a quarter of the pages (and three). A year or a figure left alone at a page's end ("2020",
    the last cell of a column) does not keep step with the pages."""
    found: dict[int, list[tuple[int, int]]] = {}
    for p in pages:
        for i, ln in ends[p.page]:
            t = ln.text.strip().strip("-–— ")
            if t.isdigit() and is_page_number(ln.text):
                found.setdefault(int(t) - p.page, []).append((p.page, i))
    least = max(3, math.ceil(0.25 * len(pages)))
    return {hit for hits in found.values() if len(hits) >= least for hit in hits}


def _alone(page: PageText, i: int, furniture: set[int]) -> bool:
    ln = page.lines[i]
    mid = (ln.y0 + ln.y1) / 2
    return not any(k != i and k not in furniture and other.y0 - 1 <= mid <= other.y1 + 1
                   for k, other in enumerate(page.lines))


_PAGE_LABEL_END = re.compile(r"(?:\bpage\s*\d{1,4}(?:\s*(?:of|/)\s*\d{1,4})?|\b\d{1,4}\s*(?:of|/)\s*\d{1,4})$", re.I)


def _small_edge_lines(page: PageText, band: list[tuple[int, Line]], body_size: float) -> set[int]:
    small = 0.9 * body_size
    first_body = min((ln.y0 for ln in page.lines if ln.size >= small), default=page.height)
    out = set()
    for i, ln in band:
        if ln.size >= small:
            continue
        if ln.y1 <= page.height * _BAND and ln.y1 <= first_body:
            out.add(i)
        elif ln.y0 >= page.height * (1 - _BAND) and _PAGE_LABEL_END.search(ln.text.strip()):
            out.add(i)
    return out


def toc_lines(page: PageText, skip: set[int]) -> set[int]:
    """Indexes of a table of contents on this page: its title and the entries after it, or a run of dot leaders."""
    found: set[int] = set()
    lines = page.lines
    i = 0
    while i < len(lines):
        if i in skip:
            i += 1
            continue
        text = lines[i].text
        if _TOC_TITLE.match(text.strip().rstrip(":")):
            j, entries = i + 1, []
            while j < len(lines) and (j in skip or _TOC_ENTRY.search(lines[j].text) or _continues_entry(lines, j)):
                entries.append(j)
                j += 1
            if entries:
                found.add(i)
                found.update(entries)
                i = j
                continue
        i += 1
    # Dot leaders alone (a TOC without a title, or continuing from the previous page).
    leaders = [i for i, ln in enumerate(lines) if i not in skip and _DOT_LEADER.search(ln.text)]
    if len(leaders) >= 3:
        found.update(leaders)
    return found


def _continues_entry(lines: list[Line], j: int) -> bool:
    """A wrapped TOC entry: this line has no page number but the next one does and is indented alike."""
    return j + 1 < len(lines) and bool(_DOT_LEADER.search(lines[j + 1].text)) and len(lines[j].text) < 90
