"""Text extraction keeps characters outside the Basic Multilingual Plane, and never emits a lone surrogate.

pdfium reports such characters as two UTF-16 code units; a lone surrogate in a chunk makes Arrow (and every UTF-8
writer) refuse the whole batch. The PDFs are generated with fpdf2 and TTF fonts that carry the glyphs: matplotlib's
STIX (mathematical alphanumerics), DejaVu Sans (emoji) and Last Resort (every code point, CJK included; its glyphs
are placeholders, but the text layer maps them to the right characters).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pyarrow as pa
import pytest

from chunker.eval.baselines import text_layer_pages
from chunker.config import ConverterConfig, IntakeConfig
from chunker.convert.pdf_text import PdfTextConverter
from chunker.convert.pdf_text.textlayer import read_page
from chunker.types import safe_text
from chunker.intake.inputs import InputFile
from chunker.intake.prepare import inspect
from chunker.intake.segments import plan_segments

fpdf = pytest.importorskip("fpdf")
matplotlib = pytest.importorskip("matplotlib")

FONTS = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
MATH = "Let \U0001D465 = \U0001D400\U0001D401 + \U0001D6FC and \U0001D49C is a set"  # math italic/bold, bold alpha, script A
EMOJI = "Rated \U0001F600 by riders \U0001F42E and \U0001F0A1 players"  # emoji: a face, a cow, a playing card
CJK = "\u4e2d\u6587 \u6587\u5b57 and \U00020000\U0002000B rare"  # BMP CJK and extension B (astral)
LINES = {"STIXGeneral.ttf": MATH, "DejaVuSans.ttf": EMOJI, "LastResortHE-Regular.ttf": CJK}


def _astral_pdf(path: Path) -> None:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    for k, (font, text) in enumerate(LINES.items()):
        if not (FONTS / font).is_file():
            pytest.skip(f"font {font} not shipped with this matplotlib")
        pdf.add_font(f"f{k}", "", str(FONTS / font))
        pdf.set_font(f"f{k}", size=12)
        pdf.cell(0, 10, text, new_x="LMARGIN", new_y="NEXT")
    pdf.output(str(path))


@pytest.fixture(scope="module")
def astral_pdf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("astral") / "astral.pdf"
    _astral_pdf(path)
    return path


def _lone_surrogate_pdf(path: Path) -> None:
    """'AQB' whose ToUnicode map sends the glyph of Q to a lone high surrogate (as broken producers do)."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.compress = False
    pdf.add_page()
    pdf.add_font("dv", "", str(FONTS / "DejaVuSans.ttf"))
    pdf.set_font("dv", size=14)
    pdf.cell(0, 10, "AQB")
    raw = bytes(pdf.output())
    assert b"<0051>" in raw
    path.write_bytes(raw.replace(b"<0051>", b"<D835>", 1))  # same length: offsets stay valid


def test_safe_text_pairs_and_replaces() -> None:
    assert safe_text("plain") == "plain"
    assert safe_text("x\ud835\udc65y") == "x\U0001D465y"  # a pair held as two code points becomes one character
    assert safe_text("a\ud835b") == "a\ufffdb"
    assert safe_text("\udc00") == "\ufffd"
    safe_text("a\ud835b\udc00").encode("utf-8")  # never raises


def test_text_layer_lines_equal_the_source(astral_pdf: Path) -> None:
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(str(astral_pdf))
    try:
        page = read_page(doc[0], 1)
    finally:
        doc.close()
    assert [ln.text for ln in page.lines] == [MATH, EMOJI, CJK]
    for ln in page.lines:
        # One box per character: the per-character paths (table cells, bold runs) stay aligned.
        assert len(ln.chars) == len(ln.xs0) == len(ln.xs1) == len(ln.bolds)
        assert all(len(c) == 1 for c in ln.chars)


def test_converter_markdown_keeps_every_character(astral_pdf: Path) -> None:
    cfg = ConverterConfig()
    conv = PdfTextConverter(cfg, "h")
    doc = inspect(InputFile(path=str(astral_pdf), source="astral.pdf"), IntakeConfig())
    job = plan_segments(doc, IntakeConfig())[0]
    batches = asyncio.run(conv.convert(job, None))
    md = "\n".join(b.markdown for b in batches)
    for text in (MATH, EMOJI, CJK):
        assert text in md
    md.encode("utf-8")  # strict: no lone surrogate survived
    pa.table({"markdown": [md]})  # what the stage writes


def test_fixed_size_baseline_text_keeps_every_character(astral_pdf: Path) -> None:
    text = text_layer_pages(str(astral_pdf))[0]
    for line in (MATH, EMOJI, CJK):
        assert line in text


def test_lone_surrogate_becomes_replacement_character(tmp_path: Path) -> None:
    import pypdfium2 as pdfium

    path = tmp_path / "lone.pdf"
    _lone_surrogate_pdf(path)
    doc = pdfium.PdfDocument(str(path))
    try:
        page = read_page(doc[0], 1)
    finally:
        doc.close()
    assert [ln.text for ln in page.lines] == ["A\ufffdB"]
    assert text_layer_pages(str(path)) == ["A\ufffdB"]
    md = PdfTextConverter(ConverterConfig(), "h").markdown_for_pages(str(path), [1])
    assert "A\ufffdB" in md
    md.encode("utf-8")
