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


def test_files_no_pattern_matches_are_listed_and_taken_when_their_bytes_are_a_pdf(tmp_path):
    import json

    from chunker.config import load_config
    from chunker.run.layout import RunStore
    from chunker.run.listing import manifest_rows, write_listing

    src = tmp_path / "in"
    src.mkdir()
    pdf_bytes = _pdf(tmp_path / "x.pdf", 2).read_bytes()
    (src / "a.pdf").write_bytes(pdf_bytes)
    (src / "scan-0001.dat").write_bytes(pdf_bytes)  # a PDF under a name no pattern matches
    (src / "report").write_bytes(pdf_bytes)  # no extension at all
    (src / "notes.md").write_text("# not a document")
    (src / "blank.bin").write_bytes(b"")
    cfg = load_config(None, [])
    assert [f.source for f in iter_inputs(str(src), cfg.intake)] == ["a.pdf"], "callers that want matches only"
    parts = write_listing(str(src), cfg, RunStore(str(tmp_path / "out")))
    rows = [r for p in parts for ln in Path(p).read_text().splitlines() for r in manifest_rows({"text": ln}, "")]
    assert {r["source"]: r["unmatched"] for r in rows} == {
        "a.pdf": False, "blank.bin": True, "notes.md": True, "report": True, "scan-0001.dat": True}
    out = {r["source"]: inspect(InputFile(r["path"], r["source"], matched=not r["unmatched"]), cfg.intake)
           for r in rows}
    assert [out[n].status for n in ("a.pdf", "scan-0001.dat", "report")] == ["ok", "ok", "ok"]
    assert out["scan-0001.dat"].doc_id == out["a.pdf"].doc_id and out["report"].num_pages == 2
    for name, what in (("notes.md", "not a PDF"), ("blank.bin", "empty")):
        rec = out[name]
        assert rec.status == "failed" and [(p.stage.value, p.code) for p in rec.problems] == [("intake", "not_matched")]
        assert what in rec.error and "intake.patterns" in rec.error
    assert json.loads(Path(parts[0]).read_text().splitlines()[0]).keys() == {"path", "source"}


def test_a_file_name_that_is_not_utf8_travels_through_arrow_and_opens(tmp_path):
    import os

    import pyarrow as pa

    from chunker.intake.sources import local_path
    from chunker.run.listing import manifest_batch

    name = b"caf\xe9-\xff.pdf"  # Latin-1 bytes: not UTF-8, as an old archive or a foreign share has them
    data = _pdf(tmp_path / "x.pdf", 1).read_bytes()
    folder = os.path.join(os.fsencode(tmp_path), b"in")
    os.mkdir(folder)
    with open(os.path.join(folder, name), "wb") as fh:
        fh.write(data)
    [f] = iter_inputs(os.fsdecode(folder), IntakeConfig())
    import json

    batch = manifest_batch({"text": [json.dumps({"path": f.path, "source": f.source})]}, "")
    pa.table(batch)  # a lone surrogate here would fail the whole block
    assert batch["path"][0].startswith("file://") and "\ufffd" in batch["source"][0]
    assert os.fsencode(local_path(batch["path"][0])) == os.path.join(folder, name)
    rec = inspect(InputFile(batch["path"][0], batch["source"][0]), IntakeConfig())
    assert rec.status == "ok" and rec.num_pages == 1


def test_zero_pages_is_not_mistaken_for_a_password_after_an_encrypted_file(tmp_path):
    from chunker.eval.hostile import encrypted, text_pdf
    import random

    (tmp_path / "locked.pdf").write_bytes(encrypted(random.Random(1), "RC4", True))
    (tmp_path / "zero.pdf").write_bytes(text_pdf([]).build())
    cfg = IntakeConfig()
    for name, code in (("locked.pdf", "encrypted"), ("zero.pdf", "zero_pages"), ("locked.pdf", "encrypted")):
        rec = inspect(InputFile(str(tmp_path / name), name), cfg)
        assert [p.code for p in rec.problems] == [code], name
