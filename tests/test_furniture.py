"""Running headers, footers and page numbers that sit where a geometric band cannot see them (documents printed from
HTML put the footer right under each page's last paragraph) or that alternate sides from page to page."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from chunker.config import ConverterConfig, PdfTextConfig
from chunker.convert.pdf_text import PdfTextConverter

PAGES = 6


@pytest.fixture(scope="module")
def converter() -> PdfTextConverter:
    return PdfTextConverter(ConverterConfig(pdf_text=PdfTextConfig(ocr=False)), config_hash="t")


def _pdf(path: Path, page: Callable[[Any, int], None], pages: int = PAGES) -> Path:
    from fpdf import FPDF

    pdf = FPDF(format="A4", unit="pt")
    pdf.set_auto_page_break(False)
    for n in range(1, pages + 1):
        pdf.add_page()
        pdf.set_font("Helvetica", "", 11)
        pdf.set_y(120)
        page(pdf, n)
    pdf.output(str(path))
    return path


def _body(pdf: Any, n: int) -> None:
    # Pages of different lengths, so whatever follows the body lands at a different height on each page.
    for k in range(3 + 4 * (n % 3)):
        pdf.cell(0, 16, f"Paragraph line {k} of section {n} says something about the business.",
                 new_x="LMARGIN", new_y="NEXT")


def _md(converter: PdfTextConverter, path: Path, pages: int = PAGES) -> str:
    return converter.markdown_for_pages(str(path), list(range(1, pages + 1)))


def test_footer_right_under_the_last_paragraph_is_furniture(converter: PdfTextConverter, tmp_path: Path) -> None:
    def page(pdf: Any, n: int) -> None:
        _body(pdf, n)
        pdf.cell(0, 16, f"Acme Holdings Inc. 2023 Form 10-K {n + 40}", new_x="LMARGIN", new_y="NEXT")

    md = _md(converter, _pdf(tmp_path / "html.pdf", page))
    assert "Form 10-K" not in md, md
    assert "Paragraph line 0 of section 6 says something about the business." in md


def test_page_numbers_under_the_last_paragraph_go_and_a_lone_year_stays(converter: PdfTextConverter,
                                                                         tmp_path: Path) -> None:
    def page(pdf: Any, n: int) -> None:
        _body(pdf, n)
        pdf.ln(8)
        pdf.cell(0, 16, str(n + 2), new_x="LMARGIN", new_y="NEXT")

    md = _md(converter, _pdf(tmp_path / "numbers.pdf", page))
    lines = md.splitlines()
    assert not any(line.strip() == str(n + 2) for n in range(1, PAGES + 1) for line in lines), md

    def page_with_year(pdf: Any, n: int) -> None:
        _body(pdf, n)
        if n in (2, 5):  # a year left alone at a page's end: it does not count the pages
            pdf.ln(8)
            pdf.cell(0, 16, "2020", new_x="LMARGIN", new_y="NEXT")

    md = _md(converter, _pdf(tmp_path / "year.pdf", page_with_year))
    assert sum(line.strip() == "2020" for line in md.splitlines()) == 2, md


def test_footer_that_alternates_sides_is_furniture(converter: PdfTextConverter, tmp_path: Path) -> None:
    def page(pdf: Any, n: int) -> None:
        _body(pdf, n)
        if n <= 2:
            return  # a cover and a contents page without the footer
        pdf.set_y(-40)
        pdf.set_font("Helvetica", "", 9)
        # Even pages carry the number on the left, odd pages on the right: each form alone is on fewer than half
        # of the pages, the footer on all but two.
        text = f"{n} Acme Annual Report 2023" if n % 2 == 0 else f"Acme Annual Report 2023 {n}"
        pdf.cell(0, 12, text, align="L" if n % 2 == 0 else "R")

    md = _md(converter, _pdf(tmp_path / "alternate.pdf", page, pages=10), pages=10)
    assert "Acme Annual Report" not in md, md


def test_a_line_repeated_unchanged_at_the_top_of_each_page_is_data(converter: PdfTextConverter,
                                                                   tmp_path: Path) -> None:
    # The first line of every page, below the header band and the same on all of them (a table's header row
    # repeated on each page): nothing tells it from data by its text, so it stays.
    def page(pdf: Any, n: int) -> None:
        pdf.set_font("Helvetica", "B", 11)
        pdf.cell(0, 16, "Country overview and entry rules", new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("Helvetica", "", 11)
        _body(pdf, n)

    md = _md(converter, _pdf(tmp_path / "repeat.pdf", page))
    assert md.count("Country overview and entry rules") == PAGES, md


def test_the_footer_under_the_last_paragraph_joins_the_identity(tmp_path: Path) -> None:
    # The identity reads a few pages spread over the document (chunker/intake/identity.py); the running footer sits
    # under each page's last paragraph, never in the edge bands, and the front matter numbers its pages i, ii, ...
    from chunker.intake.identity import document_identity

    roman = ["", "ii", "iii", "iv", "v", "vi", "vii"]

    def page(pdf: Any, n: int) -> None:
        if n == 1:
            pdf.cell(0, 16, "ACME HOLDINGS INC.", new_x="LMARGIN", new_y="NEXT")
            pdf.cell(0, 16, "For the fiscal year ended December 31, 2023", new_x="LMARGIN", new_y="NEXT")
            return
        _body(pdf, n)
        number = roman[n - 1] if n < len(roman) + 1 else str(n - len(roman))
        pdf.cell(0, 16, f"Acme Holdings Inc. 2023 Form 10-K {number}", new_x="LMARGIN", new_y="NEXT")

    path = _pdf(tmp_path / "identity.pdf", page, pages=12)
    identity = document_identity(str(path), 12)
    assert "ACME HOLDINGS INC." in identity and "December 31, 2023" in identity
    assert "Acme Holdings Inc. 2023 Form 10-K" in identity, identity
    assert "Paragraph line" not in identity, identity
