"""The document lifecycle in chunker/run: the one verdict, assembly of segments in any order, and the row codec."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from chunker.run.assemble import Assembler
from chunker.run.rows import COLUMNS, SegmentRow, batch_of, rows_of
from chunker.run.verdict import SegmentFacts, document_verdict
from chunker.schemas import DOCUMENT, document_row, read_documents, to_table
from chunker.types import Chunk, ConvertedBatch, DocumentRecord, Problem, SegmentJob, Stage, Status

DOC = DocumentRecord("d1", "/in/a.pdf", "a.pdf", 100)


def facts(i: int, pages: int = 10, **kw) -> SegmentFacts:
    return SegmentFacts(i, pages, **kw)


@pytest.mark.parametrize("segments, share, status, codes", [
    ([facts(0), facts(1)], 0.25, Status.OK, []),
    ([facts(0, failed=True, problems=[Problem(Stage.CONVERT, "timeout", "t")]), facts(1)], 0.25, Status.PARTIAL,
     ["timeout"]),
    ([facts(0, failed=True, problems=[Problem(Stage.PLAN, "coverage", "c")])], 0.25, Status.FAILED, ["coverage"]),
    ([facts(0, fallback_pages=[1, 2])], 0.25, Status.OK, ["fallback_pages"]),  # 2 of 10 pages: within the share
    ([facts(0, fallback_pages=[1, 2, 3])], 0.25, Status.PARTIAL, ["fallback_share"]),
    ([facts(0, lost_pages=[4], lost_reasons=["page 4: OCR failed"])], 1.0, Status.PARTIAL, ["pages_lost"]),
    ([], 0.25, Status.FAILED, ["no_output"]),
])
def test_the_verdict_is_decided_from_typed_facts(segments, share, status, codes):
    got, problems = document_verdict(DOC, segments, share)
    assert got == status and [p.code for p in problems] == codes


def test_the_verdict_ignores_what_messages_say():
    # A message that reads like a failure changes nothing: only the typed flags count.
    quiet = facts(0, problems=[Problem(Stage.CONVERT, "note", "fallback failed; pages left empty; partial")])
    assert document_verdict(DOC, [quiet], 0.25)[0] == Status.OK


def test_intake_outcomes_stand():
    bad = DocumentRecord("", "/in/x.pdf", "x.pdf", 0, Status.FAILED, [Problem(Stage.INTAKE, "encrypted", "needs a password")])
    assert document_verdict(bad, [], 0.25) == (Status.FAILED, bad.problems)
    done = DocumentRecord("d", "/in/y.pdf", "y.pdf", 3, Status.SKIPPED)
    assert document_verdict(done, [], 0.25)[0] == Status.SKIPPED


def _job(i: int, n: int) -> SegmentJob:
    return SegmentJob("d1", "/in/a.pdf", "a.pdf", n * 10, i, n, i * 10 + 1, i * 10 + 10, i * 10 + 1, 4)


def test_assembly_waits_for_the_last_segment_in_any_order_and_counts_a_retried_one_once():
    n = 7
    order = list(range(n)) + [3]  # segment 3 delivered twice (a retried task)
    random.Random(1).shuffle(order)
    asm = Assembler(0.25)
    outcomes = []
    seen: set[int] = set()
    for i in order:
        out = asm.add(DOC, _job(i, n), facts(i, failed=(i == 5), problems=[]), [f"c{i}"])
        seen.add(i)
        if out is not None:
            outcomes.append(out)
            assert seen == set(range(n)), "no outcome before every segment is in"
    assert len(outcomes) == 1 and asm.in_flight == 0
    out = outcomes[0]
    assert out.record.status == Status.PARTIAL and not out.complete
    assert sorted(out.chunk_ids) == sorted(f"c{i}" for i in range(n))


def _row() -> SegmentRow:
    doc = DocumentRecord("d1", "/in/\udcff odd name.pdf", "odd \U0001d400.pdf", 3)
    batch = ConvertedBatch("d1", 0, 0, 1, 3, "<!-- page 1 -->\nmath \U0001d400 and a lone \ud800 surrogate")
    chunk = Chunk("c1", "d1", ["d1:0"], "text \ud800", "A", 1, 1, "text", "deterministic", "h")
    return SegmentRow(doc, job=_job(0, 1), pdf_uri="/in/\udcff odd name.pdf", batches=[batch], chunks=[chunk],
                      vectors=np.ones((1, 4), dtype=np.float32), facts=facts(0, fallback_pages=[2]), tokens=7)


def test_rows_round_trip_through_arrow_whatever_the_text_holds():
    row = _row()
    table = pa.Table.from_pydict(batch_of([row, SegmentRow(DOC)]))  # what Ray Data does with a batch
    assert table.column_names == list(COLUMNS)
    back = rows_of(table.to_pydict())
    assert back[0].doc.source_uri == row.doc.source_uri and back[0].pdf_uri == row.pdf_uri, "paths survive as they are"
    assert back[0].batches[0].markdown == row.batches[0].markdown
    assert back[0].facts == row.facts and back[0].tokens == 7 and back[0].vectors.shape == (1, 4)
    assert back[1].job is None and not back[1].active


def test_a_row_missing_a_column_is_a_clear_setup_error():
    from chunker.errors import SetupError

    enc = _row().encode()
    del enc["facts"]
    with pytest.raises(SetupError, match="lacks columns \\['facts'\\]"):
        SegmentRow.decode(enc)


def test_documents_table_holds_typed_problems_and_safe_text():
    rec = DocumentRecord("d1", "/in/x\ud800.pdf", "x\ud800.pdf", 4, Status.PARTIAL,
                         [Problem(Stage.CONVERT, "fallback_share", "3 of 4 pages fell back")])
    table = to_table([document_row(rec, 2, 3)], DOCUMENT, config_hash="h")
    [back] = read_documents(table)
    assert back.status == Status.PARTIAL and back.problems[0].code == "fallback_share"
    assert back.source == "x\ufffd.pdf", "a lone surrogate becomes U+FFFD, never an Arrow error"
