"""Golden structure tests: the sample PDFs through the whole CPU path (pdf-text converter, parser, planner).

Each test names one structural promise a retrieval user relies on, checked against SAMPLE_FACTS rather than against
stored output, so the converter and planner may change freely as long as the structure survives.
"""

from __future__ import annotations

import re
from collections import Counter
from difflib import SequenceMatcher
from pathlib import Path
from typing import Any

import pytest

from chunker.eval.samples import SAMPLE_FACTS
from chunker.types import Chunk, Element

REPO_ROOT = Path(__file__).resolve().parents[1]
MANUAL = SAMPLE_FACTS.manual
SCANNED = SAMPLE_FACTS.scanned
DOT_LEADER = re.compile(r"(\.\s?){4,}\s*\d+\s*$", re.M)
PAGE_LABEL = re.compile(r"\bPage\s+\d+\s+of\s+\d+\b", re.I)


def norm(text: str) -> str:
    # Converters rewrap lines; compare text with whitespace runs collapsed.
    return " ".join(text.split())


def body(chunk: Chunk) -> str:
    """A chunk's text without its breadcrumb prefix."""
    if chunk.breadcrumb and chunk.text.startswith(chunk.breadcrumb):
        return chunk.text[len(chunk.breadcrumb):].lstrip("\n")
    return chunk.text


@pytest.fixture(scope="module")
def results(samples_dir: Path) -> dict[str, Any]:
    """Every sample converted once on the CPU path (pdf-text, OCR for the scanned page)."""
    from chunker.config import load_config
    from chunker.run.local import process_document

    local = REPO_ROOT / "configs" / "local.yaml"
    cfg = load_config(local if local.is_file() else None, ["converter.backend=pdf-text"])
    return {name: process_document(samples_dir / name, cfg, input_root=samples_dir) for name in SAMPLE_FACTS.files}


@pytest.fixture(scope="module")
def manual(results: dict[str, Any]) -> Any:
    return results[MANUAL.file]


def test_every_sample_converts_without_errors(results: dict[str, Any]) -> None:
    for name, res in results.items():
        assert res.document.status == "ok", (name, res.document.error)
        assert res.document.source == name
        assert res.chunks, name


def test_coverage_every_non_heading_element_exactly_once_in_order(results: dict[str, Any]) -> None:
    for name, res in results.items():
        kinds = {e.element_id: e.kind for e in res.elements}
        assert len(kinds) == len(res.elements), f"{name}: duplicate element IDs"
        placed = [eid for c in res.chunks for eid in c.element_ids]
        assert set(placed) <= set(kinds), f"{name}: chunks name unknown elements"
        assert max(Counter(placed).values()) == 1, f"{name}: an element sits in two chunks"
        expected = [e.element_id for e in res.elements if e.kind != "heading"]
        assert [eid for eid in placed if kinds[eid] != "heading"] == expected, name


def test_procedure_steps_across_the_page_break_land_in_one_chunk(manual: Any) -> None:
    def in_order(text: str) -> bool:
        positions = [text.find(step) for step in MANUAL.steps]
        return min(positions) >= 0 and positions == sorted(positions)

    holders = [c for c in manual.chunks if in_order(norm(c.text))]
    assert len(holders) == 1, [norm(c.text)[:120] for c in manual.chunks if MANUAL.steps[0] in norm(c.text)]
    first, last = MANUAL.steps_pages
    assert holders[0].page_start <= first and holders[0].page_end >= last
    others = [c for c in manual.chunks if c is not holders[0]]
    assert not any(step in norm(c.text) for c in others for step in MANUAL.steps)


def test_every_table_row_is_one_sentence_naming_all_its_column_headers(manual: Any) -> None:
    tables = (MANUAL.parts_table, MANUAL.torque_table)
    rows = [e for e in manual.elements if e.kind == "table_row"]
    # Exactly the data rows: repeated header rows and the TOC never become rows.
    assert len(rows) == sum(len(t.rows) for t in tables)
    for table in tables:
        for cells in table.rows:
            matches = [e for e in rows if all(cell in e.text for cell in cells)]
            assert len(matches) == 1, cells
            assert all(h in matches[0].text for h in table.headers), (table.headers, matches[0].text)
    for chunk in (c for c in manual.chunks if c.modality == "table"):
        for line in filter(None, (ln.strip() for ln in body(chunk).splitlines())):
            assert any(all(h in line for h in t.headers) for t in tables), line


def test_rows_after_the_page_break_still_carry_headers_of_a_table_without_repeated_header(manual: Any) -> None:
    table = MANUAL.torque_table
    assert not table.repeated_header
    later = [e for e in manual.elements if e.kind == "table_row" and e.page_start == table.pages[-1]]
    assert later and all(all(h in e.text for h in table.headers) for e in later)
    # The rows on both pages are one table: one group.
    groups = {e.group for e in manual.elements if e.kind == "table_row" and table.rows[0][1] in e.text}
    groups |= {e.group for e in later}
    assert len(groups) == 1


def test_no_running_header_footer_or_page_number_in_any_chunk(results: dict[str, Any]) -> None:
    for name, res in results.items():
        for chunk in res.chunks:
            text = chunk.text + "\n" + chunk.breadcrumb
            assert MANUAL.running_header not in text, (name, text[:200])
            assert MANUAL.running_footer not in text, (name, text[:200])
            assert not PAGE_LABEL.search(text), (name, text[:200])


def test_table_of_contents_yields_no_chunk(manual: Any) -> None:
    assert not [e.text for e in manual.elements if e.page_start <= MANUAL.toc_page <= e.page_end]
    for chunk in manual.chunks:
        assert not DOT_LEADER.search(chunk.text), chunk.text[:300]
        assert not (chunk.page_start == chunk.page_end == MANUAL.toc_page)


def test_toc_entries_appear_only_as_real_headings_at_their_section(manual: Any) -> None:
    headings = {norm(e.text): e for e in manual.elements if e.kind == "heading"}
    for title, page in MANUAL.toc:
        assert title in headings, (title, sorted(headings))
        assert headings[title].page_start == page, title
        mentions = [c for c in manual.chunks if title in c.text or title in c.breadcrumb]
        assert any(c.page_start <= page <= c.page_end for c in mentions), title
        # A mention in a chunk that ends before the section (the TOC on page 2) is the TOC leaking into chunks.
        assert all(c.page_end >= page for c in mentions), title
    # Real hierarchy: title above sections above subsections.
    level = {t: headings[t].level for t in (MANUAL.title, "1 Overview", "1.1 Safety precautions") if t in headings}
    assert level.get(MANUAL.title, 0) < level["1 Overview"] < level["1.1 Safety precautions"]


def _best_window_ratio(needle: str, haystack: str) -> float:
    """Best difflib ratio of needle against word windows of about its length (OCR may differ a little)."""
    want = needle.lower().split()
    words = haystack.lower().split()
    best = 0.0
    for size in (len(want) - 1, len(want), len(want) + 1):
        for i in range(max(1, len(words) - size + 1)):
            best = max(best, SequenceMatcher(None, " ".join(want), " ".join(words[i:i + size])).ratio())
    return best


def test_scanned_page_sentence_is_found_by_ocr(results: dict[str, Any]) -> None:
    res = results[SCANNED.file]
    on_page = [c for c in res.chunks if c.page_start <= SCANNED.image_page <= c.page_end]
    assert on_page, "no chunk covers the image-only page"
    ratio = _best_window_ratio(SCANNED.sentence, "\n".join(c.text for c in on_page))
    assert ratio > 0.85, (ratio, [c.text for c in on_page])


def test_each_faq_question_shares_a_chunk_with_its_answer_and_not_with_the_next(manual: Any) -> None:
    texts = [norm(c.text + " " + c.breadcrumb) for c in manual.chunks]
    for i, (question, answer) in enumerate(MANUAL.faq):
        holders = [t for t in texts if norm(answer) in t]
        assert len(holders) == 1, question
        assert question in holders[0]
        if i + 1 < len(MANUAL.faq):
            assert MANUAL.faq[i + 1][0] not in holders[0]


def test_figure_caption_is_in_a_figure_chunk(manual: Any) -> None:
    figures = [c for c in manual.chunks if c.modality == "figure"]
    holders = [c for c in figures if MANUAL.figure_caption in norm(c.text)]
    assert holders, [c.text for c in figures]
    assert holders[0].page_start <= MANUAL.figure_page <= holders[0].page_end


def test_title_page_text_is_not_lost(manual: Any) -> None:
    # Title-page lines are body text, not headings: they must survive into chunk text, not vanish into headings.
    text = " ".join(norm(c.text) for c in manual.chunks)
    assert MANUAL.title in text
    for line in MANUAL.title_page_lines:
        assert line in text, line


def test_non_english_paragraph_is_kept_verbatim(manual: Any) -> None:
    assert any(MANUAL.non_english in norm(c.text) for c in manual.chunks)


def test_plain_documents_keep_headings_and_bullets(results: dict[str, Any]) -> None:
    for facts in SAMPLE_FACTS.plain:
        chunks: list[Chunk] = results[facts.file].chunks
        elements: list[Element] = results[facts.file].elements
        assert {h for h in facts.headings} <= {norm(e.text) for e in elements if e.kind == "heading"}
        for bullet in facts.bullets:
            assert any(bullet in norm(c.text) for c in chunks), bullet


def test_each_sample_question_is_answered_by_a_chunk_of_its_file(results: dict[str, Any]) -> None:
    for q in SAMPLE_FACTS.questions:
        texts = [c.text for c in results[q.file].chunks]
        if q.file == SCANNED.file:
            assert _best_window_ratio(q.answer, "\n".join(texts)) > 0.85, q.question
        else:
            assert any(q.answer in norm(t) for t in texts), q.question


def test_reprocessing_gives_the_same_chunk_ids(samples_dir: Path, manual: Any) -> None:
    from chunker.config import load_config
    from chunker.run.local import process_document

    local = REPO_ROOT / "configs" / "local.yaml"
    cfg = load_config(local if local.is_file() else None, ["converter.backend=pdf-text"])
    again = process_document(samples_dir / MANUAL.file, cfg, input_root=samples_dir)
    assert [c.chunk_id for c in again.chunks] == [c.chunk_id for c in manual.chunks]
