"""Re-chunking a persisted run (jobs.rechunk): new plans, re-embedded, Milvus reloaded, no converter run."""

import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from chunker.backends.scripted import ScriptedBackend
from chunker.config import config_hash, load_config
from chunker.run.layout import RunStore
from chunker.schemas import CHUNK, CONVERTED_BATCH, DOCUMENT, ELEMENT, document_row, to_table

pytest.importorskip("fpdf")
pytest.importorskip("milvus_lite")

SECTIONS = {
    "Opening an Account": "Customers open an account online or in a branch. Bring an identity document and proof of "
                          "address. The account is active once the first deposit of at least 50 EUR arrives.",
    "Fees and Limits": "The monthly fee is 4 EUR and is waived for students. Cash withdrawals abroad cost 2 EUR each. "
                       "The daily card limit is 1,000 EUR and can be raised in the app for one day at a time.",
    "Closing an Account": "Ask for closure in writing. The remaining balance is paid to an account you name within "
                          "ten working days. Closed accounts cannot be reopened; open a new one instead.",
}


def make_pdf(path: Path) -> None:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 18)
    pdf.cell(0, 10, "Current Account Guide", new_x="LMARGIN", new_y="NEXT")
    for title, text in SECTIONS.items():
        pdf.set_font("Helvetica", "B", 14)
        pdf.cell(0, 9, title, new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("Helvetica", size=10)
        for i in range(3):
            pdf.multi_cell(0, 5, f"{text} (Note {i + 1} on {title.lower()}.)", new_x="LMARGIN", new_y="NEXT")
            pdf.ln(3)
    pdf.output(str(path))


@pytest.fixture(scope="module")
def embedder():
    from chunker.config import EmbedConfig
    from chunker.index.embed import Embedder

    return Embedder(EmbedConfig())


def _cfg(db: Path, *extra: str):
    return load_config(None, [f"milvus.uri={db}", "planner.target_chars=800", "planner.min_chars=200", *extra])


def make_run(tmp: Path, db: Path, embedder) -> tuple[Path, set[str]]:
    """A run folder written by the pure-Python path, indexed into a Milvus Lite db; returns it and its chunk IDs."""
    from chunker.run.local import process_document
    from chunker.index.store import ChunkStore

    pdf = tmp / "guide.pdf"
    make_pdf(pdf)
    cfg = _cfg(db)
    h = config_hash(cfg)
    res = process_document(pdf, cfg)
    assert res.document.status == "ok" and len(res.chunks) >= 2
    run = RunStore(str(tmp / "run"))
    doc_id = res.document.doc_id
    for seg in sorted({b.segment_index for b in res.batches}):
        batches = [b for b in res.batches if b.segment_index == seg]
        run.write("batches", f"{doc_id}-{seg:05d}", to_table(batches, CONVERTED_BATCH, config_hash=h))
    run.write("chunks", f"{doc_id}-00000", to_table(res.chunks, CHUNK))
    run.write("elements", f"{doc_id}-00000", to_table(res.elements, ELEMENT, config_hash=h))
    run.write("documents", "documents",
              to_table([document_row(res.document, len(res.chunks), 0)], DOCUMENT, config_hash=h))
    with ChunkStore(cfg.milvus, embedder.dim) as store:
        store.upsert(res.chunks, embedder.encode([c.text for c in res.chunks]))
        store.flush()
    return tmp / "run", {c.chunk_id for c in res.chunks}


@pytest.fixture()
def forbid_conversion(monkeypatch):
    """Call it once the run exists: from then on any converter use fails the test."""
    import chunker.convert.factory as factory
    import chunker.run.segment as segment

    def boom(*a, **k):
        raise AssertionError("rechunk called a converter")

    def forbid() -> None:
        monkeypatch.setattr(factory, "make_converter", boom)
        monkeypatch.setattr(segment, "convert_segment", boom)

    return forbid


def milvus_ids(db: Path, dim: int) -> set[str]:
    from chunker.config import MilvusConfig
    from chunker.index.store import ChunkStore

    with ChunkStore(MilvusConfig(uri=str(db)), dim) as store:
        return store.chunk_ids()


def test_rechunk_replans_reembeds_and_replaces_chunks_without_converting(tmp_path, embedder, forbid_conversion,
                                                                         capsys):
    from jobs.rechunk import main

    db = tmp_path / "milvus.db"
    run, old_ids = make_run(tmp_path, db, embedder)
    docs_part = next((run / "documents").glob("*.parquet"))
    written = pq.read_table(docs_part)
    assert written.column("identity").to_pylist()[0], "the documents table carries the identity"
    # A run written before it did: the identity comes from the source run's chunks.
    pq.write_table(written.set_column(written.column_names.index("identity"), "identity",
                                      pa.array([None] * written.num_rows, pa.string())), docs_part)
    forbid_conversion()
    out = tmp_path / "rechunked"
    rc = main(["--from", str(run), "--output", str(out), "--set", f"milvus.uri={db}",
               "--set", "planner.target_chars=250", "--set", "planner.min_chars=50"])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "planning report" in printed and "coverage" in printed

    new_cfg = load_config(None, [f"milvus.uri={db}", "planner.target_chars=250", "planner.min_chars=50"])
    chunks = pq.read_table(out / "chunks").to_pylist()
    new_ids = {c["chunk_id"] for c in chunks}
    assert new_ids != old_ids and len(new_ids) > len(old_ids), "smaller targets make more chunks"
    assert milvus_ids(db, embedder.dim) == new_ids, "Milvus holds exactly the new plan"
    assert {c["config_hash"] for c in chunks} == {config_hash(new_cfg)}
    assert {c["planner"] for c in chunks} == {"deterministic"}
    assert all(c["source"] == "guide.pdf" for c in chunks)
    # The document's identity (found at intake from the PDF, which re-chunking never reads) is carried over: every
    # new chunk, written and embedded, has the one the source run's chunks had.
    old_identity = {c["identity"] for c in pq.read_table(run / "chunks").to_pylist()}
    assert len(old_identity) == 1 and "" not in old_identity
    assert {c["identity"] for c in chunks} == old_identity

    elements = pq.read_table(out / "elements").to_pylist()
    placed = [i for c in sorted(chunks, key=lambda c: c["element_ids"][0]) for i in c["element_ids"]]
    assert sorted(placed) == sorted(e["element_id"] for e in elements)
    docs = pq.read_table(out / "documents").to_pylist()
    assert docs[0]["num_chunks"] == len(chunks) and docs[0]["status"] == "ok"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["chunks"] == len(chunks) and summary["previous_chunks"] == len(old_ids)
    report = json.loads((out / "planning_report.json").read_text())
    assert report["coverage"]["ratio"] == 1.0 and report["chunks"]["count"] == len(chunks)
    assert (out / "planning_report.txt").read_text().startswith("== planning report ==")

    # The same report, built from any run folder's tables (what ingest can call): the old run, the new run.
    from chunker.run.report import report_for_run

    old = report_for_run(RunStore(str(run)))
    assert old["chunks"]["count"] == len(old_ids) and old["coverage"]["ratio"] == 1.0
    again = report_for_run(RunStore(str(out)))
    assert again["chunks"] == report["chunks"] and again["coverage"] == report["coverage"]


def test_rechunk_with_the_llm_planner(tmp_path, embedder, forbid_conversion):
    from jobs.rechunk import run_rechunk

    db = tmp_path / "milvus.db"
    run, old_ids = make_run(tmp_path, db, embedder)
    forbid_conversion()

    def one_chunk_per_paragraph(req, i):
        return json.dumps({"chunks": [[int(m)] for m in re.findall(r"^\[(\d+)\]", req.user, re.M)]})

    backend = ScriptedBackend(one_chunk_per_paragraph)
    cfg = _cfg(db, "planner.kind=llm", "planner.llm_backend=scripted", "planner.min_chars=0")
    s = run_rechunk(cfg, str(run), str(tmp_path / "out"), backend=backend, embedder=embedder)
    chunks = pq.read_table(tmp_path / "out" / "chunks").to_pylist()
    assert backend.calls >= 1 and {c["planner"] for c in chunks} == {"llm"}
    assert milvus_ids(db, embedder.dim) == {c["chunk_id"] for c in chunks} != old_ids
    report = json.loads((tmp_path / "out" / "planning_report.json").read_text())
    assert report["llm_calls"] == backend.calls and report["llm_tokens"]["output"] > 0
    assert report["repairs"].get("lone_heading", 0) >= 1, "headings the script left alone were joined below"
    assert report["fallbacks"]["sections"] == 0 and s.collection_rows == len(chunks)


def test_rechunk_of_a_folder_without_batches_is_an_error(tmp_path, capsys):
    from jobs.rechunk import main

    (tmp_path / "empty").mkdir()
    assert main(["--from", str(tmp_path / "empty"), "--set", f"milvus.uri={tmp_path / 'm.db'}"]) == 2
    assert "no converted batches" in capsys.readouterr().err


def test_rechunk_replaces_an_older_version_of_the_document(tmp_path, embedder):
    """The same source indexed earlier from other bytes (another doc_id) must not linger beside the re-planned one:
    rechunk closes documents through the ingest's writer, which deletes other versions."""
    from chunker.index.store import ChunkStore
    from chunker.types import Chunk
    from jobs.rechunk import run_rechunk

    db = tmp_path / "milvus.db"
    run, _ = make_run(tmp_path, db, embedder)
    stale = Chunk("old-1", "olddoc", ["olddoc:0"], "Current Account Guide, last year's edition", "", 1, 1, "text",
                  "deterministic", "h-old", source="guide.pdf", source_uri=str(tmp_path / "guide.pdf"))
    with ChunkStore(_cfg(db).milvus, embedder.dim) as store:
        store.upsert([stale], embedder.encode([stale.text]))
        store.flush()
    assert "old-1" in milvus_ids(db, embedder.dim)
    s = run_rechunk(_cfg(db, "planner.target_chars=300", "planner.min_chars=50"), str(run), str(tmp_path / "out"),
                    embedder=embedder)
    ids = milvus_ids(db, embedder.dim)
    assert "old-1" not in ids and len(ids) == s.chunks == s.collection_rows
