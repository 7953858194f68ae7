"""Type that is not the document's outline, on the pdf-text path: a table's note set a point above the body, a
"Note:" line under a statement, the rest of a sentence in heading type, a chart line whose reported size is many
times its glyphs, a row of cells (far apart, or too close to tell but repeating their words). As headings they
titled every chunk after them (one 10-K's notes under "(2) Included in device payment plan agreement receivables
presented in Note 8. ..."); here they are body text, and the section's own heading keeps the breadcrumb."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from chunker.contract import parse_markdown
from chunker.convert.pdf_text import linesize

pytest.importorskip("fpdf")

from chunker.eval.devset.pdfdoc import DevPdf, Style  # noqa: E402
from test_pdf_text_patterns import _markdown  # noqa: E402

PROSE = ("The company reviews its results each quarter and reports them to the board, which approves the plan "
         "for the following year after a discussion of the risks the business faces.")


def _elements(path: Path, note: str, heading: str = "(a) Receivables", bold_note: bool = False) -> list:
    """A 13-pt heading, prose, ``note`` in 11.5-pt type (a point and a half above the 10-pt body, a heading size
    by itself), prose again."""
    pdf = DevPdf(Style(family="Helvetica", body=10, sizes=(18, 13, 11)))
    pdf.add_page()
    pdf.heading(heading, 2)
    pdf.para(PROSE)
    pdf.use_font("B" if bold_note else "", 11.5)
    pdf.multi_cell(0, 5, note, new_x="LMARGIN", new_y="NEXT")
    pdf.ln(4)
    pdf.para(PROSE)
    return parse_markdown("d", [(_markdown(pdf, path), 1)])


def test_a_note_set_above_the_body_is_no_heading_and_neither_is_its_wrap(tmp_path: Path) -> None:
    """A mark, then the note's sentence, wrapped over two lines: neither line is a heading, so the section's
    heading, not the note, titles what follows; a heading that starts with a mark stays one."""
    elements = _elements(tmp_path / "note.pdf", "(2) Included in device payment plan receivables presented in "
                         "Note 8. Receivables derived from the sale of equipment.")
    assert [e.text for e in elements if e.kind == "heading"] == ["(a) Receivables"]
    assert [e for e in elements if e.kind == "paragraph"][-1].heading_path == ["(a) Receivables"]
    note = [e.text for e in elements if "device payment plan" in e.text]
    assert len(note) == 1 and note[0].endswith("Receivables derived from the sale of equipment.")


def test_a_note_by_its_first_word_is_no_heading(tmp_path: Path) -> None:
    """"Note: Table may not foot due to rounding", bold in heading type under a statement, is a note: the
    statement's section goes on under its own heading. A heading that merely contains "Note" stays one."""
    elements = _elements(tmp_path / "word.pdf", "Note: Table may not foot due to rounding", heading="Note 8. Leases",
                         bold_note=True)
    assert [e.text for e in elements if e.kind == "heading"] == ["Note 8. Leases"]
    assert [e for e in elements if e.kind == "paragraph"][-1].heading_path == ["Note 8. Leases"]


def test_a_line_in_heading_type_that_is_not_a_note_stays_a_heading(tmp_path: Path) -> None:
    """The rules look at the note's form: a short title in the same 11.5-pt type under the prose is a heading."""
    elements = _elements(tmp_path / "title.pdf", "Device Payment Plans")
    assert [e.text for e in elements if e.kind == "heading"] == ["(a) Receivables", "Device Payment Plans"]


def test_a_line_in_heading_type_that_starts_in_lower_case_is_the_rest_of_a_sentence(tmp_path: Path) -> None:
    """"other post adjudication activities. ..." in heading type, apart from any heading, is a sentence's rest, not
    a heading (it titled 44 chunks of one report); a lettered item ("b. Director Awards") and a name written with a
    lower-case first letter ("iPhone Sales") stay headings."""
    rest = _elements(tmp_path / "rest.pdf", "other post adjudication activities are handled by the service centre.")
    assert [e.text for e in rest if e.kind == "heading"] == ["(a) Receivables"]
    assert [e for e in rest if e.kind == "paragraph"][-1].heading_path == ["(a) Receivables"]
    for title in ("b. Director Awards", "iPhone Sales"):
        heads = [e.text for e in _elements(tmp_path / "t.pdf", title) if e.kind == "heading"]
        assert heads == ["(a) Receivables", title]


@dataclass
class _Line:
    chars: list[str]
    y0: float
    y1: float
    size: float
    bold: bool = False
    italic: bool = False
    mono: bool = False


def test_a_line_reporting_many_times_its_glyphs_gets_the_pages_size() -> None:
    """On a page that reports sizes as printed, one line at 900 for 8.5-pt glyphs (a chart drawn through a scaled
    matrix) takes the page's usual size, and the page's size counts follow; a page where most lines report such
    sizes is scaled as a whole, as before."""
    body = [_Line(list("Operating revenue grew in the year"), 100.0 + 12 * i, 107.0 + 12 * i, 9.0) for i in range(6)]
    chart = _Line(list("Comparison of Five-Year Total Return"), 40.0, 48.5, 900.0)
    n = sum(not c.isspace() for c in chart.chars)
    out = linesize.rescale_oversized([*body, chart], {9.0: 6 * 29, 900.0: n})
    assert chart.size == 9.0 and all(ln.size == 9.0 for ln in body)
    assert out == {9.0: 6 * 29 + n}
    scaled = [_Line(list("Operating revenue grew"), 100.0 + 12 * i, 106.0 + 12 * i, 416.0) for i in range(5)]
    linesize.rescale_oversized(scaled, {416.0: 5 * 22})
    assert all(abs(ln.size - 1.4 * 6.0) < 0.1 for ln in scaled)


def _between_prose(path: Path, heading: str, draw: Callable[[DevPdf], None]) -> list:
    """A 13-pt ``heading`` and prose, then what ``draw`` sets in the bold 13-pt heading type, then prose again;
    the parsed elements."""
    pdf = DevPdf(Style(family="Helvetica", body=10, sizes=(18, 13, 11)))
    pdf.add_page()
    pdf.heading(heading, 2)
    pdf.para(PROSE)
    pdf.ln(4)
    pdf.use_font("B", 13)
    draw(pdf)
    pdf.para(PROSE)
    return parse_markdown("d", [(_markdown(pdf, path), 1)])


def _cells_page(path: Path, cells: list[str], xs: list[float]) -> list:
    """One line in heading type whose parts stand at ``xs`` (mm), between prose."""
    def draw(pdf: DevPdf) -> None:
        y = pdf.get_y()
        for text, x in zip(cells, xs):
            pdf.set_xy(x, y)
            pdf.cell(text=text)
        pdf.set_xy(pdf.l_margin, y + 8)

    return _between_prose(path, "Market for Common Equity", draw)


def test_a_line_of_cells_far_apart_is_no_heading(tmp_path: Path) -> None:
    """A cover page's row of registered securities ("Common Stock | VZ | New York Stock Exchange") or a chart's
    legend in heading type is cells, not a title: the section's own heading goes on titling the prose after it (one
    10-K's first 51 pages had been under such a row). The same words set as one run stay a heading."""
    parts = ["Common Stock, par value $0.10", "VZ", "New York Stock Exchange"]
    row = _cells_page(tmp_path / "row.pdf", parts, [20.0, 100.0, 140.0])
    assert [e.text for e in row if e.kind == "heading"] == ["Market for Common Equity"]
    assert [e for e in row if e.kind == "paragraph"][-1].heading_path == ["Market for Common Equity"]
    assert any("New York Stock Exchange" in e.text for e in row if e.kind != "heading")
    title = _cells_page(tmp_path / "title.pdf", ["Common Stock and Dividends"], [20.0])
    assert [e.text for e in title if e.kind == "heading"] == ["Market for Common Equity", "Common Stock and Dividends"]


def test_a_line_repeating_a_phrase_is_a_row_read_across(tmp_path: Path) -> None:
    """"No Survey No Survey No Survey 10.2% 16.3%" in heading type, its cells too close to tell apart, is a table row
    read across (it titled 315 chunks of one report); a title whose small words repeat stays a heading."""
    row = _cells_page(tmp_path / "row.pdf", ["No Survey No Survey No Survey 10.2% 16.3%"], [20.0])
    assert [e.text for e in row if e.kind == "heading"] == ["Market for Common Equity"]
    assert [e for e in row if e.kind == "paragraph"][-1].heading_path == ["Market for Common Equity"]
    title = "Results of the Year of the Plan of the Agency"
    kept = _cells_page(tmp_path / "title.pdf", [title], [20.0])
    assert [e.text for e in kept if e.kind == "heading"] == ["Market for Common Equity", title]


def _bold_block(path: Path, text: str) -> list:
    """``text`` in the bold 13-pt heading type wrapped over several lines (a press release's opening paragraph, a
    plan's clause set in bold), between prose under "Overview"."""
    def draw(pdf: DevPdf) -> None:
        pdf.multi_cell(0, 6, text, new_x="LMARGIN", new_y="NEXT")
        pdf.ln(4)

    return _between_prose(path, "Overview", draw)


def test_a_paragraph_in_heading_type_is_a_paragraph(tmp_path: Path) -> None:
    """Wrapped lines of heading type that grow into sentences past a title's length are a paragraph, whole: the
    section's heading goes on titling what follows (a bold opening paragraph had titled a press release's chunks,
    a plan's bold clause 14 chunks of a 10-K). A long title wrapped the same way, ending no sentence, stays one."""
    para = ("Las Vegas, Nevada, February 8, 2023 - The Company today reported financial results for the quarter and "
            "the year ended December 31, 2022. Consolidated net revenues increased compared to the prior year "
            "quarter, and operating income rose in every region it reports.")
    out = _bold_block(tmp_path / "para.pdf", para)
    assert [e.text for e in out if e.kind == "heading"] == ["Overview"]
    assert [e for e in out if e.kind == "paragraph"][-1].heading_path == ["Overview"]
    found = [e.text for e in out if "Las Vegas" in e.text]
    assert len(found) == 1 and found[0].endswith("in every region it reports."), found
    title = ("Reconciliation of Adjusted Earnings before Interest, Tax, Depreciation and Amortization, Earnings "
             "before Interest and Tax, Net Income, Earnings per Share and Free Cash Flow")
    kept = _bold_block(tmp_path / "title.pdf", title)
    assert [e.text for e in kept if e.kind == "heading"] == ["Overview", title]


def test_a_tables_lead_in_in_heading_type_is_a_paragraph(tmp_path: Path) -> None:
    """A lead-in sentence set in heading type ("... were as follows:") is a paragraph under the section's heading,
    whole when it wraps, not a section of its own (a 10-K's MD&A had 40 such top-level "sections"); a label in
    capitals ending with a colon stays a heading."""
    lead = "Consolidated net sales were as follows:"
    out = _bold_block(tmp_path / "lead.pdf", lead)
    assert [e.text for e in out if e.kind == "heading"] == ["Overview"]
    para = [e for e in out if e.kind == "paragraph" and e.text == lead]
    assert len(para) == 1 and para[0].heading_path == ["Overview"], [(e.kind, e.text) for e in out]
    wrapped = ("The components of North America Retail organic net sales growth and of the segment's operating "
               "profit in each quarter of the fiscal year are shown in the following table:")
    out = _bold_block(tmp_path / "wrapped.pdf", wrapped)
    assert [e.text for e in out if e.kind == "heading"] == ["Overview"]
    assert [e.text for e in out if e.text.startswith("The components")] == [wrapped]
    kept = _bold_block(tmp_path / "label.pdf", "SEGMENT SALES RESULTS:")
    assert [e.text for e in kept if e.kind == "heading"] == ["Overview", "SEGMENT SALES RESULTS:"]
