from pathlib import Path

import pytest

from chunker.config import IntakeConfig
from chunker.intake.inputs import InputError, InputFile, input_root, iter_inputs
from chunker.intake.prepare import inspect
from chunker.intake.segments import plan_segments
from chunker.types import DocumentRecord


def _pdf(path: Path, pages: int) -> Path:
    from fpdf import FPDF

    pdf = FPDF()
    for i in range(pages):
        pdf.add_page()
        pdf.set_font("Helvetica", size=12)
        pdf.cell(0, 10, f"page {i + 1} of {path.stem}")
    pdf.output(str(path))
    return path


def test_checks_give_reasons(tmp_path):
    cfg = IntakeConfig()
    good = _pdf(tmp_path / "good.pdf", 3)
    (tmp_path / "empty.pdf").write_bytes(b"")
    (tmp_path / "text.pdf").write_text("hello, not a pdf")
    (tmp_path / "trunc.pdf").write_bytes(good.read_bytes()[:200])
    out = {p: inspect(InputFile(str(tmp_path / p), p), cfg) for p in
           ["good.pdf", "empty.pdf", "text.pdf", "trunc.pdf", "missing.pdf"]}
    assert out["good.pdf"].status == "ok" and out["good.pdf"].num_pages == 3
    assert out["empty.pdf"].error == "empty file"
    assert "not a PDF" in out["text.pdf"].error
    assert out["trunc.pdf"].status == "failed" and "unreadable" in out["trunc.pdf"].error
    assert out["missing.pdf"].error.startswith("missing")


def test_doc_id_is_content_hash(tmp_path):
    a = _pdf(tmp_path / "a.pdf", 1)
    b = tmp_path / "copy.pdf"
    b.write_bytes(a.read_bytes())
    ra = inspect(InputFile(str(a), "a.pdf"), IntakeConfig())
    rb = inspect(InputFile(str(b), "copy.pdf"), IntakeConfig())
    assert ra.doc_id == rb.doc_id and len(ra.doc_id) == 32


def test_directory_glob_and_manifest(tmp_path):
    (tmp_path / "sub").mkdir()
    _pdf(tmp_path / "a.pdf", 1)
    _pdf(tmp_path / "sub" / "b.pdf", 1)
    cfg = IntakeConfig()
    assert [f.source for f in iter_inputs(str(tmp_path), cfg)] == ["a.pdf", "sub/b.pdf"]
    assert [f.source for f in iter_inputs(str(tmp_path / "sub" / "*.pdf"), cfg)] == ["b.pdf"]
    assert input_root(str(tmp_path / "sub" / "*.pdf")) == str(tmp_path / "sub")
    man = tmp_path / "list.jsonl"
    man.write_text('{"path": "a.pdf"}\n{"path": "sub/b.pdf"}\n')
    assert [Path(f.path).name for f in iter_inputs(str(man), cfg)] == ["a.pdf", "b.pdf"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"nopath": 1}\n')
    with pytest.raises(InputError, match="line 1"):
        list(iter_inputs(str(bad), cfg))
    with pytest.raises(InputError, match="does not exist|not a file"):
        list(iter_inputs(str(tmp_path / "nope"), cfg))


def test_batches_are_ceil_n_over_b():
    doc = DocumentRecord("d", "x.pdf", "x.pdf", 10, "ok")
    (job,) = plan_segments(doc, IntakeConfig(batch_pages=4))
    assert job.batches() == [(1, 4), (5, 8), (9, 10)]


def test_segment_boundary_rule_on_600_pages():
    doc = DocumentRecord("d", "x.pdf", "x.pdf", 600, "ok")
    cfg = IntakeConfig(batch_pages=4, segment_pages=64, segment_overlap_pages=2)
    jobs = plan_segments(doc, cfg)
    assert len(jobs) == 10  # ceil(600 / 64)
    owned = [p for j in jobs for p in range(j.page_start, j.page_end + 1)]
    assert owned == list(range(1, 601)), "every page owned by exactly one segment, in order"
    assert jobs[0].context_start == 1
    for prev, j in zip(jobs, jobs[1:]):
        assert j.context_start == prev.page_end - 1  # two overlap pages, converted for context only
        ranges = j.batches()
        assert ranges[0] == (j.context_start, j.page_start - 1)
        assert ranges[1][0] == j.page_start
    assert jobs[-1].page_end == 600 and jobs[-1].page_start == 577
