"""Financial schedules on the pdf-text path, each reproduced with a generated PDF (split from
``test_pdf_text_patterns``, whose helpers it uses): bold group labels over a block of rows, column labels set once
above several tables, rows under a ruled table's rules, note marks, negative figures, and period lead-ins narrower
than the years they span."""

from __future__ import annotations

from pathlib import Path

import pytest

from chunker.contract import parse_markdown

pytest.importorskip("fpdf")

from chunker.eval.devset.pdfdoc import DevPdf, Style  # noqa: E402
from test_pdf_text_patterns import _markdown, _rows  # noqa: E402


def _schedule(tmp_path: Path) -> str:
    """A roll-forward schedule as a 10-K sets one: column labels in small bold type over two lines, the unit in the
    stub, a bold year alone on its row over each year's rows, a note mark set small after a row label, a "$" apart
    from its figure, and negative figures in parentheses that read like column numbers ("(2)")."""
    pdf = DevPdf(Style(family="Times", body=10, sizes=(16, 12, 10.5)))
    pdf.add_page()
    pdf.para("Below are the accruals for rebates and returns of the segment for the last two fiscal years.")
    xs, w = [20.0, 80.0, 110.0, 140.0, 170.0], 28.0  # column lefts; labels and figures set right in each
    y = pdf.get_y()
    pdf.set_font("Times", "B", 8)
    for x, label in zip(xs[1:], ["Balance at", "", "", "Balance at"]):
        pdf.set_xy(x, y)
        pdf.cell(w, 4, label, align="R")
    y += 3
    pdf.set_xy(xs[0], y)
    pdf.cell(50, 4, "(Dollars in Millions)")
    for x, label in zip(xs[1:], ["Beginning of Period", "Accruals", "Payments", "End of Period"]):
        pdf.set_xy(x, y)
        pdf.cell(w, 4, label, align="R")
    y += 6
    for year, rows in [("2022", [("Accrued rebates", "287", "1,052", "(948)", "391"),
                                 ("Accrued returns", "76", "(2)", "(21)", "53"),
                                 ("Total", "363", "1,050", "(969)", "444")]),
                       ("2021", [("Accrued rebates", "289", "893", "(895)", "287"),
                                 ("Accrued returns", "76", "(3)", "(11)", "62"),
                                 ("Total", "365", "890", "(906)", "349")])]:
        pdf.set_font("Times", "B", 10)
        pdf.set_xy(xs[0], y)
        pdf.cell(40, 5, year)
        y += 6
        for n, (label, *values) in enumerate(rows):
            pdf.set_font("Times", "", 10)
            pdf.set_xy(xs[0], y)
            pdf.cell(pdf.get_string_width(label) + 1, 5, label)
            if n == 0:
                pdf.set_font("Times", "", 6)
                pdf.cell(6, 3, "(1)")  # the note mark, small and raised
                pdf.set_font("Times", "", 10)
                pdf.set_xy(xs[1] + 4, y)
                pdf.cell(4, 5, "$")
            for x, v in zip(xs[1:], values):
                pdf.set_xy(x, y)
                pdf.cell(w, 5, v, align="R")
            y += 6
        y += 4
    return _markdown(pdf, tmp_path / "schedule.pdf")


def test_a_schedule_with_a_bold_year_over_each_years_rows_keeps_its_labels(tmp_path: Path) -> None:
    """Seen in a 10-K's reserve schedules: the bold "2022" alone on its row read as a figure, so the header above
    it was never reached and every row went out unlabelled; the small note mark "(1)" after a label read as the
    row's first figure; a row whose figures are "(2)  (21)" read as a header of column numbers and broke the
    table in two."""
    rows = _rows(_schedule(tmp_path))
    assert rows == [
        f"{year} > {label} | Dollars in Millions | Balance at Beginning of Period: {a}; Accruals: {b}; "
        f"Payments: {c}; Balance at End of Period: {d}" for year, label, a, b, c, d in [
            ("2022", "Accrued rebates (1)", "$287", "1,052", "(948)", "391"),
            ("2022", "Accrued returns", "76", "(2)", "(21)", "53"), ("2022", "Total", "363", "1,050", "(969)", "444"),
            ("2021", "Accrued rebates (1)", "$289", "893", "(895)", "287"),
            ("2021", "Accrued returns", "76", "(3)", "(11)", "62"), ("2021", "Total", "365", "890", "(906)", "349")]
    ], rows


def _grouped_lists(tmp_path: Path) -> str:
    """Two ruled lists in the same columns, each opening with a bold group label alone in its band (as a 10-K sets
    its directors and officers): the column labels are set once, above the first list's rules."""
    pdf = DevPdf(Style(family="Helvetica", body=10, sizes=(20, 13, 11)))
    pdf.add_page()
    pdf.para("The directors and executive officers of the company are listed below.")
    xs, widths = [20.0, 85.0, 125.0], [60.0, 35.0, 55.0]
    pdf.set_font("Helvetica", "B", 9)
    y = pdf.get_y()
    for x, w, label in zip(xs, widths, ["Name", "Age", "Position Held Since"]):
        pdf.set_xy(x, y)
        pdf.cell(w, 5, label)
    y += 6
    for n, (group, rows) in enumerate([
            ("Directors", [("Ada Lindqvist", "61", "Chair of the Board, 2015"), ("Tomas Berg", "58", "Lead Director, 2019")]),
            ("Executive officers", [("Maria Holm", "52", "Chief Executive Officer, 2020"),
                                    ("Jon Ek", "47", "Chief Financial Officer, 2021")])]):
        if n:
            pdf.set_font("Helvetica", "", 8)
            pdf.set_xy(20, y)
            pdf.cell(150, 4, "Directors are elected every year at the annual meeting of shareholders.")
            y += 12
        pdf.line(20, y, 180, y)
        pdf.set_font("Helvetica", "B", 10)
        pdf.set_xy(xs[0], y + 1)
        pdf.cell(60, 5, group)
        y += 7
        pdf.line(20, y, 180, y)
        pdf.set_font("Helvetica", "", 10)
        for cells in rows:
            for x, w, text in zip(xs, widths, cells):
                pdf.set_xy(x, y + 1)
                pdf.cell(w, 5, text)
            y += 6
        pdf.line(20, y + 1, 180, y + 1)
        y += 5
    return _markdown(pdf, tmp_path / "officers.pdf")


def test_a_bold_group_label_is_no_header_and_the_next_list_reads_with_the_labels_above(tmp_path: Path) -> None:
    """Seen in 10-K schedules: a bold label alone in a ruled table's first band ("2022", "Directors") was taken as
    its header, the column labels above the rules went out as a paragraph and the rows under "Column 2"; the
    same columns' next table on the page ("2021") had no labels at all."""
    rows = _rows(_grouped_lists(tmp_path))
    assert rows == ["Name: Directors.",
                    "Name: Ada Lindqvist; Age: 61; Position Held Since: Chair of the Board, 2015.",
                    "Name: Tomas Berg; Age: 58; Position Held Since: Lead Director, 2019.",
                    "Name: Executive officers.",
                    "Name: Maria Holm; Age: 52; Position Held Since: Chief Executive Officer, 2020.",
                    "Name: Jon Ek; Age: 47; Position Held Since: Chief Financial Officer, 2021."], rows


def test_rows_read_under_a_ruled_tables_rules_take_its_labels_and_group() -> None:
    """A schedule ruled only around its header and first rows (fills, underlines) goes out as a ruled table and,
    below it, rows the aligned-figure reader takes up. Those rows carry the ruled table's column labels and its
    open group label when their figures end where its columns do; a broken label is lent to nobody."""
    from chunker.convert.pdf_text.aligned import AlignedTable, BodyRow, Column, Row, Seg
    from chunker.convert.pdf_text.blocks import FlowState, PageWriter
    from chunker.convert.pdf_text.headings import FontStats
    from chunker.convert.pdf_text.tables import Table
    from chunker.convert.pdf_text.textlayer import PageText

    def write(labels: list[str]) -> list[str]:
        writer = PageWriter(PageText(1, 600.0, 800.0, [], 0), FontStats(10.0, []), FlowState(), set())
        writer.table(Table((50, 100, 560, 140), ["(Dollars in Millions)", *labels],
                           [["2022", "", ""], ["Accrued rebates", "$287", "1,052"]], set(), header_bold=True,
                           columns=[50.0, 300.0, 400.0], rights=[120.0, 337.0, 413.0]))
        row = Row([Seg("Accrued returns", 50, 120, 0)], 150, 160, 10.0, False)
        writer.aligned(AlignedTable((50, 150, 560, 170), [Column(338.0, 320.0), Column(412.0, 395.0)],
                                    [BodyRow("Accrued returns", ["76", "83"], 50.0, row),
                                     BodyRow("Total", ["$363", "1,135"], 50.0, row)], set()))
        return [e.text for e in parse_markdown("d", [(writer.render([], []), 1)]) if e.kind == "table_row"][2:]

    assert write(["Balance at Beginning of Period", "Accruals"]) == [
        "2022 > Accrued returns | Dollars in Millions | Balance at Beginning of Period: 76; Accruals: 83",
        "2022 > Total | Dollars in Millions | Balance at Beginning of Period: $363; Accruals: 1,135"]
    assert write(["Balance at Beginning of Period", "ths Ended"]) == ["Accrued returns | 76; 83", "Total | $363; 1,135"]


def test_a_lead_in_narrower_than_the_years_it_spans_reaches_every_year(tmp_path: Path) -> None:
    """Seen in 10-Ks (Amcor's EPS, CVS' income statement, Block's selected data): "Years ended June 30," is set
    centred over three year columns but is narrower than they are; it was read as the middle year's label wrapped
    ("Years ended June 30, 2022") and the other years lost the period. A date set over its own year ("July 2," over
    "2023") stays its column's own."""
    pdf = DevPdf(Style(family="Times", body=10, sizes=(16, 12, 10.5)))
    pdf.add_page()
    pdf.para("The following table reconciles the net income used in the earnings per share computations.")
    rights = [125.0, 150.0, 175.0]
    y = pdf.get_y() + 2
    pdf.set_font("Times", "B", 9)
    pdf.set_xy(rights[1] - 24, y)
    pdf.cell(28, 4, "Years ended June 30,", align="C")
    y += 4.5
    pdf.set_xy(20, y)
    pdf.cell(60, 4, "($ in millions)")
    for r, year in zip(rights, ["2023", "2022", "2021"]):
        pdf.set_xy(r - 20, y)
        pdf.cell(20, 4, year, align="R")
    pdf.set_font("Times", "", 10)
    rows = [("Net income attributable to the company", ["1,048", "805", "939"]),
            ("Earnings attributable to shares to be repurchased", ["(7)", "(3)", "(2)"]),
            ("Net income available to ordinary shareholders", ["1,041", "802", "937"])]
    for label, values in rows:
        y += 5.5
        pdf.set_xy(20, y)
        pdf.cell(80, 5, label)
        for r, v in zip(rights, values):
            pdf.set_xy(r - 20, y)
            pdf.cell(20, 5, v, align="R")
    assert _rows(_markdown(pdf, tmp_path / "eps.pdf")) == [
        f"{label} | $ in millions | Years ended June 30, 2023: {a}; Years ended June 30, 2022: {b}; "
        f"Years ended June 30, 2021: {c}" for label, (a, b, c) in rows]
    # A date set over its own year, a line higher than its neighbour's (the first column has one line more):
    # "July 2," is no lead-in over both columns.
    pdf = DevPdf(Style(family="Times", body=10, sizes=(16, 12, 10.5)))
    pdf.add_page()
    pdf.para("Condensed consolidated balance sheets of the company at the end of the quarter and of the year.")
    y = pdf.get_y() + 2
    pdf.set_font("Times", "B", 9)
    for dy, cells in [(0.0, [("July 2,", 150.0)]), (4.0, [("2023", 150.0), ("December 31,", 175.0)]),
                      (8.0, [("(Unaudited)", 150.0), ("2022", 175.0)])]:
        for text, r in cells:
            pdf.set_xy(r - 24, y + dy)
            pdf.cell(24, 4, text, align="R")
    pdf.set_font("Times", "", 10)
    y += 8
    for label, a, b in [("Cash and cash equivalents", "2,632", "416"), ("Short-term investments", "42,153", "22,316")]:
        y += 5.5
        pdf.set_xy(20, y)
        pdf.cell(80, 5, label)
        for r, v in [(150.0, a), (175.0, b)]:
            pdf.set_xy(r - 20, y)
            pdf.cell(20, 5, v, align="R")
    assert _rows(_markdown(pdf, tmp_path / "balance.pdf")) == [
        "Cash and cash equivalents | July 2, 2023 (Unaudited): 2,632; December 31, 2022: 416",
        "Short-term investments | July 2, 2023 (Unaudited): 42,153; December 31, 2022: 22,316"]
