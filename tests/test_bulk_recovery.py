"""A bulk load interrupted between its deletes and its import: an import whose start got no answer is found and
waited for (or, when it never started, its rows are upserted back), and a ``--force`` run stopped after its deletes
leaves no ledger record that would skip the document with its rows gone.

The import calls go to a loopback server that speaks Milvus' REST import API (tests/bulk_support.py); the rows, the
deletes and the ledger are real (Milvus Lite, a run folder on disk). A failed upload: tests/test_bulk_bucket.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from bulk_support import (  # tests/ is on sys.path under pytest
    DONE, ImportAPI, LiteAsServer, LocalFilesOps, chunk_batch, lite_as_server, server_cfg,
)

from chunker.index.bulk import ChunkSink, ImportRefused


@pytest.fixture()
def lite_store(tmp_path, monkeypatch) -> Iterator[LiteAsServer]:
    with lite_as_server(tmp_path, monkeypatch) as store:
        yield store


class CountingUpserts(LiteAsServer):
    def __init__(self, inner: LiteAsServer) -> None:
        super().__init__(inner.inner)
        self.upserts = 0

    def upsert(self, chunks, vectors) -> int:  # noqa: ANN001
        self.upserts += 1
        return super().upsert(chunks, vectors)


def test_an_import_whose_start_got_no_answer_is_found_by_its_files_and_waited_for(lite_store, tmp_path, caplog):
    """The server made the job, but its answer came after the client's deadline. Writing the rows another way now
    would double them when that job lands (an import never replaces rows): the sink finds the job and waits."""
    store = CountingUpserts(lite_store)
    api = ImportAPI({"chunks"}, DONE)
    api.answer_delay_s = 2.0
    try:
        cfg = server_cfg(api.url, write_timeout_s=0.5)
        sink = ChunkSink(store, cfg, LocalFilesOps(store, cfg, folder=str(tmp_path / "files")), sleep=lambda s: None)
        sink.add(*chunk_batch(20))
        assert sink.commit() == "bulk"
    finally:
        api.close()
    assert len(api.jobs) == 1 and sink.stats.imported == 20 and store.upserts == 0, "one job, nothing written twice"
    paths = [p for p, _, _ in api.requests]
    assert paths[0].endswith("/create") and "/v2/vectordb/jobs/import/list" in paths
    assert "was found by its files and is waited for" in caplog.text


def test_an_import_that_never_started_has_its_rows_upserted_back(lite_store, tmp_path):
    """No answer, and no job with the commit's files shows up: the deletes already ran, so the rows are upserted."""
    store = CountingUpserts(lite_store)
    store.upsert(*chunk_batch(20))  # a re-run: the rows are there, and the load deletes them before its import
    store.upserts = 0
    api = ImportAPI({"chunks"}, DONE)
    api.answer_delay_s, api.create_on_timeout = 2.0, False
    now = [0.0]

    def sleep(s: float) -> None:
        now[0] += s

    try:
        cfg = server_cfg(api.url, write_timeout_s=0.5)
        sink = ChunkSink(store, cfg, LocalFilesOps(store, cfg, folder=str(tmp_path / "files")), sleep=sleep,
                         clock=lambda: now[0])
        sink.add(*chunk_batch(20))
        assert sink.commit() == "upsert"
    finally:
        api.close()
    assert api.jobs == {} and store.upserts >= 1 and lite_store.count() == 20 and not sink.take_refused()


class StopsBeforeImport(LocalFilesOps):
    """Deletes as the real class does, then the run stops before the import starts (a driver killed there, or a
    refusal: the same state)."""

    def start_import(self, files):  # noqa: ANN001, ANN201
        raise ImportRefused("the run stopped between the deletes and the import (test)")


def test_a_forced_redo_stopped_after_its_deletes_is_redone_by_the_next_run(lite_store, tmp_path):
    from chunker.config import load_config
    from chunker.eval.synthetic import write_document
    from chunker.intake.sources import absolute_uri
    from chunker.run.ledger import Ledger
    from chunker.run.rows import SegmentRow
    from jobs.stages import intake_rows

    pdf = tmp_path / "in" / "manual.pdf"
    write_document(pdf, 2, seed=3, title="Manual")
    run, h, target = str(tmp_path / "run"), "cfghash", "m#chunks"
    cfg = load_config(None)

    def intake(force: bool) -> SegmentRow:
        [raw, *_] = intake_rows({"path": str(pdf), "source": "manual.pdf"}, cfg, run, h, target, force=force)
        return SegmentRow.decode(raw)

    # A first run finished the document: its rows are in, its ledger records written.
    first = intake(force=False)
    chunks, vecs = chunk_batch(20, first.doc.doc_id)
    lite_store.upsert(chunks, vecs)
    Ledger(run, h, target).mark_done(first.doc.doc_id, absolute_uri(str(pdf)), "v1")
    assert intake(force=False).doc.status.value == "skipped"
    # --force: the document is redone; its load deletes the old rows, then the run stops before the import.
    assert intake(force=True).active
    cfg_m = server_cfg("http://127.0.0.1:1")
    sink = ChunkSink(lite_store, cfg_m, StopsBeforeImport(lite_store, cfg_m, folder=str(tmp_path / "f")),
                     sleep=lambda s: None)
    sink.add(chunks, vecs)
    with pytest.raises(ImportRefused):
        sink.commit()
    assert lite_store.count() == 0, "the old rows were deleted before the import that never came"
    # The next run, without --force, must redo it rather than skip it with its rows gone.
    again = intake(force=False)
    assert again.active and again.doc.status.value != "skipped", again.doc.problems


def test_the_documents_record_of_another_copy_stays_when_one_copy_is_forced(tmp_path):
    """The same bytes at two paths are two documents: forcing one copy leaves the other one done."""
    from chunker.run.ledger import Ledger

    ledger = Ledger(str(tmp_path / "run"), "h", "t")
    ledger.mark_done("d", "file:///a.pdf", "v")
    ledger.mark_done("d", "file:///b.pdf", "v")
    ledger.forget_copy("file:///a.pdf")
    assert not ledger.is_done("d", "file:///a.pdf") and ledger.is_done("d", "file:///b.pdf")
    assert Path(tmp_path / "run" / "ledger" / "h" / "d.json").exists()
