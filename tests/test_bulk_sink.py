"""The bulk sink's decisions, against fakes of the store and of the server's import steps: upsert or import, the
deletes before an import, fresh loads, and what a refused document or an unreachable store does to a commit."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from bulk_support import chunk_batch  # tests/ is on sys.path under pytest

from chunker.config import MilvusConfig
from chunker.index.bulk import BulkImportError, ChunkSink, ImportRefused, StoreRefusedAll
from chunker.types import Chunk


class FakeStore:
    def __init__(self, lite: bool = False, rows: int = 0) -> None:
        self.lite = lite
        self.collection = "chunks"
        self.client = None
        self.upserts: list[int] = []
        self.rows = rows
        self.counts = 0

    def upsert(self, chunks: list[Chunk], vectors: np.ndarray) -> int:
        self.upserts.append(len(chunks))
        return len(chunks)

    def count(self) -> int:
        self.counts += 1
        return self.rows


class RecordingOps:
    """Records every server call; the import completes after two polls."""

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.deleted: list[str] = []
        self.fail = fail
        self.polls = 0

    def write_files(self, rows: list[dict[str, Any]]) -> list[list[str]]:
        self.calls.append(("write_files", len(rows)))
        return [["bulk/1.parquet"]]

    def delete_ids(self, ids: list[str]) -> None:
        self.calls.append(("delete_ids", len(ids)))
        self.deleted.extend(ids)

    def start_import(self, files: list[list[str]]) -> str:
        self.calls.append(("start_import", files))
        return "job-1"

    def progress(self, job_id: str) -> dict[str, Any]:
        self.polls += 1
        self.calls.append(("progress", job_id))
        if self.polls < 3:
            return {"state": "Importing", "progress": 50 * self.polls}
        return {"state": "Failed", "reason": "bad file"} if self.fail else {"state": "Completed", "progress": 100}


def test_below_threshold_upserts_above_imports_with_delete_first():
    cfg = MilvusConfig(uri="http://milvus:19530", bulk_threshold=100, bulk_poll_s=0.01)
    store, ops, sleeps = FakeStore(), RecordingOps(), []
    sink = ChunkSink(store, cfg, ops, sleep=sleeps.append)
    sink.add(*chunk_batch(10))
    assert sink.commit() == "upsert" and store.upserts == [10] and ops.calls == []
    c, v = chunk_batch(2500, "big")
    sink.add(c + c[:5], np.concatenate([v, v[:5]]))  # a repeated ID is written once
    assert sink.commit() == "bulk"
    names = [name for name, _ in ops.calls]
    # Import never replaces rows: the IDs go first (in bounded batches), then the import, then polling.
    assert names == ["write_files", "delete_ids", "delete_ids", "delete_ids", "start_import",
                     "progress", "progress", "progress"]
    assert ops.calls[0][1] == 2500 and sum(n for name, n in ops.calls if name == "delete_ids") == 2500
    assert sleeps == [0.01, 0.01] and sink.stats.imported == 2500 and sink.commit() == "none"


def test_lite_always_upserts_and_a_failed_import_is_written_document_by_document(caplog):
    cfg = MilvusConfig(bulk_threshold=1)
    store = FakeStore(lite=True)
    sink = ChunkSink(store, cfg, RecordingOps())
    sink.add(*chunk_batch(5))
    assert sink.commit() == "upsert"
    # A failed import job (its rows may hold one the server refuses): each document is written alone instead, and
    # the server's reason is logged.
    other = FakeStore()
    failing = ChunkSink(other, MilvusConfig(uri="http://m:19530", bulk_threshold=1), RecordingOps(fail=True),
                        sleep=lambda s: None)
    for doc in ("d1", "d2"):
        failing.add(*chunk_batch(3, doc))
    assert failing.commit() == "upsert" and other.upserts == [3, 3] and failing.take_refused() == {}
    assert "bad file" in caplog.text


# ------------------------------------------------------------------ sink decisions (fresh load, load mode)

def test_fresh_load_deletes_only_ids_this_run_already_wrote():
    cfg = MilvusConfig(uri="http://milvus:19530", bulk_threshold=10, bulk_poll_s=0.01, fresh_load=True)
    store, ops = FakeStore(rows=0), RecordingOps()
    sink = ChunkSink(store, cfg, ops, sleep=lambda s: None)
    sink.add(*chunk_batch(20, "a"))
    assert sink.commit() == "bulk" and sink.fresh is True
    assert ops.deleted == []  # an empty collection: nothing of doc "a" can exist yet
    # Doc "a" again (a duplicate file in the corpus) and a new doc "b": only "a"'s IDs can exist now.
    ca, va = chunk_batch(12, "a")
    cb, vb = chunk_batch(12, "b")
    sink.add(ca + cb, np.concatenate([va, vb]))
    assert sink.commit() == "bulk"
    assert sorted(ops.deleted) == sorted(c.chunk_id for c in ca)
    assert store.counts == 1  # emptiness is checked once, at the first commit


def test_fresh_load_on_a_collection_with_rows_keeps_deleting():
    cfg = MilvusConfig(uri="http://milvus:19530", bulk_threshold=10, bulk_poll_s=0.01, fresh_load=True)
    ops = RecordingOps()
    sink = ChunkSink(FakeStore(rows=7), cfg, ops, sleep=lambda s: None)  # a resumed run: rows already there
    sink.add(*chunk_batch(20))
    assert sink.commit() == "bulk" and sink.fresh is False
    assert len(ops.deleted) == 20


def test_load_mode_upsert_never_imports():
    cfg = MilvusConfig(uri="http://milvus:19530", bulk_threshold=1, load_mode="upsert")
    store, ops = FakeStore(), RecordingOps()
    sink = ChunkSink(store, cfg, ops)
    sink.add(*chunk_batch(30))
    assert sink.commit() == "upsert" and store.upserts == [30] and ops.calls == []


class RefusingStore(FakeStore):
    """Refuses any upsert holding a chunk of the named documents, as Milvus refuses a batch with one bad row
    (pymilvus raises MilvusException with the server's code), or answers as a server that is gone."""

    def __init__(self, bad: set[str], outage: bool = False) -> None:
        super().__init__()
        self.bad = bad
        self.outage = outage
        self.written: list[str] = []

    def upsert(self, chunks: list[Chunk], vectors: np.ndarray) -> int:
        from pymilvus.client.types import Status
        from pymilvus.exceptions import MilvusException

        if self.outage:
            raise MilvusException(code=Status.CONNECT_FAILED, message="fail connecting to server")
        if any(c.doc_id in self.bad for c in chunks):
            raise MilvusException(code=1100, message="the length of varchar field text exceeds max length")
        self.written.extend(c.chunk_id for c in chunks)
        return super().upsert(chunks, vectors)


def test_a_document_the_store_refuses_is_left_out_and_named_the_others_are_written(caplog):
    store = RefusingStore({"bad"})
    sink = ChunkSink(store, MilvusConfig(uri="http://m:19530"))
    for doc in ("a", "bad", "b"):
        sink.add(*chunk_batch(2, doc))
    assert sink.commit() == "upsert"
    assert store.upserts == [2, 2], "the batch failed; then each document alone, the refused one not counted"
    assert sorted(store.written) == ["a-c0", "a-c1", "b-c0", "b-c1"]
    refused = sink.take_refused()
    assert list(refused) == [("bad", "/x/bad.pdf")] and "exceeds max length" in refused[("bad", "/x/bad.pdf")]
    assert sink.take_refused() == {}, "reported once"


def test_an_outage_or_a_store_refusing_everything_stops_the_run():
    from chunker.errors import SetupError
    from chunker.index.store import StoreUnavailable

    down = ChunkSink(RefusingStore(set(), outage=True), MilvusConfig(uri="http://m:19530"))
    down.add(*chunk_batch(2, "a"))
    with pytest.raises(StoreUnavailable, match="unreachable"):
        down.commit()
    everything = ChunkSink(RefusingStore({"a", "b"}), MilvusConfig(uri="http://m:19530"))
    for doc in ("a", "b"):
        everything.add(*chunk_batch(2, doc))
    with pytest.raises(StoreRefusedAll, match="refused each of the 2 documents") as info:
        everything.commit()
    assert isinstance(info.value, SetupError)
    # A refused import (wrong token, unknown collection) read no row: the store's fault, a setup error.
    assert issubclass(ImportRefused, SetupError) and issubclass(ImportRefused, BulkImportError)


def test_injected_write_faults_reach_the_sink(monkeypatch):
    from chunker.run import faults

    monkeypatch.setenv(faults.ENV, "write:bad.pdf")
    store = FakeStore()
    sink = ChunkSink(store, MilvusConfig(uri="http://m:19530"))
    for doc in ("a", "bad"):
        sink.add(*chunk_batch(2, doc))
    sink.commit()
    assert store.upserts == [2] and list(sink.take_refused()) == [("bad", "/x/bad.pdf")]
