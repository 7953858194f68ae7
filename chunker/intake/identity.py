"""A document's identity: what tells it apart from documents with the same wording (a company's filings of other
quarters, the same manual for another model): its title or issuer, its kind, and its period or date.

Found once per document at intake, from its text layer, and carried by every chunk (ARCHITECTURE.md, "document
identity"). Three generic sources, none tied to a form or a company:

* the title block: the lines of the first page set clearly larger than its body text, in reading order;
* the issuer: the first line of the first page that is a name with a legal form ("CVS HEALTH CORPORATION",
  "General Mills, Inc.", "Amcor plc"), when the title block does not already hold it: many filings set the issuer's
  name at their body size, where the title block cannot see it;
* the period: the first phrase on the first pages that names a period or date ("For the Quarterly Period Ended
  December 31, 2022", "fiscal year ended January 28, 2023", "Date of Report ...: July 1, 2022"), else the first
  full date;
* running furniture: a line repeated at the top or bottom of many pages ("Amcor plc Quarterly Report on Form 10-Q",
  "Apple Inc. | Q2 2023 Form 10-Q | 12"), page numbers taken out.

A scanned document (no text layer) has no identity here; its file name still goes into the BM25 text.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import TYPE_CHECKING

from chunker.convert.pdf_text.furniture import MAX_NUMBERED_FURNITURE
from chunker.convert.pdf_text.textlayer import WORD_BREAK, Line, PageText, join_wrapped, read_page
from chunker.convert.render import PDFIUM_LOCK

if TYPE_CHECKING:  # annotations only: pdfium is imported where a page is read
    import pypdfium2 as pdfium

MAX_CHARS = 240  # an identity is a label, not a summary: it rides along with every chunk of the document
_SAMPLE_PAGES = 6  # pages whose bands are read for running headers and footers, spread over the document
_BAND = 0.1  # share of the page height at top and bottom where running lines sit
_MONTH = r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|" \
         r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
_DATE = rf"(?:{_MONTH}\s+\d{{1,2}},?\s+(?:19|20)\d{{2}}|\d{{1,2}}\s+{_MONTH}\s+(?:19|20)\d{{2}})"
# Period phrases, the most telling kind first: a period that ended, then a report's own date, then "as of".
_PERIODS = [re.compile(p, re.I) for p in (
    rf"\b(?:for\s+the\s+)?(?:fiscal\s+|quarterly\s+|financial\s+)?(?:year|quarter|period|half(?:-year)?|"
    rf"(?:three|six|nine|twelve|thirteen|fourteen|twenty-six|fifty-two|fifty-three|\d{{1,2}})[\s-]+(?:months|weeks))"
    rf"[\w\s,()“”\"'-]{{0,40}}?\b(?:ended|ending)\s+{_DATE}",
    rf"\b(?:date\s+of\s+report|dated)\b[^:\n]{{0,60}}:?\s*{_DATE}",
    rf"\bas\s+of\s+{_DATE}",
)]
_ANY_DATE = re.compile(_DATE, re.I)
_PAGE_NO = re.compile(r"(?:\bpage\s*)?\b\d{1,4}(?:\s*(?:of|/)\s*\d{1,4})?\s*$|^\s*\d{1,4}\b", re.I)
# Front matter's page labels ("... 10-K i", "... xiv"): a lower-case numeral up to xxxix ("PART II" and "civil" stay).
_ROMAN_PAGE_NO = re.compile(r"\s(?=[ivx]+\s*$)x{0,3}(?:ix|iv|v?i{0,3})\s*$")
_BOILERPLATE = re.compile(r"^(?:table\s+of\s+contents|contents|index|continued|\(continued\))$", re.I)


def document_identity(pdf_path: str, num_pages: int, password: str | None = None) -> str:
    """The identity line of a PDF ("" when its first pages hold no text). Never raises for a bad page.

    Cheap by design (intake runs it on every document): only the first page with text is read with font sizes;
    the next two pages are read as plain text, and the sampled pages only in their top and bottom bands."""
    import pypdfium2 as pdfium

    first: PageText | None = None
    front: list[str] = []
    bands: list[list[str]] = []
    title = ""
    with PDFIUM_LOCK:
        try:
            doc = pdfium.PdfDocument(pdf_path, password=password)
        except Exception:  # noqa: BLE001 - identity is a nicety: an unreadable file is reported by its checks
            return ""
        try:
            try:
                title = str(doc.get_metadata_dict().get("Title") or "")
            except Exception:  # noqa: BLE001 - broken metadata is no reason to lose the rest
                title = ""
            for n in _sample(num_pages):
                try:
                    page = doc[n - 1]
                    tp = None
                    try:
                        tp = page.get_textpage()  # one text extraction per page, shared by the reads below
                        if first is None and n <= 3:
                            read = read_page(page, n, styles=False, textpage=tp)
                            if read.lines:
                                first = read
                                front.append(" ".join(ln.text for ln in sorted(read.lines, key=lambda ln: ln.y0)))
                        elif n <= 3:
                            front.append(" ".join(tp.get_text_range().split()))
                        bands.append(_band_lines(page, tp) + _end_lines(tp))
                    finally:
                        if tp is not None:
                            tp.close()
                        page.close()
                except Exception:  # noqa: BLE001 - one bad page leaves the others
                    continue
        finally:
            doc.close()
    return compose(first, front, bands, title)


def _band_lines(page: "pdfium.PdfPage", tp: "pdfium.PdfTextPage") -> list[str]:
    """Text lines in the page's top and bottom bands (PDF coordinates: the origin is at the bottom)."""
    width, height = page.get_size()
    top = tp.get_text_bounded(0, height * (1 - _BAND), width, height)
    bottom = tp.get_text_bounded(0, 0, width, height * _BAND)
    return [ln.strip() for ln in (top + "\n" + bottom).splitlines() if ln.strip()]


def _end_lines(tp: "pdfium.PdfTextPage") -> list[str]:
    """The page's first and last text line in content order, when short enough to be a running line: a document
    printed from HTML writes its footer right under the page's last paragraph, at whatever height that ends, outside
    the bands (as the converter's furniture rule, chunker/convert/pdf_text/furniture.py). A long line is body text
    that happens to open or close pages alike."""
    lines = [ln.strip() for ln in tp.get_text_range().splitlines() if ln.strip()]
    ends = [lines[0], lines[-1]] if len(lines) > 1 else lines
    return [ln for ln in ends if len(ln) <= MAX_NUMBERED_FURNITURE]


def _sample(num_pages: int) -> list[int]:
    """The first three pages and up to ``_SAMPLE_PAGES`` spread over the rest."""
    first = list(range(1, min(num_pages, 3) + 1))
    if num_pages <= 3:
        return first
    step = max(1, num_pages // _SAMPLE_PAGES)
    return sorted(set(first) | set(range(4, num_pages + 1, step)))


def compose(first: PageText | None, front: list[str], bands: list[list[str]], meta_title: str = "") -> str:
    """Title block (the metadata title where the first page sets none), period and running lines, as one line
    without repeats."""
    parts: list[str] = title_block(first) if first is not None else []
    if not parts and _telling_title(meta_title):
        parts.append(meta_title)
    issuer = issuer_line(first) if first is not None else ""
    if issuer:
        parts.append(issuer)
    period = find_period(front)
    if period:
        parts.append(period)
    parts += running_lines(bands)
    out: list[str] = []
    seen: set[str] = set()
    for p in parts:
        p = re.sub(r"\s+", " ", p).strip(" |;,-")
        key = p.lower()
        if p and key not in seen and not any(key in s for s in seen):
            seen.add(key)
            out.append(p)
    text = "; ".join(out)
    return text if len(text) <= MAX_CHARS else text[:MAX_CHARS].rsplit(" ", 1)[0]


_WORDY = re.compile(r"[A-Za-z]{2,}")
_TOOL_TITLE = re.compile(r"^(?:microsoft\s+\w+\s*-|untitled|document\d*$|anonymous$)|\.(?:docx?|pdf|indd|xlsx?)$", re.I)


def _telling_title(title: str) -> bool:
    """A metadata title worth keeping: words, not a file name, a tool's default or an archive's accession code."""
    t = title.strip()
    return 3 <= len(t) <= 160 and len(_WORDY.findall(t)) >= 2 and not _TOOL_TITLE.search(t)


def _body_size(page: PageText) -> float:
    return max(page.sizes, key=lambda s: page.sizes[s]) if page.sizes else 0.0


def title_block(page: PageText, max_lines: int = 4) -> list[str]:
    """Lines of the first page set at least 1.3 times its body size (the largest first, at most ``max_lines``),
    top to bottom; a title wrapped over lines of one size is one."""
    body = _body_size(page)
    if body <= 0:
        return []
    big = [ln for ln in page.lines if ln.size >= 1.3 * body and len(ln.text) >= 3 and any(c.isalpha() for c in ln.text)]
    big.sort(key=lambda ln: (-round(ln.size), ln.y0))
    out: list[str] = []
    last: Line | None = None
    # Joined as the converter joins a wrapped heading (blocks.py): a title broken at a soft hyphen ("Pi-" / "lots")
    # is one word again, and a page that marks its hyphenation with soft hyphens keeps its hard ones.
    keep_hard = any(ln.soft_end for ln in page.lines)
    for ln in sorted(big[:max_lines], key=lambda ln: (ln.y0, ln.x0)):
        if last is not None and abs(last.size - ln.size) < 0.5 and 0 <= ln.y0 - last.y1 < 0.8 * ln.size:
            out[-1] = join_wrapped(out[-1] + (WORD_BREAK if last.soft_end else ""), ln.text, keep_hard)
        else:
            out.append(ln.text)
        last = ln
    return out


# Legal forms that end a company's name; generic company law, no list of companies or forms.
_LEGAL_FORM = re.compile(
    r"(?:,?\s+(?:inc|incorporated|corporation|corp|company|co|plc|ltd|limited|llc|l\.l\.c|l\.p|lp|n\.v|s\.a|ag|se|"
    r"gmbh|s\.p\.a|holdings))\.?$", re.I)
_NAME_WORD = re.compile(r"^(?:[A-Z0-9&][\w&.,'’-]*|of|and|the|de|&)$")


def issuer_line(page: PageText) -> str:
    """The first line of ``page`` (top to bottom) that is a short name ending in a legal form, "" when none: the
    issuer of a filing, a report or a release. A line with sentence words in it (lowercase words other than
    "of", "and", "the") is prose that happens to end in "company", not a name."""
    for ln in sorted(page.lines, key=lambda ln: (ln.y0, ln.x0)):
        text = ln.text.strip(" ;:|·-–—")
        words = text.rstrip(".").split()
        # The legal form itself may be lowercase ("plc"); the words before it are capitalised or name joiners.
        if 2 <= len(words) <= 7 and _LEGAL_FORM.search(text.rstrip(".")) and \
                all(_NAME_WORD.match(w) for w in words[:-1]):
            return text
    return ""


def find_period(texts: list[str]) -> str:
    """The first pages' period phrase of the most telling kind (see ``_PERIODS``); among several of a kind on one
    page the latest-dated (a release compares the reported period with earlier ones); else the first full date."""
    for pattern in _PERIODS:
        for text in texts:
            found = [m.group(0).strip() for m in pattern.finditer(text)]
            if found:
                return max(found, key=lambda f: (_date_key(f), -found.index(f)))
    for text in texts:
        m = _ANY_DATE.search(text)
        if m:
            return m.group(0).strip()
    return ""


_MONTHS = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]


def _date_key(phrase: str) -> tuple[int, int, int]:
    """(year, month, day) of the last date in ``phrase``, for ordering."""
    dates = list(_ANY_DATE.finditer(phrase))
    if not dates:
        return (0, 0, 0)
    d = dates[-1].group(0).lower()
    year = int(re.findall(r"(?:19|20)\d{2}", d)[-1])
    month = next((k + 1 for k, m in enumerate(_MONTHS) if m in d), 0)
    day = int(re.findall(r"\b\d{1,2}\b", d)[0]) if re.findall(r"\b\d{1,2}\b", d) else 0
    return (year, month, day)


def running_lines(bands: list[list[str]]) -> list[str]:
    """Lines in the top or bottom band of at least half the sampled pages (three at least), page numbers taken
    out: the document's running header or footer."""
    if len(bands) < 3:
        return []
    seen: Counter[str] = Counter()
    shown: dict[str, str] = {}
    for lines in bands:
        keys = set()
        for line in lines:
            text = _PAGE_NO.sub("", _ROMAN_PAGE_NO.sub("", line)).strip(" |·-–—")
            if len(text) < 4 or not any(c.isalpha() for c in text) or _BOILERPLATE.match(text):
                continue
            key = re.sub(r"\d+", "#", text.lower())
            keys.add(key)
            shown.setdefault(key, text)
        seen.update(keys)
    need = max(3, (len(bands) + 1) // 2)
    return [shown[k] for k, n in seen.most_common(2) if n >= need]
