"""Segments end to end on a real PDF: the overlap primes context and is dropped; nothing is lost or repeated."""

from fpdf import FPDF

from chunker.config import load_config
from chunker.run.local import process_document


def test_long_document_in_segments_covers_every_page_once(tmp_path):
    pdf = FPDF()
    for p in range(1, 71):
        pdf.add_page()
        if p in (1, 31):
            pdf.set_font("Helvetica", "B", 16)
            pdf.cell(0, 10, f"Chapter starting on page {p}", new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("Helvetica", size=10)
        pdf.multi_cell(0, 5, f"Body of page {p}. It is a complete sentence about item number {p}.")
    path = tmp_path / "long.pdf"
    pdf.output(str(path))
    cfg = load_config(None, ["intake.segment_pages=32", "intake.segment_overlap_pages=2"])
    res = process_document(path, cfg)
    assert res.document.status == "ok", res.document.error
    segments = sorted({b.segment_index for b in res.batches})
    assert segments == [0, 1, 2]
    overlap = [b for b in res.batches if b.context_only]
    assert [(b.page_start, b.page_end) for b in overlap] == [(31, 32), (63, 64)]
    text = "\n".join(c.text for c in res.chunks)
    for p in range(1, 71):
        assert text.count(f"Body of page {p}.") == 1, f"page {p} must land exactly once"
    # The second segment starts under the chapter heading its overlap (pages 31-32) left open.
    first_of_seg1 = next(e for e in res.elements if e.page_start == 33)
    assert first_of_seg1.heading_path == ["Chapter starting on page 31"]
    assert len({e.element_id for e in res.elements}) == len(res.elements)



UNITS = "north south east west river coast valley harbour".split()


def test_a_segment_starts_under_its_overlaps_headings_at_their_levels(tmp_path):
    """The overlap hands its open headings to the segment at the levels they had there. Read as 1, 2, ... a bold
    section heading open at the overlap's end (level 2 under the segment's one larger size) outranked every section
    heading of the segment and titled all of it: one 10-K's pages 65-120 were all under "Revenue by Category"."""
    pdf = FPDF()
    for p in range(1, 51):
        pdf.add_page()
        if p in (1, 40):
            pdf.set_font("Helvetica", "B", 16)
            pdf.cell(0, 10, "Annual Report" if p == 1 else "Part Two", new_x="LMARGIN", new_y="NEXT")
            pdf.ln(4)
        pdf.set_font("Helvetica", size=10)
        pdf.multi_cell(0, 5, " ".join([f"The {UNITS[(p + 3) % 8]} office kept to its plan."] * (p % 4 + 1)))
        pdf.ln(4)
        pdf.set_font("Helvetica", "B", 10)
        pdf.cell(0, 6, f"Results of the {UNITS[p % 8]} unit", new_x="LMARGIN", new_y="NEXT")
        pdf.ln(3)
        pdf.set_font("Helvetica", size=10)
        pdf.multi_cell(0, 5, f"Body of page {p}. It is a complete sentence about item number {p}, written out so "
                       "that it runs over a whole line of the page and on to the next one.")
    path = tmp_path / "levels.pdf"
    pdf.output(str(path))
    cfg = load_config(None, ["intake.segment_pages=32", "intake.segment_overlap_pages=2"])
    res = process_document(path, cfg)
    assert res.document.status == "ok", res.document.error
    body = {e.page_start: e for e in res.elements if e.kind == "paragraph" and e.text.startswith("Body of page")}
    assert body[31].heading_path == ["Annual Report", "Results of the harbour unit"]
    # Page 32 (the overlap's last) ends under "Results of the north unit", a sibling of page 33's section.
    assert body[33].heading_path == ["Results of the south unit"]
    assert body[41].heading_path == ["Part Two", "Results of the south unit"]
