"""Heading levels from font statistics gathered over a whole segment.

Levels come from the segment, not the batch, so a 12 pt heading is ``##`` in every batch of a document.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from chunker.convert.pdf_text.textlayer import Line, PageText

_LIST_START = re.compile(r"^\s*([•●▪■◦‣∙·\-–*]|\(?\d{1,3}[.)]|\(?[a-zA-Z][.)]|[ivxIVX]{1,4}[.)])\s+")
_SENTENCE_END = re.compile(r"[.,;]$")
_AMOUNT = re.compile(r"[$€£¥]\s?\(?\d[\d,.]*|\(?\d{1,3}(?:,\d{3})+(?:\.\d+)?\)?")
_NUMBER_WORD = re.compile(r"^\(?[$€£¥]?\d[\d,.]*%?\)?$")
# Sizes this much above the body size count as heading sizes.
_SIZE_RATIO = 1.12
_MAX_HEADING_CHARS = 160
# Words a sentence repeats without being a table row ("of the ... of the ... of the").
_FUNCTION_WORDS = frozenset("a an and as at by for from in is of on or the to with".split())
_CELL_GAP = 2.0  # a gap this many times the type size between runs of one line separates cells, not words
# A note under a table or at a page's foot: a mark, then the note's sentence. Set a point above the body in some
# filings, it read as a heading and titled every chunk after it ("(2) Included in device payment plan agreement
# receivables presented in Note 8. ..." over 316 chunks of one 10-K).
_NOTE_MARK = re.compile(r"^(\(\d{1,2}\)|\([a-z]\)|\*{1,3}|[†‡])\s*\S")
# "Note: Table may not foot due to rounding" under a statement: a note by its first word, however short.
_NOTE_WORD = re.compile(r"^(Notes?|Sources?)\s*:\s*\S")
_NOTE_SENTENCE = re.compile(r"[a-z)]\.(\s|$)")

# A heading wrapped past this many characters that reads as prose (a sentence ends inside it, or it ends like one)
# is a paragraph set in heading type: a press release's bold opening paragraph, a plan's clause in bold, which had
# titled every chunk after them (101 of the filings' chunks). Titles this long exist ("Reconciliation of adjusted
# Earnings before interest, tax, ... and Free Cash Flow"); they do not end a sentence.
_PROSE_HEADING_CHARS = 160
_PROSE = re.compile(r"[a-z0-9)”’\"][.;]\s+[A-Z(“\"]|[a-z0-9)”’\"][.;:]['\"”’)]?$")
# A table's lead-in set in heading type ("Consolidated net sales were as follows:", "The components of goodwill are
# shown in the following table:"): a sentence in sentence case that ends with a colon and says something is, was or
# follows. As a heading it opened a top-level section, and the table under it lost its place in the document. (The
# planner's lead-in test, chunker.plan.leadin, takes any short line ending with a colon: "FINANCIAL RESULTS:" too.)
_LEAD_IN_VERB = re.compile(r"\b(?:as follows|follows?|following|below|is|are|was|were|consist(?:s|ed)? of|"
                           r"includes?|included|shown|set forth|summari[sz]ed)\b")
# A numbered title set in bold on its own line ("7. Leases", "2. Acquisitions, Divestitures and Asset Sales"): how
# filings number their notes. Read as a list's first item, it left each note under the previous note's last heading
# (Best Buy's leases under "Fair Value of Financial Instruments"); 61 such titles in the filings.
_NUMBERED = re.compile(r"^\s*\d{1,2}\.\s+(?=\S)")
_WORDS = re.compile(r"[^\W\d_]+")


@dataclass
class FontStats:
    body_size: float
    heading_sizes: list[float]  # descending; index + 1 = level
    # Where the segment's text lines usually start and end (points; 0: unknown): a title block stands inside them.
    text_left: float = 0.0
    text_right: float = 0.0
    # The gap between two lines of one body paragraph, in ems of their size (0: too few wrapped lines to say).
    leading: float = 0.0

    @property
    def wrap_gap(self) -> float:
        """The widest gap (ems) at which a line still wraps the paragraph above: half an em and a little more in
        most documents, a little over the segment's own leading where that is generous, never a full em."""
        return min(0.95, max(0.55, 1.25 * self.leading))

    @property
    def bold_level(self) -> int:
        """Level given to bold body-size headings: one below the smallest heading size."""
        return min(len(self.heading_sizes) + 1, 6)

    def size_level(self, size: float) -> int:
        """Level of a line of this size, 0 when it is body text."""
        if size < self.body_size * _SIZE_RATIO:
            return 0
        for i, s in enumerate(self.heading_sizes):
            if size >= s - 0.4:
                return min(i + 1, 6)
        return min(len(self.heading_sizes), 6)


def font_stats(pages: list[PageText], skip: dict[int, set[int]] | None = None) -> FontStats:
    """Body size = the size with the most characters; larger sizes used by short lines become heading levels.

    ``skip``: per page number, indexes of lines that do not vote for the body size (table text: a statement set
    in small type has more characters than the prose around it, and the prose would otherwise read as headings)."""
    chars: Counter[float] = Counter()
    prose: Counter[float] = Counter()
    for p in pages:
        chars.update(p.sizes)
        prose.update(p.sizes)
        for i in (skip or {}).get(p.page, ()):
            if 0 <= i < len(p.lines):
                ln = p.lines[i]
                prose[round(ln.size, 1)] -= sum(1 for ch in ln.chars if not ch.isspace())
    prose = +prose  # drop sizes left with nothing
    if sum(prose.values()) >= max(200, 0.2 * sum(chars.values())):
        chars = prose  # enough prose to say what body text looks like; else (a page that is one table) count all
    if not chars:
        return FontStats(10.0, [])
    body = chars.most_common(1)[0][0]
    # Sizes are clustered to half points so 11.95 and 12.0 share a level.
    heading_chars: Counter[float] = Counter()
    for p in pages:
        for ln in p.lines:
            if ln.size >= body * _SIZE_RATIO and len(ln.text) <= _MAX_HEADING_CHARS:
                heading_chars[round(ln.size * 2) / 2] += len(ln.text)
    sizes = sorted((s for s in heading_chars), reverse=True)
    # More than five heading sizes means display type (cover pages, posters): keep the largest five.
    left, right = _text_edges(pages)
    return FontStats(body, sizes[:5], left, right, _leading(pages, body))


def _leading(pages: list[PageText], body: float) -> float:
    """The usual gap between a body line that wrapped (40 characters or more) and the next line at its left edge,
    in ems: the median over the segment, 0 under 8 such pairs. Most documents set it well under half an em, and a
    gap of 0.55 em parts paragraphs; a press release set with generous leading (0.76 em) would have every line
    of its prose read as a paragraph of its own."""
    ratios = []
    for p in pages:
        for a, b in zip(p.lines, p.lines[1:]):
            if abs(a.size - body) < 0.3 and abs(b.size - body) < 0.3 and abs(a.x0 - b.x0) < 2 and len(a.text) >= 40:
                gap = b.y0 - a.y1
                if 0 < gap < 1.2 * body:
                    ratios.append(gap / body)
    if len(ratios) < 8:
        return 0.0
    ratios.sort()
    return ratios[len(ratios) // 2]


def _text_edges(pages: list[PageText]) -> tuple[float, float]:
    """Where the segment's long lines start and end: the 10th percentile of their starts and the 90th of their
    ends (a few indented, centred or ragged lines do not move them)."""
    starts, ends = [], []
    for p in pages:
        for ln in p.lines:
            if len(ln.text) >= 40:
                starts.append(ln.x0)
                ends.append(ln.x1)
    if not ends:
        return 0.0, 0.0
    starts.sort()
    ends.sort()
    return starts[int(0.1 * len(starts))], ends[min(len(ends) - 1, int(0.9 * len(ends)))]


def is_list_start(text: str) -> bool:
    return bool(_LIST_START.match(text))


def _mostly_numbers(text: str) -> bool:
    """Three or more number words and no more other words than numbers (a row of column years)."""
    words = text.split()
    numbers = sum(1 for w in words if _NUMBER_WORD.match(w))
    return numbers >= 3 and numbers >= len(words) - numbers


def heading_level(line: Line, stats: FontStats, standalone: bool) -> int:
    """Heading level of a line, 0 for body text.

    ``standalone``: the line is its own block (space above, not running into the next line as a paragraph).
    """
    text = line.text
    if not text or len(text) > _MAX_HEADING_CHARS or line.mono:
        return 0
    if not any(c.isalpha() for c in text):
        return 0
    if len(_AMOUNT.findall(text)) >= 2:
        # A line carrying two or more amounts ("Total debt $ 49,046 $ 42,051") is a table row, never a heading.
        return 0
    if _mostly_numbers(text):
        # "2023 2024 2025 2026 2027 After 2026": a table's column labels set in a heading's type, never a heading
        # (every chunk under it would carry the years as its breadcrumb).
        return 0
    if _NOTE_WORD.match(text) or (_NOTE_MARK.match(text) and (len(text) > 80 or _NOTE_SENTENCE.search(text))):
        return 0  # a table's or a page's note, whatever its type size
    level = stats.size_level(line.size)
    if not level and line.bold and standalone and line.size > stats.body_size - 0.6 and len(text) <= 100:
        # (A bold line a little larger than the body, below the size-heading threshold, is one too.)
        # A bold line on its own at body size is a run-in heading unless it reads like a sentence or list item.
        if _SENTENCE_END.search(text) or (is_list_start(text) and not numbered_title(line)):
            return 0
        level = stats.bold_level
    if level and (_is_cells(line) or _repeats_a_phrase(text)):
        return 0
    return level


def numbered_title(line: Line) -> bool:
    """Whether a line is a numbered title ("7. Leases"; see _NUMBERED), not a list's item: after its number, every
    visible character is bold, the words are in title case (each word of three letters or more, function words
    aside, starts with a capital) and it ends as no sentence or label does. A bold footnote ("1. Relates to the
    acquisition of ...") or a step ("1. Install the app") is no title."""
    m = _NUMBERED.match(line.text)
    rest = line.text[m.end():].strip() if m else ""
    if not rest or rest[-1] in ".,;:" or not rest[0].isupper():
        return False
    words = _WORDS.findall(rest)
    if not any(len(w) >= 3 for w in words) \
            or any(w[0].islower() for w in words if len(w) >= 3 and w.casefold() not in _FUNCTION_WORDS):
        return False
    visible = [b for ch, b in zip(line.chars, line.bolds) if not ch.isspace()]
    n = sum(1 for ch in rest if not ch.isspace())
    return len(visible) >= n and all(visible[-n:])


def _repeats_a_phrase(text: str) -> bool:
    """Whether two words in a row occur three times or more and make half the line: cells of a table row read
    across ("No Survey No Survey No Survey -* 10.2% -* 16.3%", a row that headed 315 chunks of one report), never
    a title; a sentence that says "per share" three times is mostly other words."""
    words = text.casefold().split()
    pairs = Counter(p for p in zip(words, words[1:]) if not set(p) & _FUNCTION_WORDS)
    n = max(pairs.values(), default=0)
    return n >= 3 and 4 * n >= len(words)


def _is_cells(line: Line) -> bool:
    """Whether the line is three or more runs of text far apart: the cells of a table row ("Common Stock, par
    value $0.10 | VZ | New York Stock Exchange" on a cover page) or a chart's legend ("Verizon | S&P 500 | S&P
    500 Telecom Services"), never a title, however large its type. A heading is one run; a gap of twice the type
    size is no word space (a cover page's cells stand 80-100 pt apart in 11-pt type)."""
    return len(line.segments(max(line.size, 1.0) * _CELL_GAP)) >= 3


def prose_in_heading_type(text: str) -> bool:
    """Whether a heading grown by its wraps is a paragraph set in heading type (see _PROSE_HEADING_CHARS)."""
    return len(text) > _PROSE_HEADING_CHARS and bool(_PROSE.search(text))


def lead_in_sentence(text: str) -> bool:
    """Whether a line (or wrapped lines) in heading type is a table's lead-in sentence (see _LEAD_IN_VERB)."""
    words = text.split()
    letters = [c for c in text if c.isalpha()]
    return (text.rstrip().endswith(":") and len(words) >= 5 and bool(letters)
            and sum(c.isupper() for c in letters) < 0.5 * len(letters) and bool(_LEAD_IN_VERB.search(text)))
