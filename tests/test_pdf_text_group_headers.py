"""Group headers over a table's columns on the pdf-text path (chunker.convert.pdf_text.spans), each with a generated
PDF: a header heads exactly the columns of its group, whether it is set flush with the group's right edge, centred
over it, or narrow inside a column's label beside centred neighbours; a period set in the stub reaches the columns of
years and not a change column beside them; a row of years in heading type is no heading."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("fpdf")

from chunker.eval.devset.pdfdoc import DevPdf, Style  # noqa: E402
from test_pdf_text_patterns import _headings, _markdown, _rows  # noqa: E402

Cell = tuple[str, float, str]  # text, right edge (mm), alignment: "R" flush right at the edge, "C" centred on it


def _table(path: Path, header: list[list[Cell]], rights: list[float], rows: list[tuple[str, list[str]]],
           width: float = 22.0, step: float = 4.0) -> list[str]:
    """A table under a lead-in: header lines (bold, 8 pt, ``step`` mm apart), then rows whose figures are set flush
    right at ``rights``; the rows the converter reads."""
    pdf = DevPdf(Style(family="Times", body=10, sizes=(16, 12, 10.5)))
    pdf.add_page()
    pdf.para("The table below sets out the balances of the company for the periods presented.")
    y = pdf.get_y() + 2
    pdf.set_font("Times", "B", 8)
    for line in header:
        for text, at, align in line:
            w = pdf.get_string_width(text) + 1 if align == "C" else width
            pdf.set_xy(at - w / 2 if align == "C" else at - w, y)
            pdf.cell(w, 4, text, align="C" if align == "C" else "R")
        y += step
    pdf.set_font("Times", "", 10)
    for label, values in rows:
        y += 5.5
        pdf.set_xy(20, y)
        pdf.cell(50, 5, label)
        for r, v in zip(rights, values):
            pdf.set_xy(r - 20, y)
            pdf.cell(20, 5, v, align="R")
    return _rows(_markdown(pdf, path))


def test_group_years_flush_with_their_groups_right_edge_head_their_own_three_columns(tmp_path: Path) -> None:
    """"2021" set flush right over the last of its three columns, "2020" over the last of the next three: the
    first group's columns are the 2021 ones, not the columns nearest to "2020"'s left."""
    rights = [80.0, 102.0, 124.0, 146.0, 168.0, 190.0]
    labels = ["Gross Amount", "Amortization", "Net Amount"] * 2
    header = [[("2021", rights[2], "R"), ("2020", rights[5], "R")], [(t, r, "R") for t, r in zip(labels, rights)]]
    body = [("Customer lists", ["4,201", "(1,126)", "3,075", "4,021", "(1,961)", "2,060"]),
            ("Acquired technology", ["1,911", "(1,343)", "568", "1,827", "(1,180)", "647"])]
    rows = _table(tmp_path / "groups.pdf", header, rights, body)
    years = ["2021"] * 3 + ["2020"] * 3
    assert rows == [f"{label} | " + "; ".join(f"{y} > {t}: {v}" for y, t, v in zip(years, labels, values))
                    for label, values in body]


def test_centred_group_headers_split_the_columns_evenly_even_one_set_inside_a_label(tmp_path: Path) -> None:
    """Three headers each centred over three columns: "Less than 12 months", "12 months or more" and "Total", which
    is narrower than the column label under it. The middle header is also centred over five columns by chance; the
    split that gives every header a group of its own wins, and "Total" heads three columns, not one."""
    rights = [66.0, 84.0, 102.0, 120.0, 138.0, 156.0, 174.0, 192.0, 210.0]
    labels = ["Securities", "Fair Value", "Losses"] * 3
    header = [[("Less than 12 months", rights[1] - 5, "C"), ("12 months or more", rights[4] - 5, "C"),
               ("Total", rights[7] - 5, "C")],
              [(t, r, "R") for t, r in zip(labels, rights)]]
    body = [("Fair value 90%-100%", ["74", "4,287", "(74)", "3", "52", "(1)", "77", "4,339", "(75)"]),
            ("Fair value under 90%", ["14", "24", "(9)", "0", "0", "0", "14", "24", "(9)"])]
    rows = _table(tmp_path / "centred.pdf", header, rights, body, width=17.0)
    groups = ["Less than 12 months"] * 3 + ["12 months or more"] * 3 + ["Total"] * 3
    assert rows == [f"{label} | " + "; ".join(f"{g} > {t}: {v}" for g, t, v in zip(groups, labels, values))
                    for label, values in body]


def test_a_period_in_the_stub_reaches_the_years_and_not_the_change_columns_beside_them(tmp_path: Path) -> None:
    """"Years Ended December 31," set in the stub on the years' line names the years' period; the change columns
    beside them are headed by "Increase/(Decrease)", centred over "2021 vs. 2020" and the percentage, and the row
    labels take no period prefix."""
    rights = [110.0, 135.0, 165.0, 185.0]
    header = [[("Increase/(Decrease)", 166.0, "C")],
              [("Years Ended December 31,", 70.0, "R"), ("2021", rights[0], "R"), ("2020", rights[1], "R"),
               ("2021 vs. 2020", rights[2], "R")]]
    rows = _table(tmp_path / "change.pdf", header, rights,
                  [("Service revenue", ["$95,300", "$88,533", "$6,767", "7.6 %"]),
                   ("Equipment revenue", ["19,781", "15,492", "4,289", "27.7"])], width=48.0)
    assert rows == [
        "Service revenue | Years Ended December 31, 2021: $95,300; Years Ended December 31, 2020: $88,533; "
        "Increase/(Decrease) 2021 vs. 2020: $6,767; Increase/(Decrease): 7.6 %",
        "Equipment revenue | Years Ended December 31, 2021: 19,781; Years Ended December 31, 2020: 15,492; "
        "Increase/(Decrease) 2021 vs. 2020: 4,289; Increase/(Decrease): 27.7"]


def test_a_row_of_years_in_heading_type_is_no_heading(tmp_path: Path) -> None:
    """A line of column years set bold on its own ("2023 2024 2025 After 2025", its figures on a line the table
    reader does not align) is no heading, so the section's own heading stays the breadcrumb of what follows. A
    title with one year in it stays a heading."""
    pdf = DevPdf(Style(family="Helvetica", body=10, sizes=(16, 12, 10.5)))
    pdf.add_page()
    pdf.heading("Projected Benefit Payments 2023", 2)
    pdf.para("The company expects to pay the following benefits over the next years, in millions of dollars.")
    pdf.set_y(pdf.get_y() + 4)
    pdf.para("2023        2024        2025        After 2025", style="B")
    pdf.set_y(pdf.get_y() + 4)
    pdf.para("Payments are estimated from the same assumptions used to measure the obligation at year end.")
    heads = [text for _, text in _headings(_markdown(pdf, tmp_path / "years.pdf"))]
    assert "Projected Benefit Payments 2023" in heads
    assert not any("2024" in h for h in heads), heads


def test_a_unit_wrapped_over_two_lines_above_the_header_is_the_tables_unit(tmp_path: Path) -> None:
    """"(dollars in millions," over "except ARPA)" set flush right above the header: one unit for every figure,
    its second line no column's label."""
    rights = [110.0, 135.0, 165.0, 185.0]
    header = [[("(dollars in millions,", rights[3], "R")], [("except ARPA)", rights[3], "R")],
              [("Increase/(Decrease)", 166.0, "C")],
              [("2021", rights[0], "R"), ("2020", rights[1], "R"), ("2021 vs. 2020", rights[2], "R")]]
    rows = _table(tmp_path / "unit.pdf", header, rights,
                  [("Service", ["$67,733", "$64,884", "$2,849", "4.4 %"]),
                   ("Wireless equipment", ["19,781", "15,492", "4,289", "27.7"])], width=48.0)
    assert rows == [
        "Service | dollars in millions, except ARPA | 2021: $67,733; 2020: $64,884; "
        "Increase/(Decrease) 2021 vs. 2020: $2,849; Increase/(Decrease): 4.4 %",
        "Wireless equipment | dollars in millions, except ARPA | 2021: 19,781; 2020: 15,492; "
        "Increase/(Decrease) 2021 vs. 2020: 4,289; Increase/(Decrease): 27.7"]


def test_a_group_header_narrower_than_its_years_heads_all_of_them_and_a_wrapped_label_stays_whole(
        tmp_path: Path) -> None:
    """"Retirement Plans" set over the middle of "2022  2021  2020", a line above them, heads the three years (not
    the middle year's first line); "Other Benefit Plans" likewise. A label wrapped over two lines over the middle
    one of three labels that are no dates ("Total Number of" over "Shares Purchased") stays one label."""
    rights = [80.0, 100.0, 120.0, 145.0, 165.0, 185.0]
    years = ["2022", "2021", "2020"] * 2
    header = [[("Retirement Plans", rights[1] - 3, "C"), ("Other Benefit Plans", rights[4] - 3, "C")],
              [(y, r, "R") for y, r in zip(years, rights)]]
    body = [("Service cost", ["$1,327", "1,421", "1,380", "320", "309", "287"]),
            ("Interest cost", ["911", "770", "955", "105", "81", "133"])]
    rows = _table(tmp_path / "plans.pdf", header, rights, body, width=16.0, step=3.2)
    groups = ["Retirement Plans"] * 3 + ["Other Benefit Plans"] * 3
    assert rows == [f"{label} | " + "; ".join(f"{g} {y}: {v}" for g, y, v in zip(groups, years, values))
                    for label, values in body]
    rights = [100.0, 140.0, 180.0]
    header = [[("Total Number of", rights[1] - 2, "C")],
              [("Price Paid", rights[0], "R"), ("Shares Purchased", rights[1], "R"), ("Value Left", rights[2], "R")]]
    rows = _table(tmp_path / "wrapped.pdf", header, rights,
                  [("October 2022", ["$152.38", "3,228,300", "$2,115"]), ("November 2022", ["$150.44", "7,572", "$2,100"])],
                  width=30.0, step=3.2)
    assert rows[0] == ("October 2022 | Price Paid: $152.38; Total Number of Shares Purchased: 3,228,300; "
                       "Value Left: $2,115")
