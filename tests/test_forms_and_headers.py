"""Forms read as label: value pairs, and column paths that hold header text only (issue 40, items 3 and 4): on the
pdf-text path with generated PDFs, and on the model's Markdown through the contract parser."""

from __future__ import annotations

from pathlib import Path

import pytest

from chunker.contract import figure_row_sentence, parse_markdown
from chunker.forms import read_form
from chunker.tabletext import is_sentence_piece, is_unit_line, split_unit, unit_text

pytest.importorskip("fpdf")

from chunker.eval.devset.pdfdoc import DevPdf, Style, TableSpec  # noqa: E402
from test_pdf_text_patterns import _markdown, _rows  # noqa: E402

FORM = [["Location:", "Springfield, Utopia", "Date & Time:", "March 3, 2024, 14:05"],
        ["Accident Number:", "ABC24LA101", "Registration:", "N123AB"],
        ["Aircraft Make:", "Cessna", "Model/Series:", "172S"]]


def _form_pdf(tmp_path: Path, stacked: bool = False) -> str:
    pdf = DevPdf(Style(family="Helvetica", body=10))
    pdf.add_page()
    pdf.heading("Aviation Investigation Final Report", 1)
    if stacked:  # a row of labels over a row of their values
        rows = [[c for c in r[::2]] + [""] for r in FORM]
        grid = [x for r in FORM for x in ([r[0], r[2]], [r[1], r[3]])]
        spec = TableSpec(header=[grid[0]], rows=grid[1:], widths=[85.0, 85.0], grid=True)
        del rows
    else:
        spec = TableSpec(header=[FORM[0]], rows=FORM[1:], widths=[35.0, 50.0, 35.0, 50.0], grid=True)
    pdf.ruled_table(spec)
    return _markdown(pdf, tmp_path / "form.pdf")


@pytest.mark.parametrize("stacked", [False, True])
def test_a_ruled_form_is_read_as_label_value_pairs(tmp_path: Path, stacked: bool) -> None:
    rows = _rows(_form_pdf(tmp_path, stacked))
    text = "\n".join(rows)
    assert "Location: Springfield, Utopia" in text and "Date & Time: March 3, 2024, 14:05" in text
    assert "Accident Number: ABC24LA101" in text and "Registration: N123AB" in text
    assert "Aircraft Make: Cessna" in text and "Model/Series: 172S" in text
    assert "::" not in text and "Location:: " not in text, "no label is read as another label's header"
    # Pairs in reading order.
    assert text.index("Location:") < text.index("Date & Time:") < text.index("Accident Number:")


def test_a_key_value_grid_in_model_markdown_is_a_form_with_its_title_as_heading() -> None:
    md = ("# Final Report\n\n| Factual Information | | | |\n| --- | --- | --- | --- |\n"
          + "".join("| " + " | ".join(r) + " |\n" for r in FORM) + "\nThe pilot reported a loss of power.")
    els = parse_markdown("d", [(md, 1)])
    heads = [(e.level, e.text) for e in els if e.kind == "heading"]
    assert heads == [(1, "Final Report"), (2, "Factual Information")]
    rows = [e for e in els if e.kind == "table_row"]
    assert [r.text for r in rows] == [
        "Location: Springfield, Utopia; Date & Time: March 3, 2024, 14:05",
        "Accident Number: ABC24LA101; Registration: N123AB",
        "Aircraft Make: Cessna; Model/Series: 172S"]
    assert rows[0].heading_path == ["Final Report", "Factual Information"]


def test_a_real_table_with_a_label_like_header_stays_a_table() -> None:
    md = ("| Segment: | 2023 | 2022 |\n| --- | --- | --- |\n| Americas | 1,200 | 1,100 |\n| Europe | 800 | 750 |\n"
          "| Asia | 400 | 390 |\n")
    rows = [e.text for e in parse_markdown("d", [(md, 1)]) if e.kind == "table_row"]
    assert rows == ["Segment: Americas; 2023: 1,200; 2022: 1,100.", "Segment: Europe; 2023: 800; 2022: 750.",
                    "Segment: Asia; 2023: 400; 2022: 390."]
    assert read_form([["Segment:", "2023", "2022"], ["Americas", "1,200", "1,100"], ["Europe", "800", "750"]]) is None


def test_header_text_rules() -> None:
    # A unit line, and a sentence that names a unit in its closing parenthetical.
    assert is_unit_line("(In millions, except per share data)") and is_unit_line("$ in thousands")
    assert is_unit_line("Dollars in Millions") and not is_unit_line("Cash flows were as follows ($ in millions):")
    assert split_unit("Cash flows were as follows ($ in millions):") == (
        "Cash flows were as follows ($ in millions):", "$ in millions")
    assert split_unit("(in thousands)") == ("", "in thousands")
    # Parentheses balance: units of two columns run together are two units, never "in thousands) (in millions".
    assert unit_text("(in thousands) (in millions)") == "in thousands; in millions"
    assert unit_text("(In millions)") == "In millions" and unit_text("(a) note (b)") == "(a) note (b)"
    row = figure_row_sentence(["Balance as of September 24, 2022"], [(["Number of RSUs"], "201,501")],
                              "(in thousands) (in millions)")
    assert "in thousands; in millions" in row and "thousands) (in" not in row
    # A sentence piece is no header label; header labels are.
    assert is_sentence_piece("ended July 1, 2023 and June 25, 2022 is as follows (in millions):")
    assert is_sentence_piece("Long-term debt consisted of the following")
    for label in ["Three Months Ended July 1, 2023", "Weighted-average exercise price of outstanding options",
                  "Number of securities remaining available for future issuance", "Balance at End of Period"]:
        assert not is_sentence_piece(label), label


def test_a_lead_in_that_names_the_unit_stays_prose_and_gives_the_rows_their_unit(tmp_path: Path) -> None:
    pdf = DevPdf(Style(family="Helvetica", body=10))
    pdf.add_page()
    pdf.para("Cash flows were as follows ($ in millions):")
    xs = [20.0, 110.0, 140.0, 170.0]
    y = pdf.get_y() + 2
    pdf.use_font("B", 9)
    for x, label in zip(xs[1:], ["2023", "2022", "2021"]):
        pdf.set_xy(x, y)
        pdf.cell(25, 4, label, align="R")
    y += 6
    pdf.use_font("", 10)
    for label, *values in [("Operating activities", "1,824", "3,252", "9,252"),
                           ("Investing activities", "(962)", "(1,372)", "(788)"),
                           ("Financing activities", "(1,530)", "(4,297)", "(4,900)")]:
        pdf.set_xy(xs[0], y)
        pdf.cell(60, 5, label)
        for x, v in zip(xs[1:], values):
            pdf.set_xy(x, y)
            pdf.cell(25, 5, v, align="R")
        y += 6
    md = _markdown(pdf, tmp_path / "cash.pdf")
    els = parse_markdown("d", [(md, 1)])
    rows = [e.text for e in els if e.kind == "table_row"]
    assert rows and all("were as follows" not in r for r in rows), rows
    assert rows[0].startswith("Operating activities | $ in millions | 2023: 1,824"), rows[0]
    paras = [e.text for e in els if e.kind == "paragraph"]
    assert any(p.startswith("Cash flows were as follows") for p in paras), "the lead-in stays a paragraph"


def test_a_two_column_schedule_without_a_header_writes_no_placeholder(tmp_path: Path) -> None:
    pdf = DevPdf(Style(family="Helvetica", body=10))
    pdf.add_page()
    pdf.para("Future minimum lease payments are as follows (in millions):")
    spec = TableSpec(header=[], rows=[["2024", "3,417"], ["2025", "3,100"], ["2026", "2,870"], ["Thereafter", "9,004"]],
                     widths=[60.0, 40.0], aligns=["L", "R"], grid=True)
    pdf.ruled_table(spec)
    rows = _rows(_markdown(pdf, tmp_path / "schedule.pdf"))
    assert rows and not any("Column" in r for r in rows), rows
    assert any(r.startswith("2024") and "3,417" in r for r in rows), rows
