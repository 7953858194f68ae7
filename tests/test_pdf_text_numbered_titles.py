"""Numbered titles in bold at body size, on the pdf-text path: filings number their notes ("7. Leases") and set
each title on a line of its own. Read as a list's first item, a note's text ran into that item and the note sat
under the previous note's last heading (Best Buy's leases under "Fair Value of Financial Instruments"). A bold
footnote and a numbered step stay what they are."""

from __future__ import annotations

from pathlib import Path

import pytest

from chunker.contract import parse_markdown

pytest.importorskip("fpdf")

from chunker.eval.devset.pdfdoc import DevPdf, Style  # noqa: E402
from test_pdf_text_patterns import _markdown  # noqa: E402

PROSE = ("The company reviews its results each quarter and reports them to the board, which approves the plan "
         "for the following year after a discussion of the risks the business faces.")


def _bold_line(pdf: DevPdf, text: str, before: float = 3.0, after: float = 1.0) -> None:
    pdf.ln(before)
    pdf.use_font("B")
    pdf.multi_cell(0, 5, text, new_x="LMARGIN", new_y="NEXT")
    pdf.ln(after)


def _elements(tmp_path: Path) -> list:
    pdf = DevPdf(Style(family="Helvetica", body=10, sizes=(18, 13, 11)))
    pdf.add_page()
    pdf.heading("Notes to Consolidated Financial Statements", 2)
    _bold_line(pdf, "1. Summary of Significant Accounting Policies")
    pdf.para(PROSE)
    # A note's title right over the first heading inside it, both bold, same size, same left edge.
    _bold_line(pdf, "2. Leases")
    _bold_line(pdf, "Operating Leases", before=0.5)
    pdf.para("Lease costs were recorded over the lease term on a straight-line basis in operating expenses.")
    _bold_line(pdf, "1. Relates to the acquisition of the resort in the second quarter")
    pdf.para(PROSE)
    _bold_line(pdf, "1. Install the app")
    pdf.para("Download it from the store and sign in with the account the administrator created for you.")
    pdf.output(str(tmp_path / "notes.pdf"))
    return parse_markdown("d", [(_markdown(pdf, tmp_path / "notes.pdf"), 1)])


def test_a_bold_numbered_title_is_a_heading_and_its_note_sits_under_it(tmp_path: Path) -> None:
    elements = _elements(tmp_path)
    heads = [(e.level, e.text) for e in elements if e.kind == "heading"]
    assert [t for _, t in heads] == ["Notes to Consolidated Financial Statements",
                                     "1. Summary of Significant Accounting Policies", "2. Leases", "Operating Leases"]
    # Both numbered titles at one level, under the section heading: the second note closes the first.
    levels = dict((t, lv) for lv, t in heads)
    assert levels["1. Summary of Significant Accounting Policies"] == levels["2. Leases"] \
        > levels["Notes to Consolidated Financial Statements"]
    paras = [e for e in elements if e.kind == "paragraph"]
    assert paras[0].heading_path == ["Notes to Consolidated Financial Statements",
                                     "1. Summary of Significant Accounting Policies"]
    # The heading inside the note is a second heading, not the title's wrap; at the bold level it follows the
    # title as its sibling (its level says no more), and the first note no longer holds the second's text.
    lease = next(e for e in paras if e.text.startswith("Lease costs"))
    assert lease.heading_path == ["Notes to Consolidated Financial Statements", "Operating Leases"]
    # No note text glued to its title as one list item.
    assert not [e for e in elements if e.kind == "list" and "Leases" in e.text]


def test_a_bold_footnote_and_a_numbered_step_are_no_titles(tmp_path: Path) -> None:
    """Not in title case: "1. Relates to the acquisition ..." (a footnote) and "1. Install the app" (a step)."""
    elements = _elements(tmp_path)
    texts = {e.text: e for e in elements}
    assert not [e for e in elements if e.kind == "heading" and ("Relates" in e.text or "Install" in e.text)]
    assert any("Relates to the acquisition" in t for t in texts)
    assert any("Install the app" in t for t in texts)
