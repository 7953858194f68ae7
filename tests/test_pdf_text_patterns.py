"""Extraction patterns seen on unseen corpora, each reproduced with a generated PDF (the development set's drawing
primitives) and checked on the pdf-text converter's Markdown and the parsed elements.

Words cut by a hyphen at a cell's or heading's line end, bullet glyphs in table cells, per-cell grid boxes, a
literal Markdown '#' on the page, a wrapped title set with generous leading, and financial statements (spanning
period headers, a currency-sign column, totals, section labels)."""

from __future__ import annotations

from pathlib import Path

import pytest

from chunker.config import ConverterConfig
from chunker.convert.pdf_text import PdfTextConverter
from chunker.contract import parse_markdown

pytest.importorskip("fpdf")

from chunker.eval.devset.pdfdoc import DevPdf, Style, TableSpec  # noqa: E402


def _markdown(pdf: DevPdf, path: Path) -> str:
    pdf.output(str(path))
    return PdfTextConverter(ConverterConfig(), "h").markdown_for_pages(str(path), list(range(1, pdf.page_no() + 1)))


def _rows(md: str) -> list[str]:
    return [e.text for e in parse_markdown("d", [(md, 1)]) if e.kind == "table_row"]


def _headings(md: str) -> list[tuple[int, str]]:
    return [(e.level, e.text) for e in parse_markdown("d", [(md, 1)]) if e.kind == "heading"]


def test_words_hyphenated_in_cells_and_headings_are_whole(tmp_path: Path) -> None:
    pdf = DevPdf(Style(family="Helvetica", body=10, sizes=(20, 13, 11)))
    pdf.add_page()
    # A narrow page column forces the title to wrap inside "Specification" (soft hyphens let fpdf2 break there).
    pdf.set_right_margin(120)
    pdf.doc_title("Pump Specification Documentation")
    pdf.set_right_margin(20)
    rows = [["Stavanger Service Center", "Forusbeen 78, Stavanger"],
            ["Trondheim Service Center", "Heggstadmyra 6, Heimdal"]]
    pdf.ruled_table(TableSpec(header=[["Center", "Address"]], rows=rows, widths=[24.0, 40.0], grid=True))
    md = _markdown(pdf, tmp_path / "hyphen.pdf")
    heads = _headings(md)
    assert heads[0][1] == "Pump Specification Documentation", heads
    rows = _rows(md)
    assert "Center: Stavanger Service Center; Address: Forusbeen 78, Stavanger." in rows, rows
    assert "Center: Trondheim Service Center; Address: Heggstadmyra 6, Heimdal." in rows, rows
    assert " ter" not in md and "Cen ter" not in md


def test_a_title_wrapped_at_a_soft_hyphen_is_one_word_in_the_identity(tmp_path: Path) -> None:
    """The document identity reads the title block itself (chunker/intake/identity.py); a title wrapped inside a
    word must read as the converter's heading does, not as "Specifi cation" (a broken word in every chunk's
    identity, embedded and BM25-indexed)."""
    from chunker.intake.identity import document_identity

    pdf = DevPdf(Style(family="Helvetica", body=10, sizes=(20, 13, 11)))
    pdf.add_page()
    # Narrower than for the test above: the title breaks inside "Specification" and inside "Documentation".
    pdf.set_right_margin(140)
    pdf.doc_title("Pump Specification Documentation")
    pdf.set_right_margin(20)
    pdf.para("The pump moves water from the lower tank to the upper tank in every season of the year.")
    path = tmp_path / "title.pdf"
    md = _markdown(pdf, path)
    assert _headings(md)[0][1] == "Pump Specification Documentation", md  # the title does wrap inside the word
    assert document_identity(str(path), 1).startswith("Pump Specification Documentation")


def test_bullets_in_table_cells_stay_in_their_cell(tmp_path: Path) -> None:
    pdf = DevPdf(Style(family="Helvetica", body=10, sizes=(20, 13, 11)))
    pdf.add_page()
    rows = [["Eastgate", "\u2022 Blood tests\n\u2022 Physiotherapy", "Mon-Fri"],
            ["Riverside", "\u2022 Hearing tests\n\u2022 Vaccinations\n\u2022 X-ray", "24 hours"]]
    pdf.ruled_table(TableSpec(header=[["Site", "Services", "Open"]], rows=rows, widths=[40.0, 70.0, 40.0],
                              hanging_bullets=True))
    md = _markdown(pdf, tmp_path / "bullets.pdf")
    assert _rows(md) == ["Site: Eastgate; Services: • Blood tests • Physiotherapy; Open: Mon-Fri.",
                         "Site: Riverside; Services: • Hearing tests • Vaccinations • X-ray; Open: 24 hours."]


def test_grid_drawn_cell_by_cell_is_one_table_with_wrapped_cells(tmp_path: Path) -> None:
    pdf = DevPdf(Style(family="Helvetica", body=10, sizes=(20, 13, 11)))
    pdf.add_page()
    rows = [["Bergen Service Center", "Kokstadvegen 41, 5257 Kokstad", "Mon-Fri 07:30-16:00"],
            ["Gothenburg Service Center", "Importgatan 12, 422 46 Hisings Backa", "Mon-Fri 07:00-16:30"],
            ["Aarhus Service Center", "Hasselager Centervej 9, 8260 Viby J", "Mon-Fri 08:00-16:00"]]
    pdf.ruled_table(TableSpec(header=[["Service Center", "Address", "Opening hours"]], rows=rows,
                              widths=[30.0, 45.0, 45.0], grid=True))
    md = _markdown(pdf, tmp_path / "grid.pdf")
    assert _rows(md) == [f"Service Center: {a}; Address: {b}; Opening hours: {c}." for a, b, c in rows]


def test_literal_markdown_marker_never_reaches_a_heading(tmp_path: Path) -> None:
    pdf = DevPdf(Style(family="Helvetica", body=10, sizes=(20, 13, 11)))
    pdf.add_page()
    pdf.doc_title("# VX-40 Series \u2013 Usage Guide")
    pdf.heading("## 1. Installation", 2)
    pdf.para("Place the pump on a level foundation.")
    heads = _headings(_markdown(pdf, tmp_path / "marker.pdf"))
    assert heads == [(1, "VX-40 Series \u2013 Usage Guide"), (2, "1. Installation")]


def test_wrapped_title_with_generous_leading_is_one_heading(tmp_path: Path) -> None:
    st = Style(family="Times", body=10.5, sizes=(17, 13, 11), title_align="C", title_leading=1.6)
    pdf = DevPdf(st)
    pdf.add_page()
    title = "Guidance on Patient Transport Eligibility and Reimbursement of Travel Expenses for Outpatients"
    pdf.doc_title(title)
    pdf.heading("1. Who Is Eligible", 2)
    for _ in range(3):
        pdf.para("Patients who need a stretcher or continuous oxygen during the journey, and patients whose condition "
                 "means that travelling by other means would harm their health, can book patient transport.")
    heads = _headings(_markdown(pdf, tmp_path / "title.pdf"))
    assert heads == [(1, title), (2, "1. Who Is Eligible")]


def _statement(tmp_path: Path) -> str:
    from chunker.eval.devset.finance import _statement as statement

    pdf = DevPdf(Style(family="Times", body=10, sizes=(16, 12, 10.5), bold_subheads=True))
    pdf.add_page()
    pdf.heading("Condensed Consolidated Statements of Operations", 3)
    pdf.para("Net sales rose on higher volumes in every segment during the quarter, as described below in the "
             "discussion of results. All figures are unaudited and in thousands of dollars.")
    cur = {"Net sales": "16,425", "Cost of sales": "9,870", "Gross profit": "6,555", "Interest expense": "(412)",
           "Net income": "3,020"}
    prior = {"Net sales": "18,765", "Cost of sales": "11,002", "Gross profit": "7,763", "Interest expense": "(398)",
             "Net income": "3,511"}
    ytd = {k: v.replace("1", "2") for k, v in cur.items()}
    ytd_prior = {k: v.replace("1", "3") for k, v in prior.items()}
    pdf.ruled_table(statement([("2024", cur), ("2023", prior), ("2024", ytd), ("2023", ytd_prior)],
                              [("Three Months Ended June 30,", 2), ("Six Months Ended June 30,", 2)],
                              [("Net sales", "first"), ("Cost of sales", ""), ("Gross profit", "total"),
                               ("Other items:", "section"), ("Interest expense", ""), ("Net income", "grand")]))
    pdf.heading("Note 6. Debt", 3)
    pdf.ruled_table(statement([("June 30, 2024", {"Term loan": "12,000", "Total debt": "49,046"}),
                               ("December 31, 2023", {"Term loan": "11,000", "Total debt": "42,051"})], [],
                              [("Term loan", "first"), ("Total debt", "grand")]))
    return _markdown(pdf, tmp_path / "statement.pdf")


def test_financial_statement_headers_currency_and_totals(tmp_path: Path) -> None:
    md = _statement(tmp_path)
    rows = _rows(md)
    # Spanning period headers reach every column; the "$" column joins its figure instead of shifting values. The
    # row label leads the row (a table of figures has no header over its labels).
    assert ("Net sales | Three Months Ended June 30, 2024: $16,425; Three Months Ended June 30, 2023: $18,765; "
            "Six Months Ended June 30, 2024: $26,425; Six Months Ended June 30, 2023: $38,765") in rows, rows
    # A section label goes over the rows below it, and is never glued to the total above it.
    assert any(r.startswith("Other items > Interest expense | Three Months Ended June 30, 2024: (412);") for r in rows)
    assert any(r.startswith("Gross profit | ") for r in rows)
    assert "Total debt | June 30, 2024: $49,046; December 31, 2023: $42,051" in rows
    # Totals are rows, never headings; no data row labels the others; the prose is not a heading either.
    heads = [t for _, t in _headings(md)]
    assert heads == ["Condensed Consolidated Statements of Operations", "Note 6. Debt"], heads
    assert not any(r.startswith("16,425") or "Net sales:" in r for r in rows)


def test_cells_wrapped_together_in_a_table_without_row_rules_stay_one_row(tmp_path: Path) -> None:
    """A booktabs table (rules above and below the header and at the end only) whose label, value and remark all
    wrap over lines, spaced like its rows: each row must stay one row, not one row per visual line (the remark's
    "propane," or "(except for" says the cell goes on; a figure cell never wraps)."""
    pdf = DevPdf(Style(family="Helvetica", body=10, sizes=(20, 13, 11)))
    pdf.add_page()
    rows = [["Compressed gases (incl. LPG)", "Not allowed",
             "Includes butane, propane, oxygen cylinders (except for medical use with prior approval)."],
            ["Flammable liquids", "Not allowed", "Includes paints, thinners, petrol, solvents, lighter fluid."],
            ["Lithium batteries (spare)", "Up to 2, at most 100 Wh each",
             "Only for personal electronic devices; spares in hand baggage only."],
            ["Power banks", "Not allowed", "Never in checked baggage."]]
    pdf.ruled_table(TableSpec(header=[["Item", "Checked baggage", "Remarks"]], rows=rows, widths=[28.0, 26.0, 50.0]))
    md = _markdown(pdf, tmp_path / "booktabs.pdf")
    assert _rows(md) == [f"Item: {a}; Checked baggage: {b}; Remarks: {c}" + ("" if c.endswith(".") else ".")
                         for a, b, c in rows], md


def _body_ruled_table(tmp_path: Path, lead: str, header_lines: list[list[str]]) -> str:
    """A lead-in line, column labels with no rule above them, then a body ruled above and below (as filings draw
    a list of subsidiaries or officers): the labels sit outside the ruled region."""
    pdf = DevPdf(Style(family="Helvetica", body=10, sizes=(20, 13, 11)))
    pdf.add_page()
    pdf.para(lead)
    xs, widths = [20.0, 85.0, 125.0], [60.0, 35.0, 55.0]
    pdf.set_font("Helvetica", "B", 9)
    for labels in header_lines:
        y = pdf.get_y()
        for x, w, label in zip(xs, widths, labels):
            pdf.set_xy(x, y)
            pdf.cell(w, 5, label)
        pdf.set_y(y + 5)
    pdf.set_y(pdf.get_y() + 1)
    pdf.line(20, pdf.get_y(), 180, pdf.get_y())
    pdf.set_font("Helvetica", "", 10)
    for cells in [("Northwind Membership, Inc.", "California", "Northwind Membership"),
                  ("Northwind Canada Ltd.", "Canada", "Northwind Wholesale Canada"),
                  ("NW Insurance Agency, Inc.", "Washington", "NW Insurance Agency")]:
        y = pdf.get_y() + 1
        for x, w, text in zip(xs, widths, cells):
            pdf.set_xy(x, y)
            pdf.cell(w, 5, text)
        pdf.set_y(y + 5)
    pdf.line(20, pdf.get_y() + 1, 180, pdf.get_y() + 1)
    return _markdown(pdf, tmp_path / "schedule.pdf")


def test_column_labels_set_above_a_ruled_body_are_the_tables_header(tmp_path: Path) -> None:
    md = _body_ruled_table(tmp_path, "The following is a list of the subsidiaries of the company:",
                           [["", "State or Other", "Name under Which"],
                            ["Subsidiaries", "Jurisdiction", "It Does Business"]])
    assert _rows(md) == [
        "Subsidiaries: Northwind Membership, Inc.; State or Other Jurisdiction: California; "
        "Name under Which It Does Business: Northwind Membership.",
        "Subsidiaries: Northwind Canada Ltd.; State or Other Jurisdiction: Canada; "
        "Name under Which It Does Business: Northwind Wholesale Canada.",
        "Subsidiaries: NW Insurance Agency, Inc.; State or Other Jurisdiction: Washington; "
        "Name under Which It Does Business: NW Insurance Agency."], md
    # The labels are the header now, not a paragraph of their own.
    assert not any(e.kind == "paragraph" and "Jurisdiction" in e.text for e in parse_markdown("d", [(md, 1)])), md


def test_a_paragraph_running_into_the_labels_leaves_them_alone(tmp_path: Path) -> None:
    """A lead-in whose last line sits tight above and does not end a sentence may be what the "labels" go on
    from: nothing is taken into the header then (half a header, or a paragraph's tail, labels no column)."""
    md = _body_ruled_table(tmp_path, "The subsidiaries below, which the board reviews every quarter and lists with "
                           "the accounts, are shown by", [["Subsidiaries", "Jurisdiction", "Business name"]])
    assert not any("Jurisdiction: California" in r for r in _rows(md)), md


def _paras(md: str) -> list[str]:
    return [e.text for e in parse_markdown("d", [(md, 1)]) if e.kind in ("paragraph", "list_item")]


def _inline_list_para(pdf: DevPdf, lead: str, items: list[str]) -> None:
    """A paragraph written as an inline dash list ("Highlights: - a - b - c"), the way a Markdown list without
    blank lines around it comes out of a typesetter: justified, one dash wherever the line happens to wrap."""
    pdf.use_font()
    pdf.multi_cell(0, pdf.style.body * 0.5, lead + " " + " ".join(f"- {t}" for t in items), align="J",
                   markdown=True, new_x="LMARGIN", new_y="NEXT")
    pdf.ln(2)


def test_a_paragraph_whose_first_line_is_bold_is_no_heading(tmp_path: Path) -> None:
    """Seen on a travel company's menus: a bold run that fills the paragraph's first line ("Highlights: - Multiple
    appetizers, mains, and dessert options on every" / "flight - Refined cuisine ...") became a heading, cut the
    paragraph in two and named the sections below it in every breadcrumb."""
    pdf = DevPdf(Style(family="Times", body=10, sizes=(16, 12, 10.5)))
    pdf.add_page()
    pdf.heading("Business Class", 2)
    pdf.para("Business travellers enjoy restaurant-style dining with a wide menu on every route we fly.")
    bold = ("**Highlights: - Multiple appetizers, mains, and dessert options on every flight of more than three "
            "hours, with a choice of cuisines**")
    _inline_list_para(pdf, bold, ["Grilled meats and fish, curries and Mediterranean dishes",
                                  "Vegetarian selections always available", "Wine, beer, coffee and teas"])
    pdf.heading("Economy Class", 2)
    pdf.para("Economy menus focus on satisfying meals inspired by international tastes.")
    md = _markdown(pdf, tmp_path / "bold.pdf")
    assert [t for _, t in _headings(md)] == ["Business Class", "Economy Class"], md
    assert any(p.startswith("Highlights:") and "every flight of more than three hours" in p
               and p.endswith("Wine, beer, coffee and teas") for p in _paras(md)), md


def test_a_dash_where_a_paragraph_wraps_is_no_list_item(tmp_path: Path) -> None:
    pdf = DevPdf(Style(family="Times", body=10, sizes=(16, 12, 10.5)))
    pdf.add_page()
    items = ["Multi-course gourmet dining: starters, main courses and desserts", "Curated wine list",
             "Fresh ingredients: caviar, seafood and truffles", "Personalized service on select routes",
             "Wide range of cuisines: French, Italian, Pan-Asian and more", "Exclusive beverage pairings: aged "
             "whiskies and luxury teas", "Seasonal tasting menus"]
    # Find a lead-in whose wrap puts a dash at the start of a line (fpdf2's own line breaking decides where).
    lines: list[str] = []
    for n in range(40):
        lead = "**Highlights:** " + "x" * n
        pdf.use_font()
        text = lead + " " + " ".join(f"- {t}" for t in items)
        lines = pdf.multi_cell(0, pdf.style.body * 0.5, text, align="J", markdown=True, dry_run=True, output="LINES")
        if any(ln.startswith("- ") for ln in lines[1:-1]):
            break
    assert any(ln.startswith("- ") for ln in lines[1:-1]), "no wrap put a dash at a line start"
    pdf.heading("First Class", 2)
    _inline_list_para(pdf, lead, items)
    md = _markdown(pdf, tmp_path / "dash.pdf")
    paras = _paras(md)
    assert len(paras) == 1 and paras[0].endswith("- Seasonal tasting menus"), paras
    assert "aged whiskies and luxury teas" in paras[0]


def test_a_table_drawn_glyph_by_glyph_reads_as_lines_and_figures(tmp_path: Path) -> None:
    """Some filings draw every glyph as a text object of its own under a scaled text matrix, and pdfium's text
    page breaks the line after each one: the page read as one glyph a line, and the table came out as
    "P u l m o n a r y" and "2 3 4 6 ," (JOHNSON_JOHNSON_2022_10K's sales pages). A break pdfium generated
    between glyphs that go on along one baseline, at one size, is no break."""
    import pypdfium2 as pdfium

    from chunker.convert.pdf_text.textlayer import read_page
    from scaled_pdf import write_glyphs

    path = write_glyphs(tmp_path / "glyphs.pdf")
    doc = pdfium.PdfDocument(str(path))
    try:
        assert "\r\n" in doc[0].get_textpage().get_text_range()  # what makes this page hard: pdfium's breaks
        lines = [ln.text for ln in read_page(doc[0], 1).lines]
    finally:
        doc.close()
    assert lines == ["Pulmonary Hypertension", "2022 2021 % Change", "U.S. 2,346 2,365 (0.8)",
                     "International 1,071 1,085 (1.3)", "Worldwide 3,417 3,450 (1.0)"]
    md = PdfTextConverter(ConverterConfig(), "h").markdown_for_pages(str(path), [1])
    assert _rows(md) == ["U.S. | 2022: 2,346; 2021: 2,365; % Change: (0.8)",
                         "International | 2022: 1,071; 2021: 1,085; % Change: (1.3)",
                         "Worldwide | 2022: 3,417; 2021: 3,450; % Change: (1.0)"]


def test_text_set_at_one_point_and_scaled_up_reads_at_the_size_it_is_drawn(tmp_path: Path) -> None:
    """Verizon's 10-Ks and OPM's reports set their text at 1 point and scale it up nine times by the text matrix:
    pdfium reports 1.0, and the size used to be read off each line's height, so a wrapped line without descenders
    ("basis.") came out two points smaller than the line above and stood as a paragraph of its own (52 such breaks
    in one 10-K). Every line of the page is read at 9 points, and the paragraph is whole."""
    import pypdfium2 as pdfium

    from chunker.convert.pdf_text.textlayer import read_page
    from scaled_pdf import write_scaled

    items = [
        (40, 60, 9, "We record property, plant and equipment at cost. Property, plant and equipment are"),
        (40, 71, 9, "generally depreciated on a straight-line basis over the useful life, with a useful"),
        (40, 82, 9, "life review every year."),
        (40, 100, 9, "Leasehold improvements are amortized over the shorter of the estimated life of the"),
        (40, 111, 9, "improvement or the remaining term of the related lease, from the time the asset is in"),
        (40, 122, 9, "service."),
    ]
    path = write_scaled(tmp_path / "one-point.pdf", items, scale=9)
    doc = pdfium.PdfDocument(str(path))
    try:
        page = doc[0]
        assert page.get_textpage().get_text_range().startswith("We record")
        lines = read_page(page, 1).lines
    finally:
        doc.close()
    assert [(ln.text, ln.size) for ln in lines] == [(text, 9.0) for *_, text in items]
    paras = _paras(PdfTextConverter(ConverterConfig(), "h").markdown_for_pages(str(path), [1]))
    assert paras == [" ".join(t for *_, t in items[:3]), " ".join(t for *_, t in items[3:])]


def test_note_marks_drawn_after_the_page_go_back_to_their_row_and_note(tmp_path: Path) -> None:
    """Pfizer's filings draw each note mark in a text object of its own after the rest of the page: the reference
    in a row's label and the marker that opens the note came out as "(a)", "(b)" paragraphs after the last line.
    Each goes back into the line whose band it sits on; a mark beside no line stays a line of its own."""
    import pypdfium2 as pdfium

    from chunker.convert.pdf_text.notemarks import attach_note_marks
    from chunker.convert.pdf_text.textlayer import read_page
    from scaled_pdf import write_scaled

    items = [
        (40, 60, 10, "Transaction costs"), (300, 60, 10, "36"), (360, 60, 10, "42"),
        (40, 76, 10, "Integration costs and other"), (300, 76, 10, "68"), (360, 76, 10, "148"),
        (52, 110, 8, "Represents external costs for banking, legal, accounting and other similar services."),
        (52, 122, 8, "Represents external costs to integrate acquired businesses."),
        (128, 57, 6, "(a)"), (171, 73, 6, "(b)"), (40, 110, 6, "(a)"), (40, 122, 6, "(b)"), (300, 200, 6, "(c)"),
    ]
    path = write_scaled(tmp_path / "marks.pdf", items, scale=1)
    doc = pdfium.PdfDocument(str(path))
    try:
        lines = read_page(doc[0], 1).lines
    finally:
        doc.close()
    assert [ln.text for ln in lines][-5:] == ["(a)", "(b)", "(a)", "(b)", "(c)"]  # the problem: read last
    assert [ln.text for ln in attach_note_marks(lines)] == [
        "Transaction costs (a) 36 42", "Integration costs and other (b) 68 148",
        "(a) Represents external costs for banking, legal, accounting and other similar services.",
        "(b) Represents external costs to integrate acquired businesses.", "(c)"]
    md = PdfTextConverter(ConverterConfig(), "h").markdown_for_pages(str(path), [1])
    assert "(a) Represents external costs for banking" in md and "(b) Represents external costs to" in md, md


def test_a_footnote_does_not_swallow_the_indented_sentence_below_it(tmp_path: Path) -> None:
    """A table's footnote in small type, then, a line's space lower and indented, the body sentence that introduces
    the next table in body type: two blocks, not one list item. An item's own indented wrap stays in the item."""
    pdf = DevPdf(Style(family="Times", body=10, sizes=(16, 12, 10.5)))
    pdf.add_page()
    pdf.para("Cash paid for amounts included in the measurement of lease liabilities is shown above.")
    y = pdf.get_y() + 2
    lines = [(8, 20, "(1) Included within other financing activities on the statements of cash flows."),
             (10, 28, "Maturities of lease liabilities were as follows:"),
             (10, 20, "(2) Leases with an initial term of twelve months or less are not recorded on the"),
             (10, 26, "balance sheet; their cost is recognized on a straight-line basis over the term.")]
    for (size, x, text), dy in zip(lines, (0, 9, 10, 4.6)):
        y += dy
        pdf.set_font("Times", "", size)
        pdf.set_xy(x, y)
        pdf.cell(170, 4, text)
    els = parse_markdown("d", [(_markdown(pdf, tmp_path / "footnote.pdf"), 1)])
    texts = [e.text for e in els]
    note = next(t for t in texts if "Included within" in t)
    assert "Maturities" not in note, texts
    assert any(t.strip() == "Maturities of lease liabilities were as follows:" for t in texts), texts
    assert any("are not recorded on the balance sheet" in t for t in texts), "a wrapped item stays one item"
