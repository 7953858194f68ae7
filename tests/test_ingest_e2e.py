"""The whole spine through real Ray Data, Milvus Lite and MiniLM, on the generated samples."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from chunker.config import load_config
from ray_support import ray_runtime_fixture

pytestmark = [pytest.mark.ray, pytest.mark.slow]


ray_runtime = ray_runtime_fixture()


def _cfg(db: Path, *extra: str):
    return load_config("configs/local.yaml", [f"milvus.uri={db}", *extra])


def _chunk_ids(db: Path) -> set[str]:
    from chunker.index.store import ChunkStore

    with ChunkStore(_cfg(db).milvus, 384) as store:
        return store.chunk_ids()


def test_ingest_rerun_and_edit(ray_runtime, samples_dir, tmp_path):
    from jobs.ingest import run_ingest

    docs = tmp_path / "docs"
    shutil.copytree(samples_dir, docs)
    db = tmp_path / "milvus.db"
    s1 = run_ingest(_cfg(db), str(docs), str(tmp_path / "run1"))
    assert (s1.documents, s1.ok, s1.failed) == (4, 4, 0), s1.problems
    assert s1.chunks > 10 and s1.collection_rows == s1.chunks
    for stage in ("batches", "elements", "chunks"):
        parts = list((tmp_path / "run1" / stage).glob("*.parquet"))
        assert len(parts) == 4, stage
    table = pq.read_table(tmp_path / "run1" / "documents")
    assert set(table.column("status").to_pylist()) == {"ok"}
    assert set(table.column("config_hash").to_pylist()) == {s1.config_hash}
    chunks = pq.read_table(tmp_path / "run1" / "chunks")
    assert set(chunks.column("config_hash").to_pylist()) == {s1.config_hash}
    ids1 = _chunk_ids(db)

    # Same input again: nothing duplicated, nothing lost.
    s2 = run_ingest(_cfg(db), str(docs), str(tmp_path / "run2"))
    assert s2.collection_rows == s1.collection_rows and _chunk_ids(db) == ids1

    # Edit one document: only its chunks change.
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 16)
    pdf.cell(0, 10, "Travel and Expense Policy", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", size=10)
    pdf.multi_cell(0, 5, "Claims are now due within 45 days. Receipts are needed above EUR 10.")
    pdf.output(str(docs / "travel-expense-policy.pdf"))
    chunk_rows = chunks.to_pylist()
    old_travel = {r["chunk_id"] for r in chunk_rows if r["source"] == "travel-expense-policy.pdf"}
    s3 = run_ingest(_cfg(db), str(docs), str(tmp_path / "run3"))
    ids3 = _chunk_ids(db)
    assert s3.ok == 4
    assert ids1 - old_travel <= ids3, "other documents keep their chunks"
    assert not (old_travel & ids3), "the edited document's old chunks are gone"
    new = pq.read_table(tmp_path / "run3" / "chunks").to_pylist()
    assert {r["chunk_id"] for r in new} == ids3

    # New planner settings: the document's chunks that the new plan dropped go too.
    s4 = run_ingest(_cfg(db, "planner.target_chars=300", "planner.min_chars=50"), str(docs), str(tmp_path / "run4"))
    new4 = {r["chunk_id"] for r in pq.read_table(tmp_path / "run4" / "chunks").to_pylist()}
    assert _chunk_ids(db) == new4 and s4.collection_rows == len(new4)


def test_robustness_files_never_stop_the_run(ray_runtime, samples_dir, shared_data, tmp_path):
    from jobs.ingest import run_ingest

    robust = shared_data / "robustness"
    if not robust.is_dir():
        pytest.skip("robustness data absent")
    docs = tmp_path / "mixed"
    shutil.copytree(robust, docs)
    for f in samples_dir.glob("*.pdf"):
        shutil.copy(f, docs / f"good-{f.name}")
    (docs / "manifest.jsonl").unlink()
    cfg = _cfg(tmp_path / "milvus.db", "intake.patterns=['*']", "converter.pdf_text.ocr_max_side_px=600")
    s = run_ingest(cfg, str(docs), str(tmp_path / "run"))
    files = sorted(p.name for p in docs.iterdir())
    assert s.documents == len(files) == 49
    outcomes = pq.read_table(tmp_path / "run" / "documents").to_pylist()
    assert {o["source"] for o in outcomes} == set(files)
    for o in outcomes:
        assert o["status"] in {"ok", "partial", "failed"}
        if o["status"] != "ok":
            assert o["error"], f"{o['source']} is {o['status']} without a reason"
    by_name = {o["source"]: o for o in outcomes}
    assert by_name["empty.pdf"]["status"] == "failed" and "empty" in by_name["empty.pdf"]["error"]
    assert "password" in by_name["qpdf__enc-long-password.pdf"]["error"]
    good = [o for o in outcomes if o["source"].startswith("good-")]
    assert all(o["status"] == "ok" and o["num_chunks"] > 0 for o in good)
    indexed = {r["source"] for r in pq.read_table(tmp_path / "run" / "chunks").to_pylist()}
    assert {o["source"] for o in good} <= indexed


def test_small_and_parted_listings_ingest_the_same(ray_runtime, samples_dir, tmp_path):
    """A listing of one part goes into the pipeline from the driver (no read task before the first intake); a
    listing of several parts is read by Ray tasks. Both must give every document and the same chunks."""
    from jobs.ingest import run_ingest

    docs = tmp_path / "docs"
    shutil.copytree(samples_dir, docs)
    one = run_ingest(_cfg(tmp_path / "a.db"), str(docs), str(tmp_path / "one"))
    parted = run_ingest(_cfg(tmp_path / "b.db", "intake.listing_block=1"), str(docs), str(tmp_path / "parted"))
    assert len(list((tmp_path / "one" / "listing").iterdir())) == 1
    assert len(list((tmp_path / "parted" / "listing").iterdir())) == 4
    assert (one.documents, one.ok) == (parted.documents, parted.ok) == (4, 4)
    ids = {p: set(pq.read_table(tmp_path / p / "chunks").column("chunk_id").to_pylist()) for p in ("one", "parted")}
    assert ids["one"] == ids["parted"] and len(ids["one"]) == one.chunks > 10
