"""The sample PDFs are what SAMPLE_FACTS says they are (fast: text layer only, no conversion)."""

from __future__ import annotations

import re
from pathlib import Path

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
import pytest

from chunker.eval.samples import SAMPLE_FACTS, generate_samples, main

MANUAL = SAMPLE_FACTS.manual


def _squash(text: str) -> str:
    # The text layer breaks lines where fpdf wrapped them; the facts hold unwrapped text.
    return " ".join(text.split())


def _pages(path: Path) -> list[str]:
    pdf = pdfium.PdfDocument(path)
    try:
        return [page.get_textpage().get_text_range() for page in pdf]
    finally:
        pdf.close()


@pytest.fixture(scope="module")
def manual_pages(samples_dir: Path) -> list[str]:
    return _pages(samples_dir / MANUAL.file)


def test_every_sample_is_a_pdf_with_its_page_count(samples_dir: Path) -> None:
    expected = {
        MANUAL.file: MANUAL.num_pages,
        SAMPLE_FACTS.scanned.file: SAMPLE_FACTS.scanned.num_pages,
        **{p.file: p.num_pages for p in SAMPLE_FACTS.plain},
    }
    assert sorted(p.name for p in samples_dir.glob("*.pdf")) == sorted(expected)
    for name, pages in expected.items():
        pdf = pdfium.PdfDocument(samples_dir / name)
        assert len(pdf) == pages, name
        pdf.close()


def test_generation_is_byte_for_byte_deterministic(samples_dir: Path, tmp_path: Path) -> None:
    again = generate_samples(tmp_path)
    assert [p.name for p in again] == list(SAMPLE_FACTS.files)
    for path in again:
        assert path.read_bytes() == (samples_dir / path.name).read_bytes(), path.name


def test_cli_prints_the_files_it_wrote(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path)]) == 0
    printed = capsys.readouterr().out.split()
    assert printed == [str(tmp_path / name) for name in SAMPLE_FACTS.files]
    assert all(Path(p).is_file() for p in printed)
    with pytest.raises(SystemExit) as missing:  # argparse: no OUT_DIR is a usage error, exit status 2
        main([])
    assert missing.value.code == 2
    assert "OUT_DIR" in capsys.readouterr().err


def test_running_header_footer_and_page_number_on_every_manual_page(manual_pages: list[str]) -> None:
    m = len(manual_pages)
    for n, text in enumerate(manual_pages, 1):
        assert MANUAL.running_header in text, n
        assert MANUAL.running_footer in text, n
        assert MANUAL.page_label.format(n=n, m=m) in text, n


def test_toc_lines_have_dot_leaders_and_point_at_the_real_heading_pages(manual_pages: list[str]) -> None:
    toc = manual_pages[MANUAL.toc_page - 1]
    for title, page in MANUAL.toc:
        assert re.search(rf"^{re.escape(title)} \.{{10,}} {page}\s*$", toc, re.M), title
        # The heading itself starts a line on the page the TOC names.
        assert re.search(rf"^{re.escape(title)}\s*$", manual_pages[page - 1], re.M), title


def test_heading_hierarchy_is_carried_by_font_size(samples_dir: Path) -> None:
    pdf = pdfium.PdfDocument(samples_dir / MANUAL.file)
    try:
        cases = [(1, MANUAL.title, 20), (3, "1 Overview", 15), (3, "1.1 Safety precautions", 12), (3, "The P-200", 10)]
        for page, needle, size in cases:
            textpage = pdf[page - 1].get_textpage()
            index = textpage.get_text_range().index(needle)
            assert pdfium_c.FPDFText_GetFontSize(textpage.raw, index) == pytest.approx(size), needle
    finally:
        pdf.close()


def test_procedure_starts_on_one_page_and_ends_on_the_next(manual_pages: list[str]) -> None:
    first, last = MANUAL.steps_pages
    assert last == first + 1
    assert MANUAL.procedure_heading in manual_pages[first - 1]
    on_first = [s for s in MANUAL.steps if s in _squash(manual_pages[first - 1])]
    on_last = [s for s in MANUAL.steps if s in _squash(manual_pages[last - 1])]
    assert on_first and on_last and on_first + on_last == list(MANUAL.steps)


@pytest.mark.parametrize("name", ["parts_table", "torque_table"])
def test_tables_span_pages_with_or_without_a_repeated_header(manual_pages: list[str], name: str) -> None:
    table = getattr(MANUAL, name)
    assert len(table.pages) >= 2
    header_line = " ".join(table.headers)
    pages_with_header = [p for p in table.pages if header_line in manual_pages[p - 1]]
    assert pages_with_header == (list(table.pages) if table.repeated_header else [table.pages[0]])
    assert all(all(cell for cell in row) for row in table.rows)  # no empty cell: every row sentence names each header
    body = _squash(" ".join(manual_pages[p - 1] for p in table.pages))
    for row in table.rows:
        assert " ".join(row) in body, row


def test_faq_figure_and_non_english_text_are_in_the_text_layer(manual_pages: list[str]) -> None:
    text = _squash(" ".join(manual_pages))
    for question, answer in MANUAL.faq:
        assert question.endswith("?") and question in text and answer in text
    assert MANUAL.figure_caption in _squash(manual_pages[MANUAL.figure_page - 1])
    assert MANUAL.non_english in text
    assert any(ch in MANUAL.non_english for ch in "äöüß")


def test_figure_page_holds_an_image(samples_dir: Path) -> None:
    pdf = pdfium.PdfDocument(samples_dir / MANUAL.file)
    try:
        kinds = [obj.type for obj in pdf[MANUAL.figure_page - 1].get_objects()]
        assert pdfium_c.FPDF_PAGEOBJ_IMAGE in kinds
    finally:
        pdf.close()


def test_scanned_page_has_no_text_layer_only_an_image(samples_dir: Path) -> None:
    facts = SAMPLE_FACTS.scanned
    pdf = pdfium.PdfDocument(samples_dir / facts.file)
    try:
        page = pdf[facts.image_page - 1]
        assert page.get_textpage().count_chars() == 0
        assert [obj.type for obj in page.get_objects()] == [pdfium_c.FPDF_PAGEOBJ_IMAGE]
        others = [p for i, p in enumerate(pdf) if i != facts.image_page - 1]
        assert all(p.get_textpage().count_chars() > 0 for p in others)
        # The sentence exists only as pixels: no text layer anywhere carries it.
        assert all(facts.sentence not in p.get_textpage().get_text_range() for p in others)
    finally:
        pdf.close()


def test_sample_questions_name_a_sample_that_holds_their_answer(samples_dir: Path) -> None:
    assert 3 <= len(SAMPLE_FACTS.questions) <= 5
    for q in SAMPLE_FACTS.questions:
        assert q.file in SAMPLE_FACTS.files
        if q.file == SAMPLE_FACTS.scanned.file:
            assert any(q.answer in line for line in SAMPLE_FACTS.scanned.image_lines)
        else:
            assert q.answer in _squash(" ".join(_pages(samples_dir / q.file))), q.question


def test_plain_documents_hold_their_headings_and_bullets(samples_dir: Path) -> None:
    for facts in SAMPLE_FACTS.plain:
        text = "\n".join(_pages(samples_dir / facts.file))
        for heading in (facts.title, *facts.headings):
            assert re.search(rf"^{re.escape(heading)}\s*$", text, re.M), heading
        for bullet in facts.bullets:
            assert f"• {bullet}" in text, bullet
