"""Prose set with generous leading, on the pdf-text path: a press release whose lines sit 0.75 em apart (most
documents: under 0.5 em) had every line of its prose read as a paragraph of its own, so a chunk could end in the
middle of a sentence and the next line start a chunk under the same heading. The segment's own leading
(FontStats.leading) now says how far apart a paragraph's lines are; paragraphs stay apart where the space between
them is wider than that, and tightly set documents keep their paragraph breaks."""

from __future__ import annotations

from pathlib import Path

import pytest

from chunker.contract import parse_markdown

pytest.importorskip("fpdf")

from chunker.eval.devset.pdfdoc import DevPdf, Style  # noqa: E402
from test_pdf_text_patterns import _markdown  # noqa: E402

PARAS = [
    "Quarterly sales grew in every region the company serves. Growth came from the new medicines launched last "
    "year and from the devices business, which recovered as hospitals scheduled more procedures. Currency cost "
    "the quarter more than two points of growth, most of it in Europe and Japan, where the dollar was strongest.",
    "Operating margin fell because of the charges the company took for the separation of its consumer business. "
    "Without them the margin rose by half a point. The board approved a higher dividend and a new share "
    "repurchase program that runs until the end of next year and may be suspended at any time.",
    "The company expects sales next year to grow by four to five percent before the effect of currency. It "
    "expects earnings per share to grow faster than sales. The outlook assumes the separation is completed in "
    "the second half of the year and that exchange rates stay where they stood at the end of the quarter.",
]


def _paragraphs(tmp_path: Path, line_mm: float, space_mm: float) -> list[str]:
    pdf = DevPdf(Style(family="Helvetica", body=10, sizes=(18, 13, 11)))
    pdf.add_page()
    pdf.heading("Financial Results", 2)
    pdf.use_font()
    for text in PARAS * 2:  # a page of prose: enough wrapped lines for the segment's leading to be measured
        pdf.multi_cell(0, line_mm, text, align="J", new_x="LMARGIN", new_y="NEXT")
        pdf.ln(space_mm)
    md = _markdown(pdf, tmp_path / "release.pdf")
    return [e.text for e in parse_markdown("d", [(md, 1)]) if e.kind == "paragraph"]


def test_lines_set_with_generous_leading_make_one_paragraph_each(tmp_path: Path) -> None:
    # 6.4 mm a line at 10 pt: lines ~0.8 em apart (glyph box to glyph box), paragraphs a further 5 mm.
    paras = _paragraphs(tmp_path, 6.4, 5.0)
    assert len(paras) == 6, paras
    for got, want in zip(paras, PARAS * 2):
        assert got.split() == want.split()


def test_tightly_set_paragraphs_keep_their_breaks(tmp_path: Path) -> None:
    # 4.5 mm a line, paragraphs 2.5 mm apart: the usual setting; a generous measure must not join them.
    paras = _paragraphs(tmp_path, 4.5, 2.5)
    assert [p.split() for p in paras] == [p.split() for p in PARAS * 2]

