"""Ruled grids as agency reports draw them, on generated PDFs: a page banner and a title above a grid, grids stacked
with no gap between them, a hidden record mark in the text layer, a lone row of ruled labels.

Each grid is drawn cell by cell (a bordered, filled box per cell), so its rules come from rectangles, as exported
office documents draw them."""

from __future__ import annotations

from pathlib import Path

import pytest

from chunker.config import ConverterConfig
from chunker.contract import parse_markdown
from chunker.convert.pdf_text import PdfTextConverter

fpdf = pytest.importorskip("fpdf")

LEFT = 120.0


def _page() -> "fpdf.FPDF":
    pdf = fpdf.FPDF(unit="pt", format="letter")
    pdf.set_auto_page_break(False)
    pdf.add_page()
    return pdf


def _text(pdf: "fpdf.FPDF", x: float, y: float, text: str, size: float = 10, bold: bool = False) -> None:
    pdf.set_font("Helvetica", "B" if bold else "", size)
    pdf.text(x, y, text)


def _grid(pdf: "fpdf.FPDF", top: float, widths: list[float], rows: list[list[str]], height: float = 15) -> float:
    """Rows of bordered cells from ``top`` (the first row shaded, as a header); returns the bottom."""
    pdf.set_font("Helvetica", "", 8)
    y = top
    for n, cells in enumerate(rows):
        x = LEFT
        for w, text in zip(widths, cells):
            pdf.set_fill_color(200, 225, 240) if n == 0 else pdf.set_fill_color(255, 255, 255)
            pdf.set_xy(x, y)
            pdf.cell(w, height, text, border=1, fill=True)
            x += w
        y += height
    return y


def _convert(pdf: "fpdf.FPDF", path: Path) -> list:
    pdf.output(str(path))
    md = PdfTextConverter(ConverterConfig(), "h").markdown_for_pages(str(path), [1])
    return parse_markdown("d", [(md, 1)])


INDICATOR = [["Description", "Type", "Status", "Start Date", "End Date", "Percentage"],
             ["Increase employment", "Target", "Target Met", "", "", "7"],
             ["by 7% annually", "Actual", "", "", "", ""]]


def test_a_banner_and_a_title_above_a_grid_are_not_its_cells(tmp_path: Path) -> None:
    pdf = _page()
    # A coloured banner whose box overlaps the grid's width: its edges join the grid's stack of rules.
    pdf.set_fill_color(0, 120, 120)
    pdf.rect(60, 57, 252, 28, style="F")
    pdf.set_text_color(255, 255, 255)
    _text(pdf, 66, 74, "Strategic Plan")
    pdf.set_text_color(0, 0, 0)
    _text(pdf, 108, 108, "Performance Indicators", bold=True)
    _text(pdf, 120, 125, "KPI 2.1.1 Annual Employment Increase", bold=True)
    _grid(pdf, 133, [82, 70, 70, 70, 70, 70], INDICATOR)
    els = _convert(pdf, tmp_path / "banner.pdf")
    rows = [e.text for e in els if e.kind == "table_row"]
    assert rows[0] == "Description: Increase employment; Type: Target; Status: Target Met; Percentage: 7.", rows
    assert not any("Indicat" in r or "Strategic" in r for r in rows), rows
    text = [e.text for e in els if e.kind != "table_row"]
    assert "Performance Indicators" in text and "KPI 2.1.1 Annual Employment Increase" in text, text
    # Title, then the table it titles: in reading order.
    order = [e.kind for e in els if e.kind == "table_row" or e.text.startswith("KPI")]
    assert order[0] != "table_row", order


def test_grids_stacked_without_a_gap_keep_their_own_columns(tmp_path: Path) -> None:
    pdf = _page()
    bottom = _grid(pdf, 133, [117, 79, 78, 79, 79], [
        ["Description", "Type", "Status", "Start Date", "End Date"],
        ["By September 30, 2026,", "Target", "Implemented", "", "2026-09-30"],
        ["implement all actions", "Actual", "", "", "2026-09-30"],
        ["in the adaptation plan", "", "", "", ""]])
    _grid(pdf, bottom, [180, 34, 73, 73, 72], [
        ["Description", "Type", "Start Date", "End Date", "Number"],
        ["By September 30, 2026, assist at least 400", "Target", "", "2026-09-30", "400"],
        ["Tribes to act on climate change", "Actual", "", "2026-09-30", ""]])
    els = _convert(pdf, tmp_path / "stacked.pdf")
    rows = [e.text for e in els if e.kind == "table_row"]
    assert "Description: By September 30, 2026, assist at least 400; Type: Target; End Date: 2026-09-30; " \
           "Number: 400." in rows, rows
    assert "Description: By September 30, 2026,; Type: Target; Status: Implemented; End Date: 2026-09-30." \
           in rows, rows


def test_a_hidden_record_mark_does_not_pull_a_table_above_its_title(tmp_path: Path) -> None:
    pdf = _page()
    # An exported report's hidden record GUID: 1-pt text whose first glyph is an underscore, written first in
    # the content stream, placed level with the grid's first row.
    _text(pdf, 558, 143, "_ca1248ea-c375-11ec-a8d6-d0221283ea00", size=1)
    _text(pdf, 108, 108, "Performance Indicators", bold=True)
    _text(pdf, 120, 125, "KPI 2.1.1 Annual Employment Increase", bold=True)
    _grid(pdf, 133, [82, 70, 70, 70, 70, 70], INDICATOR)
    els = _convert(pdf, tmp_path / "hidden.pdf")
    kinds = [(e.kind, e.text[:12]) for e in els]
    first_row = next(k for k, (kind, _) in enumerate(kinds) if kind == "table_row")
    assert ("heading", "KPI 2.1.1 An") in kinds[:first_row] or ("paragraph", "KPI 2.1.1 An") in kinds[:first_row], \
        kinds
    assert not any(e.text.strip() in {"_", "_ca1248ea-c375-11ec-a8d6-d0221283ea00"} for e in els), kinds


def test_a_lone_row_of_ruled_labels_is_no_table(tmp_path: Path) -> None:
    pdf = _page()
    _grid(pdf, 133, [110, 80, 80, 80, 82], [["Performance Measure", "FY 2015 Results", "FY 2016 Results",
                                             "FY 2017 Target", "Met or Not Met"]], height=30)
    _text(pdf, LEFT, 200, "Results for each measure follow on the next page.")
    els = _convert(pdf, tmp_path / "labels.pdf")
    assert not [e for e in els if e.kind == "table_row"], [(e.kind, e.text) for e in els]
    assert any("Performance Measure" in e.text for e in els)
