"""Characters, lines and font facts from a page's text layer (pypdfium2).

Coordinates everywhere in this package are PDF points with a top-left origin (y grows downwards), the same
convention the figure ``bbox`` of the Markdown contract uses.
"""

from __future__ import annotations

import ctypes
import functools
import math
import re
from dataclasses import dataclass, field

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from chunker.convert.pdf_text.linesize import MIN_SIZE, finish_line, gap_size, goes_on, rescale_oversized

# pdfium hands soft hyphens back as U+00AD, U+FFFE (LaTeX/pandoc PDFs) or U+0002.
SOFT_HYPHENS = "\u00ad\ufffe\u0002"
# What a segment's text ends with when a soft hyphen followed it: the word goes on in the next fragment.
WORD_BREAK = "\u00ad"
CURRENCY = "$€£¥₹"
_BOLD_NAME = re.compile(r"bold|black|heavy|semibold|demi|[-,]bd\b|\bbd\b", re.I)
_ITALIC_NAME = re.compile(r"italic|oblique|[-,]it\b", re.I)
_MONO_NAME = re.compile(r"mono|courier|consol|typewriter|lmtt|cmtt", re.I)
REPLACEMENT = "\ufffd"
# A glyph under this many points tall, at a reported size under linesize's MIN_SIZE, is not for reading: text set at
# 1 pt (in white, in exported agency reports: a placeholder and a record GUID beside every heading). Fine print at
# 4 pt stands over 2 pt; text drawn through a scaled form reports size 1.0 with full-height glyphs, so the height
# decides, not the size. A letter or digit decides; the punctuation right after it goes with it. Punctuation alone
# never does: in filings printed from HTML a dot or a dash reports size 1.0 with a box under 1.5 pt (2,784 such
# characters on financebench-dev, none of them hidden).
HIDDEN_PT = 1.5


def char_at(textpage: pdfium_c.FPDF_TEXTPAGE, i: int, n: int) -> tuple[str, int]:
    """The character at pdfium char index ``i`` and how many indexes it takes.

    pdfium reports one UTF-16 code unit per index: a character outside the Basic Multilingual Plane (mathematical
    alphanumerics, emoji, CJK extension B) is a high surrogate at ``i`` and its low surrogate at ``i + 1``, both with
    the same box. They are combined here; a surrogate without its partner becomes U+FFFD. Returns ("", 1) for
    code 0 and values outside Unicode.
    """
    code = pdfium_c.FPDFText_GetUnicode(textpage, i)
    if 0xD800 <= code <= 0xDBFF:
        low = pdfium_c.FPDFText_GetUnicode(textpage, i + 1) if i + 1 < n else 0
        if 0xDC00 <= low <= 0xDFFF:
            return chr(0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)), 2
        return REPLACEMENT, 1
    if 0xDC00 <= code <= 0xDFFF:
        return REPLACEMENT, 1
    return (chr(code) if 0 < code < 0x110000 else ""), 1


@dataclass(frozen=True)
class FontStyle:
    bold: bool
    italic: bool
    mono: bool


@dataclass
class Line:
    """One visual line: its characters with their horizontal extents, and its dominant style."""

    chars: list[str] = field(default_factory=list)
    xs0: list[float] = field(default_factory=list)
    xs1: list[float] = field(default_factory=list)
    bolds: list[bool] = field(default_factory=list)
    x0: float = 1e9
    y0: float = 1e9
    x1: float = -1e9
    y1: float = -1e9
    size: float = 0.0  # dominant font size of the line's visible characters
    bold: bool = False  # most visible characters are bold
    italic: bool = False
    mono: bool = False
    soft_end: bool = False  # the line ended on a soft hyphen: the word continues on the next line
    soft_after: set[int] = field(default_factory=set)  # char indexes a soft hyphen followed (a cell's line end)

    @property
    def text(self) -> str:
        return "".join(self.chars).strip()

    def segments(self, gap: float, cuts: list[float] | None = None,
                 split_currency: bool = False) -> list[tuple[str, float, float]]:
        """Runs of the line split where the horizontal gap between characters exceeds ``gap`` points, or where
        the run would cross one of the x positions in ``cuts`` (ruled column separators). A run whose last
        character was followed by a soft hyphen ends with :data:`WORD_BREAK` (see :func:`join_wrapped`).
        ``split_currency``: a currency sign after a figure starts a run of its own ("508,014 $ 976,856" in a
        statement is two columns' figures with the second one's sign between them, however close); so does one after
        a dash that stands for none ("$ — $ 22": a dash right-aligned in its column, the next column's sign set
        flush left just after it, had read as one cell "— $" and the row as prose)."""
        out: list[tuple[str, float, float]] = []
        cur: list[str] = []
        sx0 = sx1 = 0.0
        last = -1  # index of the run's last visible character

        def close() -> None:
            text = "".join(cur).strip()
            out.append((text + WORD_BREAK if last in self.soft_after or (last == len(self.chars) - 1 and self.soft_end)
                        else text, sx0, sx1))

        for k, (ch, a, b) in enumerate(zip(self.chars, self.xs0, self.xs1)):
            if ch.isspace():
                if cur:
                    cur.append(" ")
                continue
            crossed = bool(cuts) and any(sx1 <= c <= (a + b) / 2 for c in cuts or ())
            sign = split_currency and ch in CURRENCY and len(cur) >= 2 and cur[-1] == " " \
                and (cur[-2].isdigit() or cur[-2] in ")%—–")
            if cur and (a - sx1 > gap or crossed or sign):
                close()
                cur = []
            if not cur:
                sx0 = a
            cur.append(ch)
            sx1 = max(sx1, b)
            last = k
        if cur:
            close()
        return out

    def bold_prefix(self) -> int:
        """Number of leading characters (ignoring spaces) set in bold; 0 when the line starts regular."""
        n = 0
        for ch, b in zip(self.chars, self.bolds):
            if ch.isspace():
                n += 1
                continue
            if not b:
                break
            n += 1
        return n


@dataclass
class PageText:
    page: int  # 1-based
    width: float
    height: float
    lines: list[Line]
    n_chars: int  # visible characters
    sizes: dict[float, int] = field(default_factory=dict)  # rounded font size -> visible characters
    ocr: bool = False  # lines came from OCR, not the text layer


def join_wrapped(first: str, second: str, keep_hard: bool = False) -> str:
    """Two fragments of text that wrapped (a table cell or a heading over two lines) as one. A fragment ending in
    :data:`WORD_BREAK` (a soft hyphen) runs on without a space; so does one ending in a hard hyphen after a letter
    when the next starts in lower case, unless ``keep_hard`` (the document marks hyphenation with soft hyphens, so
    its hard hyphens are real)."""
    first, second = first.rstrip(" "), second.lstrip(" ")
    if not first:
        return second
    if not second:
        return first
    if first.endswith(WORD_BREAK):
        return first[:-1] + second
    if first.endswith("-") and len(first) > 1 and first[-2].isalpha() and second[:1].islower():
        return first + second if keep_hard else first[:-1] + second
    return first + " " + second


def style_from_name(name: str, weight: int, flags: int) -> FontStyle:
    """Bold/italic/mono from the font's name, weight and descriptor flags (weight is 0 for base-14 fonts)."""
    bold = weight >= 600 or bool(_BOLD_NAME.search(name)) or bool(flags & (1 << 18))
    italic = bool(_ITALIC_NAME.search(name)) or bool(flags & (1 << 6))
    mono = bool(_MONO_NAME.search(name)) or bool(flags & 1)
    return FontStyle(bold, italic, mono)


class _Calls:
    """The per-character pdfium calls of :func:`read_page`, as ctypes prototypes over plain addresses.

    pypdfium2's bindings type every handle as a pointer class: each call checks and converts its arguments, and a
    text object comes back as a pointer instance that needs ``ctypes.cast`` to be compared. Over the same C
    functions (pypdfium2_raw's exported symbols), addresses as ``c_void_p`` and the four box values written into
    one array make the read about twice as fast, with the same results."""

    def __init__(self) -> None:
        from ctypes import CFUNCTYPE, c_double, c_int, c_uint, c_void_p

        def proto(fn: object, res: object, *args: object) -> object:
            return CFUNCTYPE(res, *args)(ctypes.cast(fn, c_void_p).value)

        vp = c_void_p
        self.unicode = proto(pdfium_c.FPDFText_GetUnicode, c_uint, vp, c_int)
        self.generated = proto(pdfium_c.FPDFText_IsGenerated, c_int, vp, c_int)
        self.box = proto(pdfium_c.FPDFText_GetCharBox, c_int, vp, c_int, vp, vp, vp, vp)
        self.size = proto(pdfium_c.FPDFText_GetFontSize, c_double, vp, c_int)
        self.matrix = proto(pdfium_c.FPDFText_GetMatrix, c_int, vp, c_int, vp)
        self.text_object = proto(pdfium_c.FPDFText_GetTextObject, vp, vp, c_int)


@functools.cache  # the prototypes are constants of the loaded library: built once per process, never changed
def _calls() -> _Calls:
    return _Calls()


class _FontCache:
    """Font style per text object: pdfium's per-character font calls are the slow part, objects are few."""

    def __init__(self) -> None:
        self._by_obj: dict[int, FontStyle] = {}
        self._buf = ctypes.create_string_buffer(256)

    def style(self, obj: int | None) -> FontStyle:
        """The style of the text object at address ``obj`` (None: a character without one)."""
        key = obj or 0
        hit = self._by_obj.get(key)
        if hit is not None:
            return hit
        name, weight, flags = "", 0, 0
        if key:
            font = pdfium_c.FPDFTextObj_GetFont(ctypes.cast(key, pdfium_c.FPDF_PAGEOBJECT))
            if font:
                n = pdfium_c.FPDFFont_GetBaseFontName(font, self._buf, len(self._buf))
                name = self._buf.raw[: max(0, n - 1)].decode("latin-1", "replace")
                weight = pdfium_c.FPDFFont_GetWeight(font)
                flags = pdfium_c.FPDFFont_GetFlags(font)
        st = style_from_name(name.split("+")[-1], weight, flags)
        self._by_obj[key] = st
        return st


_NO_STYLE = FontStyle(False, False, False)


# A line just opened: its extent (x0, y0, x1, y1) empty, its style counts (bold, italic, mono, visible) zero.
_OPEN = (1e9, 1e9, -1e9, -1e9, 0, 0, 0, 0)


def _close(line: Line, extent: tuple[float, float, float, float], sizes: dict[float, int], counts: tuple[int, ...],
           page_sizes: dict[float, int], lines: list[Line]) -> Line:
    """Ends ``line`` (x0, y0, x1, y1 = ``extent``; bold, italic, mono, visible = ``counts``), kept when it has
    text; returns the next line, empty."""
    if "".join(line.chars).strip():
        line.x0, line.y0, line.x1, line.y1 = extent
        finish_line(line, sizes, *counts, page_sizes)
        if line.size >= MIN_SIZE or line.y1 - line.y0 >= HIDDEN_PT or set(line.chars) - {"_", " "}:
            lines.append(line)
        # else: underscores alone, too small to read: the "_" that opens a hidden record GUID (its letters are
        # dropped as hidden, see HIDDEN_PT; 703 such lines in the agency reports, one on the filings). Kept, it
        # took a place in the reading order below a table's top and pulled the table above its own title. Other
        # punctuation stays: a table's dash for "none" can report the same size and height and is read.
    return Line()


def read_page(page: pdfium.PdfPage, page_no: int, styles: bool = True,
              textpage: pdfium.PdfTextPage | None = None) -> PageText:
    """Lines of one page in the text layer's reading order. ``styles=False`` leaves bold, italic and mono unread
    (all False): the font lookups cost a call a character, and a caller that needs only text, places and sizes
    (the document identity's title block) need not pay them. ``textpage``: the page's text page when the caller
    has one (building it is pdfium's whole text extraction); the caller closes it.

    This loop runs once per character of every page the pdf-text path reads (and of the first page intake reads
    for the identity), so it is written for speed: pdfium through :class:`_Calls`; the current line's lists and
    extent in locals; the generated-character check only for what pdfium generates (spaces and line breaks:
    core/fpdftext/cpdf_textpage.cpp GenerateCharInfo), so never for a letter or digit; style and size read once
    per text object (pdfium's size of a character is its text object's: CPDF_TextPage::GetCharFontSize)."""
    width, height = page.get_size()
    own = textpage is None
    textpage = page.get_textpage() if textpage is None else textpage
    calls = _calls()
    get_unicode, is_generated, get_box = calls.unicode, calls.generated, calls.box
    get_size, get_object = calls.size, calls.text_object
    box = (ctypes.c_double * 4)()  # left, right, bottom, top
    matrix = pdfium_c.FS_MATRIX()
    am = ctypes.addressof(matrix)

    def drawn_size(i: int) -> tuple[float, float]:
        """Character ``i``'s reported size and the size it is drawn at. pdfium reports the font operand alone
        (CPDF_TextPage::GetCharFontSize); text set at 1 point and scaled up by its matrix (Verizon's 10-Ks, OPM's
        reports) reports 1.0, and its line's height used to tell the size instead: a line without descenders
        ("basis.") read two points smaller than the paragraph above it and was not joined to it. Only a size no
        page shows is scaled: elsewhere the operand is what every measure in ems was set against."""
        reported = get_size(h, i)
        if reported >= MIN_SIZE or not calls.matrix(h, i, am):
            return reported, reported
        scaled = reported * math.hypot(matrix.c, matrix.d)
        return reported, (scaled if scaled >= MIN_SIZE else reported)
    a0 = ctypes.addressof(box)
    a1, a2, a3 = a0 + 8, a0 + 16, a0 + 24
    try:
        tp = textpage.raw
        h = ctypes.cast(tp, ctypes.c_void_p).value
        n = pdfium_c.FPDFText_CountChars(tp)
        fonts = _FontCache()
        lines: list[Line] = []
        page_sizes: dict[float, int] = {}
        visible = 0
        last_obj: int | None = -1  # no address: the first character reads its object's style and size
        st, obj_size, obj_reported = _NO_STYLE, 0.0, 0.0
        last_size, key = float("nan"), 0.0  # the last size read and its rounded key (NaN equals nothing)
        # The current line: its lists, extent (x0, y0, x1, y1), sizes and style counts.
        cur = Line()
        chars, xs0, xs1, bolds = cur.chars, cur.xs0, cur.xs1, cur.bolds
        sizes: dict[float, int] = {}
        lx0, ly0, lx1, ly1, boldc, italc, monoc, vis = _OPEN

        held = False  # a line break pdfium generated, not yet acted on
        hiding = False  # the last character read was too small to read (HIDDEN_PT)
        i, step = -1, 1
        while True:
            i += step
            if i >= n:
                break
            code = get_unicode(h, i)
            if 0xD800 <= code <= 0xDFFF:
                ch, step = char_at(tp, i, n)
            else:
                ch, step = (chr(code) if 0 < code < 0x110000 else ""), 1
            if ch == "\n" or ch == "\r":
                if chars and is_generated(h, i) == 1:
                    # pdfium's own break: decided at the next character, which may carry on this line.
                    held = True
                    continue
                held = False
                cur = _close(cur, (lx0, ly0, lx1, ly1), sizes, (boldc, italc, monoc, vis), page_sizes, lines)
                chars, xs0, xs1, bolds, sizes = cur.chars, cur.xs0, cur.xs1, cur.bolds, {}
                lx0, ly0, lx1, ly1, boldc, italc, monoc, vis = _OPEN
                continue
            if not ch:
                continue
            if ch in SOFT_HYPHENS:
                cur.soft_end = True
                if chars:
                    cur.soft_after.add(len(chars) - 1)
                continue
            alnum = ch.isalnum()
            if not alnum and is_generated(h, i) == 1:
                # Generated spaces carry no box; they only separate words.
                if chars and not chars[-1].isspace():
                    chars.append(" ")
                    xs0.append(xs1[-1])
                    xs1.append(xs1[-1])
                    bolds.append(bolds[-1])
                continue
            get_box(h, i, a0, a1, a2, a3)
            x0, x1, y0, y1 = box[0], box[1], height - box[3], height - box[2]
            if not alnum and ch.isspace():
                if chars and not chars[-1].isspace():
                    chars.append(" ")
                    xs0.append(x0)
                    xs1.append(x0)
                    bolds.append(bolds[-1])
                continue
            if styles:
                obj = get_object(h, i)
                if obj != last_obj:
                    (obj_reported, obj_size), st, last_obj = drawn_size(i), fonts.style(obj), obj
                reported, size = obj_reported, obj_size
            else:
                reported, size = drawn_size(i)
            if reported < MIN_SIZE and 0 < y1 - y0 < HIDDEN_PT and (alnum or hiding):
                hiding = True
                continue
            hiding = False
            if held and chars and not goes_on(x0, y0, y1, size, alnum, xs1[-1], ly0, ly1, last_size):
                # The break stands: the next character is on another line, back to the left, or set smaller.
                cur = _close(cur, (lx0, ly0, lx1, ly1), sizes, (boldc, italc, monoc, vis), page_sizes, lines)
                chars, xs0, xs1, bolds, sizes = cur.chars, cur.xs0, cur.xs1, cur.bolds, {}
                lx0, ly0, lx1, ly1, boldc, italc, monoc, vis = _OPEN
            elif held and chars and x0 - xs1[-1] > 0.2 * min(gap_size(size, y1 - y0, ly1 - ly0), ly1 - ly0) \
                    and not chars[-1].isspace() and not (ch.isdigit() and chars[-1].isdigit()):
                # Some PDFs draw every glyph as a text object of its own, and pdfium breaks the line after each
                # (JOHNSON_JOHNSON_2022_10K's sales tables): the glyph goes on along the baseline, so the line
                # goes on, a word space where the gap is one (pdfium generates none across its break; a fifth of the
                # line's height: these glyphs sit 0.2-0.6 pt apart, their words 2.5 pt, at 8 pt lines). Never between
                # two digits: a narrow "1" leaves as wide a gap, and two figures are a column's gap apart.
                chars.append(" ")
                xs0.append(xs1[-1])
                xs1.append(x0)
                bolds.append(bolds[-1])
            held = False
            if chars and ly1 > ly0:
                mid = (y0 + y1) / 2
                # A character outside the current line's band starts a new line even without a break char.
                if mid < ly0 - 1 or mid > ly1 + 1:
                    cur = _close(cur, (lx0, ly0, lx1, ly1), sizes, (boldc, italc, monoc, vis), page_sizes, lines)
                    chars, xs0, xs1, bolds, sizes = cur.chars, cur.xs0, cur.xs1, cur.bolds, {}
                    lx0, ly0, lx1, ly1, boldc, italc, monoc, vis = _OPEN
                elif x0 - xs1[-1] > gap_size(size, y1 - y0, ly1 - ly0) and not chars[-1].isspace():
                    chars.append(" ")
                    xs0.append(xs1[-1])
                    xs1.append(x0)
                    bolds.append(bolds[-1])
            cur.soft_end = False
            chars.append(ch)
            xs0.append(x0)
            xs1.append(x1)
            bolds.append(st.bold)
            # Comparisons, not min()/max(): the same result (NaN boxes included), a fraction of the cost.
            if y1 > y0:
                if y0 < ly0:
                    ly0 = y0
                if y1 > ly1:
                    ly1 = y1
            if x0 < lx0:
                lx0 = x0
            if x1 > lx1:
                lx1 = x1
            if size != last_size:
                key, last_size = round(size, 1), size
            sizes[key] = sizes.get(key, 0) + 1
            page_sizes[key] = page_sizes.get(key, 0) + 1
            boldc += st.bold
            italc += st.italic
            monoc += st.mono
            vis += 1
            visible += 1
        _close(cur, (lx0, ly0, lx1, ly1), sizes, (boldc, italc, monoc, vis), page_sizes, lines)
    finally:
        if own:
            textpage.close()
    for ln in lines:
        if ln.y1 < ln.y0:  # characters without boxes: keep the line, give it a harmless place
            ln.y0 = ln.y1 = 0.0
    return PageText(page_no, width, height, lines, visible, rescale_oversized(lines, page_sizes))
