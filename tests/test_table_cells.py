"""When a visual line of a table without rules between its rows still belongs to the row above
(chunker.convert.pdf_text.cells.continues): read from the words, since such tables space rows and wrapped lines
alike. Cases from real tables: a policy's allowance table, exhibit lists, financial statements, credit ratings."""

from __future__ import annotations

import pytest

from chunker.convert.pdf_text.cells import band_rows, continues, Seg


@pytest.mark.parametrize("row, line", [
    (["Compressed", "Not", "Includes butane, propane,"], ["Gases", "Allowed", "oxygen cylinders (except for"]),
    (["Compressed Gases", "Not Allowed", "Includes butane, propane, oxygen cylinders (except for"],
     ["(incl. LPG)", "", "medical use with prior"]),
    (["Lithium Batteries", "* See Remarks", "Only for personal electronic devices; spares in hand"],
     ["(Spare)", "", "baggage only. Max 2 per"]),
    (["Cape Town", "CW253", "1-stop in"], ["(CPT)", "", "Johannesburg"]),
    (["Sharp Ob\u00ad", "With Re\u00ad", "Not"], ["jects/Tools", "strictions", "Allowed"]),
    (["Health Care", "Retail/"], ["Benefits", "LTC"]),
])
def test_a_cell_left_unfinished_carries_the_line_into_its_row(row: list[str], line: list[str]) -> None:
    assert continues(row, line)


@pytest.mark.parametrize("row, line", [
    # A new row under a finished one.
    (["Flammable Liquids", "Not Allowed", "Includes paints, petrol, lighter fluid."],
     ["Flammable", "Not", "Safety matches (1 small box"]),
    # Names that start in lower case and one-word values are not a sentence going on.
    (["Russia", "6 months", "Invitation letter needed for some purposes"],
     ["Turkey", "6 months", "e-Visa for tourism"]),
    (["UAE (Dubai)", "Yes", "On-arrival for some categories"], ["Saudi Arabia", "Yes", "eVisa for tourism"]),
    (["Alpha", "yes"], ["Beta", "no"]),
    # A credit rating "A-" is not a word cut at a hyphen, nor "A" an article.
    (["", "Long Term", "A2", "A-", "A"], ["Amex Credit Corporation", "Short Term", "Prime-1", "A-2", "F1"]),
    # Figures never wrap: another figure, or anything, under one is the next row, whatever the label says.
    (["Other stock units (1) Equity compensation plans not approved by", "11,870,813"], ["shareholders", "None"]),
    (["4.1", "Form of common stock certificate of the Registrant and"], ["4.2", "certain holders"]),
    (["Divestitures loss (gain) (e) Acquisition transaction and", "30.0 0.2 %"], ["integration costs (f)", "25.6"]),
])
def test_a_finished_row_is_not_continued(row: list[str], line: list[str]) -> None:
    assert not continues(row, line)


def _seg(text: str, x0: float, y: float) -> Seg:
    return Seg(text, x0, x0 + 6 * len(text), y, int(y), False)


def test_band_rows_keep_a_three_line_row_whole_and_open_the_next() -> None:
    # Columns at x 0, 100, 200 (separators at 90 and 190); rows of three and two lines, spaced alike.
    segs = [_seg("Compressed", 0, 10), _seg("Not", 100, 10), _seg("Includes butane,", 200, 10),
            _seg("Gases", 0, 22), _seg("Allowed", 100, 22), _seg("oxygen cylinders (except for", 200, 22),
            _seg("(incl. LPG)", 0, 34), _seg("medical use).", 200, 34),
            _seg("Flammable", 0, 46), _seg("Not", 100, 46), _seg("Includes paints,", 200, 46),
            _seg("Liquids", 0, 58), _seg("Allowed", 100, 58), _seg("petrol.", 200, 58)]
    assert band_rows(segs, [90.0, 190.0], 3, merge_all=False) == [
        ["Compressed Gases (incl. LPG)", "Not Allowed", "Includes butane, oxygen cylinders (except for medical use)."],
        ["Flammable Liquids", "Not Allowed", "Includes paints, petrol."],
    ]


def test_a_column_of_percent_signs_joins_the_figures_to_its_left() -> None:
    from chunker.convert.pdf_text.cells import merge_sign_columns

    header = ["", "2022", "", "2021", ""]
    rows = [["Pharmacy", "76.9", "%", "76.0", "%"], ["Earnings per share", "(2)", "%", "—", ""],
            ["Stores", "9,939", "", "9,962", ""]]
    assert merge_sign_columns(header, rows) == (
        ["", "2022", "2021"], [["Pharmacy", "76.9%", "76.0%"], ["Earnings per share", "(2)%", "—"],
                               ["Stores", "9,939", "9,962"]], [0, 1, 3])
    # A column that also holds figures is a column of its own; so is one beside no figures.
    mixed = [["Growth", "25", "%"], ["Margin", "4", "12"]]
    assert merge_sign_columns(["", "A", "B"], [list(r) for r in mixed])[1] == mixed
    words = [["Class", "Economy", "%"]]
    assert merge_sign_columns(["", "A", "B"], [list(r) for r in words])[1] == words
