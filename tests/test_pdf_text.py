"""The pdf-text converter on PDFs built here with fpdf2, and on the shared test data when present."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from chunker.config import ConverterConfig, PdfTextConfig
from chunker.convert.pdf_text import PdfTextConverter
from chunker.contract import parse_batches, parse_markdown
from chunker.types import BatchContext, SegmentJob

fpdf = pytest.importorskip("fpdf")
PIL = pytest.importorskip("PIL")

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
needs_data = pytest.mark.skipif(not DATA.is_dir(), reason="shared test data (../shared/data) is absent")

HEADER = "ACME Corp - Internal Report"
ROWS_P3 = [("North", "120", "Stable"), ("South", "95", "Growing"), ("East", "80", "Stable")]
ROWS_P4 = [("West", "60", "Falling"), ("Central", "150", "Growing")]


def _figure_image() -> "PIL.Image.Image":
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (200, 120), "white")
    draw = ImageDraw.Draw(img)
    for k, h in enumerate((30, 60, 90)):
        draw.rectangle((20 + k * 60, 110 - h, 60 + k * 60, 110), fill=(40, 90, 200))
    return img


def _scan_image() -> "PIL.Image.Image":
    from PIL import Image, ImageDraw, ImageFont

    img = Image.new("RGB", (420, 594), "white")
    draw = ImageDraw.Draw(img)
    font = ImageFont.load_default(size=40)
    draw.text((30, 60), "Scanned memo text", fill="black", font=font)
    draw.text((30, 120), "for the OCR check", fill="black", font=font)
    return img


def _build_pdf(path: Path) -> None:
    from fpdf import FPDF

    class Doc(FPDF):
        def header(self) -> None:
            if self.page_no() <= 4:
                self.set_font("Helvetica", "", 9)
                self.cell(0, 8, HEADER, new_x="LMARGIN", new_y="NEXT")

        def footer(self) -> None:
            if self.page_no() <= 4:
                self.set_y(-15)
                self.set_font("Helvetica", "", 9)
                self.cell(0, 8, f"Page {self.page_no()} of 5", align="C")

    pdf = Doc(format="A4", unit="pt")
    pdf.set_auto_page_break(False)
    body = lambda: pdf.set_font("Helvetica", "", 11)  # noqa: E731
    # Page 1: table of contents.
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 14)
    pdf.cell(0, 24, "Contents", new_x="LMARGIN", new_y="NEXT")
    body()
    for title, page in (("Introduction", 2), ("Regional results", 3), ("Outlook", 4)):
        pdf.cell(0, 16, f"{title} {'.' * 40} {page}", new_x="LMARGIN", new_y="NEXT")
    # Page 2: headings, a paragraph with a hyphenated line end, a numbered list that runs over the page end.
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 20)
    pdf.cell(0, 30, "Annual Report 2024", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", "B", 14)
    pdf.cell(0, 24, "Introduction", new_x="LMARGIN", new_y="NEXT")
    body()
    for text in ("The programme was rolled out in every region after a careful implemen-",
                 "tation phase that lasted two quarters and involved all teams."):
        pdf.cell(0, 14, text, new_x="LMARGIN", new_y="NEXT")
    pdf.ln(10)
    pdf.set_font("Helvetica", "B", 11)
    pdf.cell(0, 16, "Key steps", new_x="LMARGIN", new_y="NEXT")
    body()
    pdf.set_y(700)
    for k in (1, 2, 3):
        pdf.cell(0, 14, f"{k}. Step number {k} of the rollout", new_x="LMARGIN", new_y="NEXT")
    # Page 3: the list goes on, then a ruled table that continues on page 4 without its header.
    pdf.add_page()
    body()
    for k in (4, 5):
        pdf.cell(0, 14, f"{k}. Step number {k} of the rollout", new_x="LMARGIN", new_y="NEXT")
    pdf.ln(10)
    pdf.set_font("Helvetica", "B", 14)
    pdf.cell(0, 24, "Regional results", new_x="LMARGIN", new_y="NEXT")
    pdf.set_y(640)
    pdf.set_font("Helvetica", "B", 11)
    for cell in ("Region", "Sales", "Trend"):
        pdf.cell(120, 18, cell, border=1)
    pdf.ln(18)
    body()
    for row in ROWS_P3:
        for cell in row:
            pdf.cell(120, 18, cell, border=1)
        pdf.ln(18)
    # Page 4: table continued, then a figure with its caption.
    pdf.add_page()
    body()
    for row in ROWS_P4:
        for cell in row:
            pdf.cell(120, 18, cell, border=1)
        pdf.ln(18)
    pdf.ln(20)
    pdf.set_font("Helvetica", "B", 14)
    pdf.cell(0, 24, "Outlook", new_x="LMARGIN", new_y="NEXT")
    pdf.image(_figure_image(), x=60, y=pdf.get_y() + 10, w=200, h=120)
    pdf.set_y(pdf.get_y() + 135)
    body()
    pdf.cell(0, 14, "Figure 1: Sales growth by quarter", new_x="LMARGIN", new_y="NEXT")
    pdf.ln(6)
    pdf.cell(0, 14, "Growth is expected to continue next year.", new_x="LMARGIN", new_y="NEXT")
    # Page 5: a scan (image only, no text layer).
    pdf.add_page()
    pdf.image(_scan_image(), x=0, y=0, w=pdf.w, h=pdf.h)
    pdf.output(str(path))


@pytest.fixture(scope="module")
def sample_pdf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("pdf_text") / "sample.pdf"
    _build_pdf(path)
    return path


@pytest.fixture(scope="module")
def converter() -> PdfTextConverter:
    cfg = ConverterConfig(pdf_text=PdfTextConfig(ocr_max_side_px=420))
    return PdfTextConverter(cfg, config_hash="abc")


@pytest.fixture(scope="module")
def sample_md(converter: PdfTextConverter, sample_pdf: Path) -> str:
    return converter.markdown_for_pages(str(sample_pdf), [1, 2, 3, 4, 5])


def test_headings_furniture_and_toc(sample_md: str) -> None:
    assert "# Annual Report 2024" in sample_md.splitlines()
    assert "## Introduction" in sample_md.splitlines()
    assert "### Key steps" in sample_md.splitlines()
    assert HEADER not in sample_md
    assert "of 5" not in sample_md
    assert "....." not in sample_md and "Contents" not in sample_md
    for n in range(1, 6):
        assert f"<!-- page {n} -->" in sample_md


def test_reflow_undoes_hyphenation(sample_md: str) -> None:
    assert "careful implementation phase that lasted" in sample_md


def test_numbered_list_across_page_break_is_one_element(sample_md: str) -> None:
    elements = parse_markdown("d", [(sample_md, 1)])
    lists = [e for e in elements if e.kind == "list"]
    assert len(lists) == 1, [e.text for e in lists]
    assert lists[0].page_start == 2 and lists[0].page_end == 3
    assert all(f"{k}. Step number {k}" in lists[0].text for k in range(1, 6))


def test_table_over_two_pages_keeps_its_header(sample_md: str) -> None:
    elements = parse_markdown("d", [(sample_md, 1)])
    rows = [e for e in elements if e.kind == "table_row"]
    assert len(rows) == 5
    assert rows[0].text.startswith("Region: North; Sales: 120; Trend: Stable")
    assert rows[-1].text.startswith("Region: Central; Sales: 150; Trend: Growing")
    assert len({r.group for r in rows}) == 1 and rows[-1].page_start == 4
    # Table text is not repeated as paragraphs.
    assert not any("North" in e.text for e in elements if e.kind == "paragraph")


def test_figure_with_caption(sample_md: str) -> None:
    elements = parse_markdown("d", [(sample_md, 1)])
    figures = [e for e in elements if e.kind == "figure"]
    assert len(figures) == 1
    assert figures[0].text == "Figure 1: Sales growth by quarter"
    x0, y0, x1, y1 = figures[0].bbox or []
    assert 55 < x0 < 65 and 255 < x1 < 265 and y1 - y0 == pytest.approx(120, abs=1)
    assert not any("Sales growth by quarter" in e.text for e in elements if e.kind == "paragraph")
    assert figures[0].heading_path[-1] == "Outlook"


def test_scanned_page_is_read_with_ocr(sample_md: str) -> None:
    page5 = sample_md.split("<!-- page 5 -->")[1]
    # The recogniser alone reads "for the OCRcheck" at this size: the spaces come back from the ink gaps.
    assert "Scanned memo text" in page5 and "for the OCR check" in page5, page5


def test_ocr_spaces_come_back_from_ink_gaps() -> None:
    import numpy as np

    from chunker.convert.pdf_text.ocr import restore_spaces

    ink = np.zeros((20, 60), dtype=bool)
    for x0, x1 in ((2, 6), (8, 12), (20, 24), (26, 30)):  # "ab" + a word gap of 8 px + "cd"
        ink[5:15, x0:x1] = True
    boxes = [[[x0, 5], [x1, 5], [x1, 15], [x0, 15]] for x0, x1 in ((2, 6), (8, 12), (20, 24), (26, 30))]
    box = [[0, 0], [40, 0], [40, 20], [0, 20]]
    assert restore_spaces("abcd", boxes, list("abcd"), ink, box) == "ab cd"
    assert restore_spaces("ab cd", boxes[:2] + [[[14, 5], [18, 5], [18, 15], [14, 15]]] + boxes[2:], list("ab cd"),
                          ink, box) == "ab cd"
    assert restore_spaces("abcd", boxes[:3], list("abc"), ink, box) == "abcd"  # mismatch: left as it is


def test_convert_batches_and_context(converter: PdfTextConverter, sample_pdf: Path) -> None:
    job = SegmentJob(doc_id="d", source_uri=f"file://{sample_pdf}", source="sample.pdf", num_pages=5,
                     segment_index=1, num_segments=2, page_start=3, page_end=4, context_start=2, batch_pages=1)
    batches = asyncio.run(converter.convert(job, None))
    assert [(b.batch_index, b.page_start, b.page_end, b.context_only) for b in batches] == [
        (0, 2, 2, True), (1, 3, 3, False), (2, 4, 4, False)]
    assert all(b.model == "pdf-text" and b.finish_reason == "stop" and not b.error for b in batches)
    ctx = BatchContext.from_json(batches[1].context_out)
    assert ctx.heading_path == ["Annual Report 2024", "Regional results"]
    assert ctx.table_header == "| Region | Sales | Trend |"
    assert "<!-- table continued -->" in batches[2].markdown
    elements = parse_batches("d", batches, segment_index=1)
    assert elements[0].page_start == 3


def test_bad_pages_are_recorded_not_raised(converter: PdfTextConverter, tmp_path: Path) -> None:
    bad = tmp_path / "bad.pdf"
    bad.write_bytes(b"not a pdf")
    job = SegmentJob(doc_id="b", source_uri=str(bad), source="bad.pdf", num_pages=2, segment_index=0,
                     num_segments=1, page_start=1, page_end=2, context_start=1, batch_pages=1)
    batches = converter.convert_sync(job)
    assert len(batches) == 2 and all("cannot open PDF" in b.error for b in batches)


def test_needs_no_images(converter: PdfTextConverter) -> None:
    assert converter.name == "pdf-text" and converter.needs_images() is False


# -- shared data ---------------------------------------------------------------------------------------------
def _all_pages(conv: PdfTextConverter, pdf: Path) -> str:
    import pypdfium2 as pdfium

    n = len(pdfium.PdfDocument(str(pdf)))
    return conv.markdown_for_pages(str(pdf), list(range(1, n + 1)))


@needs_data
def test_ca_warn_report_is_one_table_over_16_pages(converter: PdfTextConverter) -> None:
    md = _all_pages(converter, DATA / "tables" / "ca-warn-report.pdf")
    rows = [e for e in parse_markdown("w", [(md, 1)]) if e.kind == "table_row"]
    first = [r for r in rows if r.page_start == 1]
    assert len(first) > 30 and first[0].text.startswith("Notice Date: 06/22/2015")
    pages = {r.page_start for r in rows if r.text.startswith("Notice Date:")}
    assert len(pages) >= 14, sorted(pages)


@needs_data
def test_hybrid_multipage_table(converter: PdfTextConverter) -> None:
    md = _all_pages(converter, DATA / "tables" / "hybrid_multipage.pdf")
    rows = [e for e in parse_markdown("h", [(md, 1)]) if e.kind == "table_row"]
    assert {r.page_start for r in rows} == {1, 2}
    assert "Hello: 1; Goodbye: Abc; World: Foo." in [r.text for r in rows]


@needs_data
def test_cloudway_structure(converter: PdfTextConverter) -> None:
    md = _all_pages(converter, DATA / "rag-multi-corpus-cloudway" / "pdf" / "Armed Forces Discount Program.pdf")
    lines = md.splitlines()
    assert lines.count("# CloudWay 24 | Armed Forces Discount Program") == 1
    assert "## Terms & Conditions" in lines
    elements = parse_markdown("a", [(md, 1)])
    steps = [e for e in elements if e.kind == "list" and e.attrs.get("ordered")]
    assert len(steps) == 1 and steps[0].text.count("\n") == 4
    assert "**Sign Up / Login** with your email" in steps[0].text


@needs_data
def test_cloudway_speed_is_reported(converter: PdfTextConverter) -> None:
    pdfs = sorted((DATA / "rag-multi-corpus-cloudway" / "pdf").glob("*.pdf"))
    start, pages = time.perf_counter(), 0
    for pdf in pdfs:
        md = _all_pages(converter, pdf)
        pages += md.count("<!-- page ")
    ms = (time.perf_counter() - start) * 1000 / max(pages, 1)
    print(f"\npdf-text: {pages} pages, {ms:.1f} ms/page")
    assert pages == 103


@needs_data
def test_robustness_files_never_raise(tmp_path: Path) -> None:
    conv = PdfTextConverter(ConverterConfig(pdf_text=PdfTextConfig(ocr=False)))
    manifest = {json.loads(x)["file"]: json.loads(x)["kinds"] for x in (DATA / "robustness" / "manifest.jsonl").open()}
    for path in sorted((DATA / "robustness").iterdir()):
        if path.name == "manifest.jsonl":
            continue
        job = SegmentJob(doc_id="r", source_uri=str(path), source=path.name, num_pages=3, segment_index=0,
                         num_segments=1, page_start=1, page_end=3, context_start=1, batch_pages=2)
        batches = conv.convert_sync(job)
        assert len(batches) == 2
        text = "".join(b.markdown for b in batches)
        kinds = manifest.get(path.name, [])
        if "script_CJK" in kinds and not any(b.error for b in batches):
            assert any("\u3040" <= c <= "\u9fff" or "\uac00" <= c <= "\ud7af" for c in text), path.name


# -- tables: continuation without a repeated header, columns from shared row gaps --------------------------------
def test_guessed_header_on_a_continuation_page_is_a_data_row() -> None:
    from chunker.convert.pdf_text.blocks import FlowState, PageWriter
    from chunker.convert.pdf_text.headings import FontStats
    from chunker.convert.pdf_text.tables import Table
    from chunker.convert.pdf_text.textlayer import PageText

    def page_with(t: Table, header: list[str], columns: list[float]) -> str:
        state = FlowState(table_header=header, table_columns=columns)
        return PageWriter(PageText(7, 595, 842, [], 0), FontStats(10.0, []), state, set()).render([t], [])

    head, cols = ["Fastener", "Thread", "Torque"], [56.0, 200.0, 300.0]
    guessed = Table((56, 50, 539, 200), ["Drain plug", "G 1/2", "30"], [["Lifting eye", "M12", "40"]], set(),
                    [["Drain plug", "G 1/2", "30"]], header_bold=False, columns=[57.0, 201.0, 302.0], at_top=True)
    md = page_with(guessed, head, cols)
    assert md.startswith("<!-- table continued -->")
    assert "Fastener: Drain plug; Thread: G 1/2; Torque: 30." in md and "Fastener: Lifting eye" in md
    # A bold header that differs is the table's own; a different column layout is a different table.
    bold = Table(guessed.bbox, ["Part", "Size", "Qty"], guessed.rows, set(), [["Part", "Size", "Qty"]],
                 header_bold=True, columns=guessed.columns, at_top=True)
    assert "Part: Lifting eye; Size: M12; Qty: 40." in page_with(bold, head, cols)
    moved = Table(guessed.bbox, None, [["Drain plug", "G 1/2", "30"]] * 2, set(), columns=[57.0, 120.0, 400.0],
                  at_top=True)
    md = page_with(moved, head, cols)
    # A new table; its first row holds figures, so it stays a data row instead of labelling every other row.
    assert md.startswith("|  |  |  |\n") and md.count("| Drain plug | G 1/2 | 30 |") == 2


def _overflow_table_pdf(path: Path) -> None:
    """A table ruled only horizontally whose long first-column cell runs up to the second column's text."""
    from fpdf import FPDF

    pdf = FPDF(format="A4", unit="pt")
    pdf.add_page()
    pdf.set_font("Helvetica", "", 10)
    rows = [("Class", "Bags", "Weight"), ("Lux", "2", "10 kg"), ("Elite", "2", "8 kg"),
            ("ComfortPremiumX", "1", "8 kg"), ("Saver", "1", "7 kg")]
    for k in range(len(rows) + 1):
        pdf.line(60, 100 + 20 * k, 400, 100 + 20 * k)
    for col, x in enumerate((62, 142, 222)):  # column by column, as office exports write cells
        pdf.set_font("Helvetica", "B" if col == 0 else "", 10)
        for k, row in enumerate(rows):
            pdf.text(x, 114 + 20 * k, row[col])
    # The wide cell runs past where the next column begins: the projection of the text has no gap there.
    pdf.set_font("Helvetica", "B", 10)
    assert pdf.get_string_width("ComfortPremiumX") + 62 > 143
    pdf.output(str(path))


def test_columns_come_from_gaps_rows_share(converter: PdfTextConverter, tmp_path: Path) -> None:
    path = tmp_path / "overflow.pdf"
    _overflow_table_pdf(path)
    md = converter.markdown_for_pages(str(path), [1])
    assert "| Class | Bags | Weight |" in md, md
    assert "| ComfortPremiumX | 1 | 8 kg |" in md, md


def test_paragraph_cut_by_a_page_break_is_one_paragraph(converter: PdfTextConverter, tmp_path: Path) -> None:
    from fpdf import FPDF

    pdf = FPDF(format=(420, 595), unit="pt")
    pdf.set_auto_page_break(False)
    pdf.set_font("Helvetica", "", 11)
    pdf.add_page()
    pdf.cell(0, 14, "Intro sentence that ends here.", new_x="LMARGIN", new_y="NEXT")
    pdf.ln(10)
    pdf.cell(0, 14, "The inspection must be repeated after every", new_x="LMARGIN", new_y="NEXT")
    pdf.add_page()
    pdf.cell(0, 14, "service visit by the technician.", new_x="LMARGIN", new_y="NEXT")
    pdf.ln(10)
    pdf.cell(0, 14, "A new paragraph.", new_x="LMARGIN", new_y="NEXT")
    pdf.add_page()
    pdf.cell(0, 14, "lower-case start after a finished sentence stays apart.", new_x="LMARGIN", new_y="NEXT")
    path = tmp_path / "split.pdf"
    pdf.output(str(path))
    md = converter.markdown_for_pages(str(path), [1, 2, 3])
    assert "<!-- page 2 -->\n\nThe inspection must be repeated after every service visit by the technician." in md, md
    paras = [e for e in parse_markdown("s", [(md, 1)]) if e.kind == "paragraph"]
    assert [e.text for e in paras][0] == "Intro sentence that ends here."
    assert len(paras) == 4 and paras[1].page_start == 2 and paras[3].page_start == 3


def test_encrypted_pdf_opens_with_the_password(tmp_path: Path) -> None:
    from fpdf import FPDF

    pdf = FPDF(format=(420, 595), unit="pt")
    pdf.set_encryption(owner_password="owner", user_password="secret")
    pdf.add_page()
    pdf.set_font("Helvetica", "", 11)
    pdf.cell(0, 14, "Confidential pump settings.", new_x="LMARGIN", new_y="NEXT")
    path = tmp_path / "locked.pdf"
    pdf.output(str(path))
    cfg = ConverterConfig(pdf_text=PdfTextConfig(ocr=False))
    assert "Confidential pump settings." in PdfTextConverter(cfg, password="secret").markdown_for_pages(str(path), [1])
    job = SegmentJob(doc_id="l", source_uri=str(path), source="locked.pdf", num_pages=1, segment_index=0,
                     num_segments=1, page_start=1, page_end=1, context_start=1, batch_pages=1)
    assert "cannot open PDF" in PdfTextConverter(cfg).convert_sync(job)[0].error
