"""Tables of aligned figures on the text-layer path: column paths (spanning header > date > unit), row-label
sections, totals, continuation over a page break, running furniture kept out, and the document's identity.

Material: a generated 10-Q-like statement (tests/statement_pdf.py) and hand-built rows for the header rules.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from chunker.config import Config
from chunker.contract import figure_row_sentence, parse_markdown, row_labelled
from chunker.convert.pdf_text.aligned import BodyRow, Column, Row, Seg
from chunker.convert.pdf_text.colheads import _body_rows, _paths, label_paths
from chunker.intake.identity import document_identity
from chunker.run.local import process_document_async
from scaled_pdf import write_scaled
from statement_pdf import write_statement


@pytest.fixture(scope="module")
def statement(tmp_path_factory: pytest.TempPathFactory):  # noqa: ANN201 - DocumentResult
    pdf = write_statement(tmp_path_factory.mktemp("stmt") / "acme-q2.pdf")
    return asyncio.run(process_document_async(pdf, Config()))


def _rows(result) -> dict[str, str]:  # noqa: ANN001
    """Table-row elements keyed by their row label (the text before the first " | ")."""
    return {e.text.split(" | ")[0]: e.text for e in result.elements if e.kind == "table_row"}


def test_every_figure_carries_its_column_path_and_the_unit(statement) -> None:  # noqa: ANN001
    rows = _rows(statement)
    total = rows["Net sales > Total net sales"]
    assert total.startswith("Net sales > Total net sales | In millions, except per share amounts | ")
    assert "Three Months Ended March 30, 2024: 90,753" in total
    assert "Three Months Ended April 1, 2023: 94,836" in total
    assert "Six Months Ended March 30, 2024: 209,461" in total
    assert "Six Months Ended April 1, 2023: 211,990" in total
    # The currency sign set apart from its figure is written with it.
    assert "Three Months Ended March 30, 2024: $66,886" in rows["Net sales > Products"]
    assert "(329)" in rows["Other income/(expense), net"]


def test_section_labels_carry_over_and_totals_stay_rows(statement) -> None:  # noqa: ANN001
    rows = _rows(statement)
    assert "Operating expenses > Research and development" in rows
    assert "Operating expenses > Total operating expenses" in rows
    # After the total the section is closed: the next row is not under it.
    assert "Operating income" in rows
    headings = [e.text for e in statement.elements if e.kind == "heading"]
    assert not any(h.startswith("Total") for h in headings), headings
    # The header's words are in the rows, not left behind as headings or paragraphs.
    assert not any("Three Months Ended" in e.text for e in statement.elements if e.kind != "table_row")


def test_a_statement_continued_on_the_next_page_keeps_its_column_paths(statement) -> None:  # noqa: ANN001
    rows = _rows(statement)
    net = rows["Net income"]
    assert "Three Months Ended March 30, 2024: $23,636" in net and "Six Months Ended April 1, 2023: $54,458" in net
    assert "In millions, except per share amounts" in net
    by_label = {e.text.split(" | ")[0]: e for e in statement.elements if e.kind == "table_row"}
    # One table over both pages: the continuation is in the same group as the rows before the break.
    assert by_label["Net income"].page_start == 3 and by_label["Net sales > Products"].page_start == 2
    assert by_label["Net income"].group == by_label["Net sales > Products"].group


def test_running_header_and_footer_stay_out_of_tables_and_text(statement) -> None:  # noqa: ANN001
    for e in statement.elements:
        assert "Form 10-Q |" not in e.text and "10-Q | 2" not in e.text, e.text


def test_identity_from_the_cover_and_running_lines(statement, tmp_path: Path) -> None:  # noqa: ANN001
    identity = statement.document.identity
    assert "FORM 10-Q" in identity and "Acme Devices Inc." in identity
    assert "For the quarterly period ended March 30, 2024" in identity
    assert all(c.identity == identity for c in statement.chunks)
    # A PDF without a text layer has no identity, and that is not an error.
    from fpdf import FPDF

    blank = FPDF()
    blank.add_page()
    blank.output(str(tmp_path / "blank.pdf"))
    assert document_identity(str(tmp_path / "blank.pdf"), 1) == ""


def test_the_issuer_set_at_body_size_joins_the_identity(tmp_path: Path) -> None:
    from fpdf import FPDF

    # A cover where every line has one size, so no title block stands out: the issuer is the line that is a name
    # with a legal form. Prose that ends in "company" is not a name; a later legal name is not the issuer.
    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    for n in range(3):
        pdf.add_page()
        lines = ["UNITED STATES SECURITIES AND EXCHANGE COMMISSION", "FORM 10-K",
                 "For the fiscal year ended May 31, 2020", "We sell through stores run by the company",
                 "NORTHWIND FOODS, INC.", "Delaware 41-0274440", "Contoso Bank plc"] if n == 0 else \
                [f"Page {n + 1} of the annual report: net sales rose in every segment this year."]
        for line in lines:
            pdf.cell(0, 8, line, new_x="LMARGIN", new_y="NEXT")
    path = tmp_path / "cover.pdf"
    pdf.output(str(path))
    identity = document_identity(str(path), 3)
    assert "NORTHWIND FOODS, INC." in identity and "For the fiscal year ended May 31, 2020" in identity
    assert "Contoso" not in identity and "the company" not in identity
    # Without a legal name on the first page there is no issuer part, and nothing else changes.
    plain = FPDF()
    plain.set_font("Helvetica", size=11)
    plain.add_page()
    plain.cell(0, 8, "Pump service manual, revised March 3, 2021", new_x="LMARGIN", new_y="NEXT")
    plain.output(str(tmp_path / "plain.pdf"))
    assert document_identity(str(tmp_path / "plain.pdf"), 1) == "March 3, 2021"


@pytest.mark.parametrize("how", ["tm", "cm"])
def test_text_reporting_fifty_times_its_size_still_splits_into_columns(tmp_path: Path, how: str) -> None:
    """Some filings printed from HTML draw 8-point type as 400-point type through a 0.02 matrix, and pdfium reports
    400: measured in such ems no gap between two figures is a gap, so a statement's columns ran together
    ("4,310,934 3,726,307" under "Column 2"). The page's sizes are read off its glyphs instead."""
    import pypdfium2 as pdfium

    from chunker.convert.pdf_text.textlayer import read_page

    pdf = write_scaled(tmp_path / f"scaled-{how}.pdf", how=how)
    doc = pdfium.PdfDocument(str(pdf))
    try:
        page = read_page(doc[0], 1)
    finally:
        doc.close()
    sizes = {ln.text: ln.size for ln in page.lines}
    assert all(5.0 < s < 14.0 for s in sizes.values()), sizes
    assert sizes["CONSOLIDATED BALANCE SHEETS"] > sizes["As of December 31,"]  # relative sizes are kept
    assert max(page.sizes, key=page.sizes.__getitem__) < 14.0  # the page's size census too (body size)

    result = asyncio.run(process_document_async(pdf, Config()))
    rows = _rows(result)
    cash = rows["Current assets > Cash and cash equivalents"]
    assert "As of December 31, 2017: 2,822,795" in cash and "As of December 31, 2016: 1,467,576" in cash
    assert "in thousands, except share and per share data" in cash
    assert "As of December 31, 2016: 13,586,610" in rows["Total assets"]
    assert not any("Column 2" in r for r in rows.values())


# -- header rules on hand-built rows -----------------------------------------------------------------------------
def _row(y: float, *cells: tuple[str, float, float], size: float = 8.0) -> Row:
    return Row([Seg(t, a, b, 0) for t, a, b in cells], y, y + size * 0.8, size, True)


def test_a_row_label_wrapped_over_three_lines_is_one_label_not_a_section() -> None:
    cols = [Column(470, 440), Column(540, 510)]
    rows = [_row(100, ("Stockholders' equity:", 20, 95)),
            _row(112, ("Common stock, $0.001 par value; 4,990,000,000 shares authorized at December 31,", 37, 410)),
            _row(124, ("2016, respectively; 433,392,686 and 430,054,212 issued and outstanding at", 37, 390)),
            _row(136, ("December 31, 2016, respectively", 37, 160), ("1,871,396", 470, 505), ("1,599,762", 540, 575)),
            _row(148, ("Retained earnings", 37, 100), ("1,731,117", 470, 505), ("1,128,603", 540, 575))]
    body = _body_rows(rows, cols, [], 8.0)
    assert [b.label for b in body] == [
        "Stockholders' equity:",
        "Common stock, $0.001 par value; 4,990,000,000 shares authorized at December 31, 2016, respectively; "
        "433,392,686 and 430,054,212 issued and outstanding at December 31, 2016, respectively",
        "Retained earnings"]
    assert body[1].values == ["1,871,396", "1,599,762"]
    paths = [(p, r.label) for p, r in label_paths(body)[0]]
    # The wrapped label's first line is not a section over the rows after it.
    assert paths[-1] == (["Stockholders' equity:"], "Retained earnings")


def test_spanning_label_goes_to_each_column_it_sits_over() -> None:
    cols = [Column(426, 400), Column(491, 466), Column(558, 532)]
    head = [_row(103, ("Years Ended", 443, 487)),
            _row(116, ("December 2,", 378, 420), ("December 3,", 444, 486), ("November 27,", 507, 555)),
            _row(124, ("2022", 391, 407), ("2021", 457, 472), ("2020", 523, 539))]
    _paths(head, cols, fig_left=400, size=10)
    assert [c.path for c in cols] == [["Years Ended December 2, 2022"], ["Years Ended December 3, 2021"],
                                      ["Years Ended November 27, 2020"]]


def test_label_wrapped_over_lines_is_one_column_label_under_a_spanning_one() -> None:
    cols = [Column(258, 239), Column(301, 282), Column(344, 324), Column(389, 371)]
    head = [_row(59, ("Twelve Months Ended June 30, 2023", 237, 375)),
            _row(72, ("EPS", 363, 378)),
            _row(80, ("(Diluted", 356, 385)),
            _row(87.5, ("Net", 322, 334), ("US", 365, 375)),
            _row(94.5, ("EBITDA", 228, 257), ("EBIT", 276, 294), ("Income", 314, 341), ("cents)", 356, 385))]
    _paths(head, cols, fig_left=239, size=8)
    assert cols[0].path == ["Twelve Months Ended June 30, 2023", "EBITDA"]
    assert cols[2].path == ["Twelve Months Ended June 30, 2023", "Net Income"]
    assert cols[3].path == ["Twelve Months Ended June 30, 2023", "EPS (Diluted US cents)"]


def _body(label: str, indent: float, values: list[str]) -> BodyRow:
    return BodyRow(label, values, indent, Row([], 0, 0, 8, False))


def test_sections_by_indent_caps_and_totals() -> None:
    flat = [_body("ASSETS", 10, []), _body("Current assets:", 10, []), _body("Cash", 10, ["5"]),
            _body("Total current assets", 10, ["9"]), _body("Goodwill", 10, ["3"]),
            _body("LIABILITIES", 10, []), _body("Debt", 10, ["4"])]
    paths = [(p, r.label) for p, r in label_paths(flat)[0]]
    assert paths[0] == (["ASSETS", "Current assets:"], "Cash")
    assert paths[1] == (["ASSETS", "Current assets:"], "Total current assets")
    assert paths[2] == (["ASSETS"], "Goodwill")  # the total closed "Current assets:"; ALL CAPS stays over it
    assert paths[3] == (["LIABILITIES"], "Debt")  # a sibling ALL-CAPS label closes the first
    indented = [_body("Revenue:", 53, []), _body("Subscription", 60, ["16"]), _body("Total revenue", 71, ["17"]),
                _body("Gross profit", 53, ["15"]), _body("Operating expenses:", 53, []), _body("Sales", 60, ["4"])]
    paths, still_open = label_paths(indented)
    assert [(p, r.label) for p, r in paths] == [(["Revenue:"], "Subscription"), (["Revenue:"], "Total revenue"),
                                                ([], "Gross profit"), (["Operating expenses:"], "Sales")]
    # A section open at the page end goes on over the break.
    assert label_paths([_body("Marketing", 60, ["2"])], still_open)[0][0][0] == ["Operating expenses:"]


def test_a_year_alone_heads_the_sections_under_it_until_the_next_year() -> None:
    """A schedule repeated per year ("2022", then "Major goods/services lines:" at the same indent, its rows, then
    "2021" ...) keeps the year over the section: without it three blocks of identical row labels differ only by
    their figures."""
    rows = [_body("2022", 10, []), _body("Major goods/services lines:", 10, []), _body("Pharmacy", 10, ["168,134"]),
            _body("Total", 10, ["169,236"]), _body("Distribution channel:", 10, []), _body("Mail", 10, ["70,466"]),
            _body("2021", 10, []), _body("Major goods/services lines:", 10, []), _body("Pharmacy", 10, ["152,262"])]
    paths = [(p, r.label) for p, r in label_paths(rows)[0]]
    assert paths == [(["2022", "Major goods/services lines:"], "Pharmacy"),
                     (["2022", "Major goods/services lines:"], "Total"),
                     (["2022", "Distribution channel:"], "Mail"),
                     (["2021", "Major goods/services lines:"], "Pharmacy")]


def test_a_dash_for_none_and_the_next_columns_sign_are_two_cells() -> None:
    """"$ — $ — $ 22": each dash is right-aligned in its column and the next column's "$" set flush left just after
    it, closer than a column gap. Read as one cell "— $", the row had text after a figure and was left out of its
    table as prose; the row's first figures are its dashes."""
    from chunker.convert.pdf_text.textlayer import Line

    # (character, left edge): a sign 16 points before its dash, the dash 2 points before the next sign.
    placed = [(c, 20.0 + 5 * k) for k, c in enumerate("Service cost")] + [
        (" ", 80), ("$", 90), (" ", 94), ("—", 110), (" ", 114), ("$", 116), (" ", 120), ("—", 136), (" ", 140),
        ("$", 142), (" ", 146), ("2", 160), ("2", 164)]
    line = Line(chars=[c for c, _ in placed], xs0=[x for _, x in placed],
                xs1=[x + (0 if c == " " else 4) for c, x in placed], bolds=[False] * len(placed), size=10.0)
    segs = [t for t, _, _ in line.segments(8.0, split_currency=True)]
    assert segs == ["Service cost", "$", "—", "$", "—", "$", "22"]


def test_row_sentence_and_pipe_tables_with_row_labels() -> None:
    s = figure_row_sentence(["Operating expenses:", "Research and development"],
                            [(["Three Months Ended April 1, 2023"], "7,457"), (["Six Months Ended"], "")],
                            "($ in millions)")
    assert s == "Operating expenses > Research and development | $ in millions | Three Months Ended April 1, 2023: 7,457"
    each = figure_row_sentence(["Total net sales"], [(["Three Months Ended April 1, 2023"], "94,836")],
                               "$ in millions", unit_each=True)
    assert each == "Total net sales | Three Months Ended April 1, 2023 | $ in millions: 94,836"
    assert row_labelled(["($ in millions)", "2023", "2022"], [["Net sales", "1,234", "1,100"]])
    assert not row_labelled(["Name", "Role"], [["Ann", "CEO"]])
    # A year alone in the stub labels the rows under it: the table is still one of labelled figures.
    grouped = [["2022", "", ""], ["Accrued rebates", "$287", "1,052"]]
    assert row_labelled(["(Dollars in Millions)", "Accruals", "Payments"], grouped)
    assert not row_labelled(["(Dollars in Millions)", "Accruals", "Payments"], [["2022", "287", "1,052"]] * 2)
    md = "| ($ in millions) | 2023 | 2022 |\n|---|---|---|\n| Net sales | 1,234 | 1,100 |\n"
    (row,) = parse_markdown("d", [(md, 1)])
    assert row.text == "Net sales | $ in millions | 2023: 1,234; 2022: 1,100"


def test_a_statement_title_stacked_with_its_company_and_unit_is_its_rows_heading(tmp_path: Path) -> None:
    """Filings printed from HTML set each statement's title at body size, bold, centred, in a stack with the
    company's name and the unit line close by. The title must head the statement's rows (it is what a question
    names: "the balance sheet", "the statement of operations"), not run on into a paragraph with the unit while
    the rows stay under whatever heading came before (here the report's bold date line)."""
    from statement_pdf import write_title_stacks

    result = asyncio.run(process_document_async(write_title_stacks(tmp_path / "stacks.pdf"), Config()))
    rows = {e.text.split(" | ")[0]: e for e in result.elements if e.kind == "table_row"}
    assert rows["Total net sales"].heading_path[-1] == "CONSOLIDATED STATEMENTS OF OPERATIONS", \
        rows["Total net sales"].heading_path
    assert rows["Total assets"].heading_path[-1].startswith("Consolidated Balance Sheets"), \
        rows["Total assets"].heading_path
    # The unit is in every figure, and is not left behind as prose glued to a title.
    assert "in millions, except per share data" in rows["Total net sales"].text
    assert "In Millions" in rows["Total assets"].text
    prose = [e.text for e in result.elements if e.kind == "paragraph"]
    assert not any("millions" in p.lower() for p in prose), prose


def test_a_title_set_left_over_the_company_and_a_small_header_row(tmp_path: Path) -> None:
    """The title block set left, the title a point larger than the company's name: one heading, the title first
    (alone, the company's line would replace the title in the breadcrumb). The header row is in smaller type than
    the body and sits a little further above the first row than the body's leading: it still labels the columns."""
    from statement_pdf import write_title_stacks

    result = asyncio.run(process_document_async(write_title_stacks(tmp_path / "stacks.pdf"), Config()))
    rows = {e.text.split(" | ")[0]: e for e in result.elements if e.kind == "table_row" and e.page_start == 4}
    total = rows["Total Operating Revenues"]
    assert total.heading_path[-1].startswith("Consolidated Statements of Income"), total.heading_path
    assert "Acme Devices Inc. and Subsidiaries" in total.heading_path[-1], total.heading_path
    assert "Years Ended December 31, 2023: 136,835" in total.text, total.text
    assert "Years Ended December 31, 2021: 128,292" in total.text, total.text
    assert "Years Ended December 31, 2022: $110,449" in rows["Operating Revenues > Service revenues and other"].text
