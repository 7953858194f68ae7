"""The bulk-load path: files validated against the collection schema, the import call sequence against a fake."""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from chunker.index.bulk import BulkImportError, ChunkSink, PymilvusBulkOps
from chunker.config import MilvusConfig
from chunker.types import Chunk

DIM = 8


def _chunks(n: int, doc: str = "d1") -> tuple[list[Chunk], np.ndarray]:
    chunks = [Chunk(chunk_id=f"{doc}-c{i}", doc_id=doc, element_ids=[f"{doc}:{i}"], text=f"text {i}",
                    breadcrumb="A > B", page_start=1, page_end=1, modality="text", planner="deterministic",
                    config_hash="h", source=f"{doc}.pdf", source_uri=f"/x/{doc}.pdf") for i in range(n)]
    return chunks, np.random.default_rng(0).random((n, DIM), dtype=np.float32)


class FakeStore:
    def __init__(self, lite: bool = False) -> None:
        self.lite = lite
        self.collection = "chunks"
        self.client = None
        self.upserts: list[int] = []

    def upsert(self, chunks: list[Chunk], vectors: np.ndarray) -> int:
        self.upserts.append(len(chunks))
        return len(chunks)


class RecordingOps:
    """Records every server call; the import completes after two polls."""

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.fail = fail
        self.polls = 0

    def write_files(self, rows: list[dict[str, Any]]) -> list[list[str]]:
        self.calls.append(("write_files", len(rows)))
        return [["bulk/1.parquet"]]

    def delete_ids(self, ids: list[str]) -> None:
        self.calls.append(("delete_ids", len(ids)))

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
    sink.add(*_chunks(10))
    assert sink.commit() == "upsert" and store.upserts == [10] and ops.calls == []
    c, v = _chunks(2500, "big")
    sink.add(c + c[:5], np.concatenate([v, v[:5]]))  # a repeated ID is written once
    assert sink.commit() == "bulk"
    names = [name for name, _ in ops.calls]
    # Import never replaces rows: the IDs go first (in bounded batches), then the import, then polling.
    assert names == ["write_files", "delete_ids", "delete_ids", "delete_ids", "start_import",
                     "progress", "progress", "progress"]
    assert ops.calls[0][1] == 2500 and sum(n for name, n in ops.calls if name == "delete_ids") == 2500
    assert sleeps == [0.01, 0.01] and sink.stats.imported == 2500 and sink.commit() == "none"


def test_lite_always_upserts_and_failed_import_raises():
    cfg = MilvusConfig(bulk_threshold=1)
    store = FakeStore(lite=True)
    sink = ChunkSink(store, cfg, RecordingOps())
    sink.add(*_chunks(5))
    assert sink.commit() == "upsert"
    failing = ChunkSink(FakeStore(), MilvusConfig(uri="http://m:19530", bulk_threshold=1), RecordingOps(fail=True),
                        sleep=lambda s: None)
    failing.add(*_chunks(3))
    with pytest.raises(BulkImportError, match="bad file"):
        failing.commit()


def test_bulk_writer_files_match_the_collection_schema(tmp_path):
    from chunker.index.store import ChunkStore

    cfg = MilvusConfig(uri=str(tmp_path / "m.db"))
    with ChunkStore(cfg, DIM) as store:
        ops = PymilvusBulkOps(store, cfg, str(tmp_path / "bulk"))
        chunks, vecs = _chunks(30)
        from chunker.index.store import chunk_row

        files = ops.write_files([chunk_row(c, v) for c, v in zip(chunks, vecs)])
        desc = store.client.describe_collection(store.collection)
    paths = [p for group in files for p in group]
    assert paths and all(p.endswith(".parquet") and os.path.isfile(p) for p in paths)
    table = pq.read_table(paths[0])
    # Every input field of the collection, and nothing the server computes (the BM25 sparse vector).
    inputs = {f["name"] for f in desc["fields"] if not f.get("is_function_output")}
    assert set(table.column_names) == inputs and "sparse" not in table.column_names
    assert table.num_rows == 30
    assert sorted(table.column("chunk_id").to_pylist()) == sorted(c.chunk_id for c in chunks)
    dense = table.column("dense").to_pylist()
    assert len(dense[0]) == DIM and np.allclose(dense[0], vecs[0])


@pytest.mark.milvus_server
def test_bulk_import_on_a_real_server_is_idempotent(tmp_path):
    uri = os.environ.get("MILVUS_TEST_URI")
    bulk_uri = os.environ.get("MILVUS_TEST_BULK_URI")  # s3://<bucket the server reads>/prefix
    if not uri or not bulk_uri:
        pytest.skip("set MILVUS_TEST_URI (http://host:19530) and MILVUS_TEST_BULK_URI (s3://bucket/prefix)")
    from chunker.index.store import ChunkStore

    cfg = MilvusConfig(uri=uri, collection=f"bulk_test_{os.getpid()}", bulk_threshold=10, bulk_poll_s=1)
    with ChunkStore(cfg, DIM) as store:
        try:
            sink = ChunkSink(store, cfg, PymilvusBulkOps(store, cfg, bulk_uri, os.environ.get(cfg.token_env, "")))
            for _ in range(2):  # twice: the second import must not duplicate
                sink.add(*_chunks(50))
                assert sink.commit() == "bulk"
                assert store.count() == 50
        finally:
            store.drop()
