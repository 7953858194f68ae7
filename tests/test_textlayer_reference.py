"""read_page, written for speed, reads exactly what the plain per-character reading of pdfium's text API reads.

read_page (chunker/convert/pdf_text/textlayer.py) skips calls the plain reading makes for every character: it asks
whether a character was generated only for characters that are not letters or digits, reads the font size and style
once per text object, and calls pdfium through its own ctypes prototypes. Each is an assumption about pdfium (it
generates only spaces and line breaks; a character's size is its text object's). The reference below makes every
call for every character through pypdfium2's bindings, with the same line rules, and the two must agree field by
field on generated pages that exercise those assumptions (several fonts and sizes on a line, bold and italic runs,
soft hyphens, characters outside the BMP, a page whose sizes are scaled) and on the shared sample PDFs.
"""

from __future__ import annotations

import ctypes
import math
from pathlib import Path

import pytest

from chunker.convert.pdf_text import linesize as ls
from chunker.convert.pdf_text import textlayer as tl

fpdf = pytest.importorskip("fpdf")
pdfium = pytest.importorskip("pypdfium2")
pdfium_c = pytest.importorskip("pypdfium2.raw")

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def _style(textpage: object, index: int) -> tl.FontStyle:
    obj = pdfium_c.FPDFText_GetTextObject(textpage, index)
    if not ctypes.cast(obj, ctypes.c_void_p).value:
        return tl.style_from_name("", 0, 0)
    font = pdfium_c.FPDFTextObj_GetFont(obj)
    if not font:
        return tl.style_from_name("", 0, 0)
    buf = ctypes.create_string_buffer(256)
    n = pdfium_c.FPDFFont_GetBaseFontName(font, buf, len(buf))
    name = buf.raw[: max(0, n - 1)].decode("latin-1", "replace")
    return tl.style_from_name(name.split("+")[-1], pdfium_c.FPDFFont_GetWeight(font), pdfium_c.FPDFFont_GetFlags(font))


def _records(page: object) -> list[tuple]:
    """Every character index as (char, generated, box in top-left coordinates, (reported size, drawn size), style),
    nothing skipped. The drawn size is the reported one scaled by the character's matrix where the reported one is
    under MIN_SIZE and the scaled one is not."""
    _, height = page.get_size()
    textpage = page.get_textpage()
    try:
        raw = textpage.raw
        n = pdfium_c.FPDFText_CountChars(raw)
        out, i = [], 0
        while i < n:
            ch, step = tl.char_at(raw, i, n)
            left, right, bottom, top = (ctypes.c_double() for _ in range(4))
            pdfium_c.FPDFText_GetCharBox(raw, i, left, right, bottom, top)
            box = (left.value, right.value, height - top.value, height - bottom.value)
            reported = drawn = pdfium_c.FPDFText_GetFontSize(raw, i)
            matrix = pdfium_c.FS_MATRIX()
            if reported < ls.MIN_SIZE and pdfium_c.FPDFText_GetMatrix(raw, i, matrix):
                scaled = reported * math.hypot(matrix.c, matrix.d)
                drawn = scaled if scaled >= ls.MIN_SIZE else reported
            out.append((ch, pdfium_c.FPDFText_IsGenerated(raw, i) == 1, box, (reported, drawn), _style(raw, i)))
            i += step
        return out
    finally:
        textpage.close()


def reference_read(page: object, page_no: int, styles: bool = True) -> tl.PageText:
    """The line rules of read_page applied to :func:`_records`, one character at a time."""
    lines: list[tl.Line] = []
    page_sizes: dict[float, int] = {}
    state = {"line": tl.Line(), "sizes": {}, "counts": [0, 0, 0, 0]}

    def pad(x0: float, x1: float) -> None:
        line = state["line"]
        line.chars.append(" ")
        line.xs0.append(x0)
        line.xs1.append(x1)
        line.bolds.append(line.bolds[-1])

    def close() -> None:
        if state["line"].text:
            ls.finish_line(state["line"], state["sizes"], *state["counts"], page_sizes)
            lines.append(state["line"])
        state.update(line=tl.Line(), sizes={}, counts=[0, 0, 0, 0])

    visible = 0
    held, last_size = False, float("nan")  # a break pdfium generated, decided at the next visible character
    hiding = False
    for ch, generated, (x0, x1, y0, y1), (reported, size), style in _records(page):
        line = state["line"]
        if ch in ("\n", "\r"):
            if generated and line.chars:
                held = True
            else:
                held = False
                close()
        elif not ch:
            continue
        elif ch in tl.SOFT_HYPHENS:
            line.soft_end = True
            if line.chars:
                line.soft_after.add(len(line.chars) - 1)
        elif generated:
            if line.chars and not line.chars[-1].isspace():
                pad(line.xs1[-1], line.xs1[-1])
        elif ch.isspace():
            if line.chars and not line.chars[-1].isspace():
                pad(x0, x0)
        elif reported < ls.MIN_SIZE and 0 < y1 - y0 < tl.HIDDEN_PT and (ch.isalnum() or hiding):
            hiding = True  # too small to read, and the punctuation right after it
        else:
            hiding = False
            word = 0.2 * min(ls.gap_size(size, y1 - y0, line.y1 - line.y0), line.y1 - line.y0)
            if held and line.chars and not ls.goes_on(x0, y0, y1, size, ch.isalnum(), line.xs1[-1], line.y0, line.y1,
                                                      last_size):
                close()
                line = state["line"]
            elif held and line.chars and x0 - line.xs1[-1] > word and not line.chars[-1].isspace() \
                    and not (ch.isdigit() and line.chars[-1].isdigit()):
                pad(line.xs1[-1], x0)
            held, last_size = False, size
            if line.chars and line.y1 > line.y0:
                mid = (y0 + y1) / 2
                if mid < line.y0 - 1 or mid > line.y1 + 1:
                    close()
                    line = state["line"]
                elif x0 - line.xs1[-1] > ls.gap_size(size, y1 - y0, line.y1 - line.y0) \
                        and not line.chars[-1].isspace():
                    pad(line.xs1[-1], x0)
            st = style if styles else tl.FontStyle(False, False, False)
            line.soft_end = False
            line.chars.append(ch)
            line.xs0.append(x0)
            line.xs1.append(x1)
            line.bolds.append(st.bold)
            if y1 > y0:
                line.y0, line.y1 = min(line.y0, y0), max(line.y1, y1)
            line.x0, line.x1 = min(line.x0, x0), max(line.x1, x1)
            key = round(size, 1)
            state["sizes"][key] = state["sizes"].get(key, 0) + 1
            page_sizes[key] = page_sizes.get(key, 0) + 1
            for k, flag in enumerate((st.bold, st.italic, st.mono, True)):
                state["counts"][k] += flag
            visible += 1
    close()
    for ln in lines:
        if ln.y1 < ln.y0:
            ln.y0 = ln.y1 = 0.0
    width, height = page.get_size()
    return tl.PageText(page_no, width, height, lines, visible, ls.rescale_oversized(lines, page_sizes))


def _fields(page: tl.PageText) -> tuple:
    return (page.width, page.height, page.n_chars, page.sizes,
            [(ln.chars, ln.xs0, ln.xs1, ln.bolds, ln.x0, ln.y0, ln.x1, ln.y1, ln.size, ln.bold, ln.italic, ln.mono,
              ln.soft_end, ln.soft_after) for ln in page.lines])


def _assert_same(path: Path) -> int:
    """Both readings of every page of ``path``, with and without styles; the number of lines compared."""
    doc = pdfium.PdfDocument(str(path))
    compared = 0
    try:
        for k in range(len(doc)):
            page = doc[k]
            try:
                for styles in (True, False):
                    fast, plain = tl.read_page(page, k + 1, styles=styles), reference_read(page, k + 1, styles)
                    assert _fields(fast) == _fields(plain), f"{path.name} page {k + 1} (styles={styles})"
                    compared += len(plain.lines)
            finally:
                page.close()
    finally:
        doc.close()
    return compared


def _mixed_pdf(path: Path) -> Path:
    """Runs of several fonts, sizes and styles inside one line, a wrapped paragraph with soft hyphens, and
    punctuation and digits next to letters (the characters whose generated flag read_page still asks for)."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    for family, size, style, text in [("Helvetica", 18, "B", "Quarterly Report "), ("Times", 11, "I", "(draft) "),
                                      ("Courier", 9, "", "code_42 "), ("Helvetica", 11, "", "and 3.5% - net; x=y.")]:
        pdf.set_font(family, style, size)
        pdf.write(8, text)
    pdf.ln(12)
    pdf.set_font("Helvetica", "", 10)
    word = "extra\u00adordinary con\u00adsolidated state\u00adments "
    pdf.multi_cell(60, 5, word * 6)
    pdf.set_font("Helvetica", "B", 10)
    pdf.cell(40, 6, "Total:")
    pdf.set_font("Helvetica", "", 10)
    pdf.cell(30, 6, "$ 1,234", align="R")
    pdf.cell(30, 6, "(567)", align="R", new_x="LMARGIN", new_y="NEXT")
    pdf.output(str(path))
    return path


def _hidden_pdf(path: Path) -> Path:
    """A heading and a paragraph, with a record ID and a placeholder set at 1 pt in white beside the heading (as
    exported reports carry them), and a lone dash set at 1 pt."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 14)
    pdf.cell(120, 10, "Strategy 4.3.3. Heat Islands")
    pdf.set_text_color(255, 255, 255)
    pdf.set_font("Helvetica", "", 1)
    pdf.cell(20, 10, "PLACEHOLDER_155 _ee1ba140-c04c-11ec-866c", new_x="LMARGIN", new_y="NEXT")
    pdf.set_text_color(0, 0, 0)
    pdf.set_font("Helvetica", "", 10)
    pdf.multi_cell(150, 5, "Mitigate urban heat island effects through cool pavements and shade trees.")
    pdf.set_font("Helvetica", "", 1)
    pdf.cell(10, 5, "-", new_x="LMARGIN", new_y="NEXT")
    pdf.output(str(path))
    return path


def test_text_too_small_to_read_is_not_read(tmp_path: Path) -> None:
    """1-pt text is not part of the page a reader sees: its lines and characters leave the reading (the agency
    reports hide a record GUID and a placeholder beside every heading so); a dash stays whatever its size."""
    path = _hidden_pdf(tmp_path / "hidden.pdf")
    assert _assert_same(path) >= 2
    doc = pdfium.PdfDocument(str(path))
    try:
        text = " | ".join(ln.text for ln in tl.read_page(doc[0], 1).lines)
    finally:
        doc.close()
    assert "Heat Islands" in text and "cool pavements" in text, text
    assert "PLACEHOLDER" not in text and "ee1ba140" not in text, text
    assert "-" in text.replace("-c04c", ""), text


def test_mixed_fonts_sizes_and_soft_hyphens_read_alike(tmp_path: Path) -> None:
    assert _assert_same(_mixed_pdf(tmp_path / "mixed.pdf")) >= 5


def test_a_statement_with_bold_totals_and_running_lines_reads_alike(tmp_path: Path) -> None:
    from statement_pdf import write_statement

    assert _assert_same(write_statement(tmp_path / "statement.pdf")) >= 20


@pytest.mark.parametrize("how", ["tm", "cm"])
def test_a_page_whose_sizes_are_scaled_reads_alike(tmp_path: Path, how: str) -> None:
    from scaled_pdf import write_scaled

    assert _assert_same(write_scaled(tmp_path / f"scaled-{how}.pdf", how=how)) >= 10


def test_a_page_drawn_glyph_by_glyph_reads_alike(tmp_path: Path) -> None:
    """pdfium breaks the line after every glyph there; both readings decide each break alike."""
    from scaled_pdf import write_glyphs

    assert _assert_same(write_glyphs(tmp_path / "glyphs.pdf")) == 10  # five lines, with and without styles


def test_characters_outside_the_bmp_read_alike(tmp_path: Path) -> None:
    from test_unicode_text import _astral_pdf

    path = tmp_path / "astral.pdf"
    _astral_pdf(path)
    assert _assert_same(path) >= 3


@pytest.mark.shared_data
@pytest.mark.parametrize("folder", ["tables", "robustness", "rag-multi-corpus-cloudway/pdf"])
def test_the_shared_sample_pdfs_read_alike(folder: str) -> None:
    """Real PDFs (financial tables, CloudWay's manuals, malformed files pdfium still opens)."""
    paths = sorted((SHARED / folder).rglob("*.pdf"))
    if not paths:
        pytest.skip(f"no PDFs under {SHARED / folder}")
    compared = 0
    for path in paths[:40]:
        try:
            pdfium.PdfDocument(str(path)).close()
        except pdfium.PdfiumError:
            continue  # a file pdfium refuses has no text layer to compare
        compared += _assert_same(path)
    assert compared > 0
