"""The bulk-load path against real calls: files validated against the collection schema, the bulk target's
settings, and the import calls against a loopback server that speaks Milvus' REST import API (and a real server
when MILVUS_TEST_URI, MILVUS_TEST_BULK_URI and MILVUS_TEST_BULK_ENDPOINT are set). The sink's decisions against
fakes: tests/test_bulk_sink.py; the bulk bucket on an S3 server: tests/test_bulk_bucket.py."""

from __future__ import annotations

import os
from collections.abc import Iterator

import numpy as np
import pyarrow.parquet as pq
import pytest
from bulk_support import (  # tests/ is on sys.path under pytest
    DIM, DONE, TOKEN, ImportAPI, LiteAsServer, LocalFilesOps, chunk_batch, lite_as_server, server_cfg,
)

from chunker.config import MilvusConfig
from chunker.index.bulk import BulkImportError, ChunkSink, PymilvusBulkOps


@pytest.fixture()
def lite_store(tmp_path, monkeypatch) -> Iterator[LiteAsServer]:
    with lite_as_server(tmp_path, monkeypatch) as store:
        yield store


def test_bulk_writer_files_match_the_collection_schema(tmp_path):
    from chunker.index.store import ChunkStore

    cfg = MilvusConfig(uri=str(tmp_path / "m.db"))
    with ChunkStore(cfg, DIM) as store:
        ops = PymilvusBulkOps(store, cfg, str(tmp_path / "bulk"))
        chunks, vecs = chunk_batch(30)
        from chunker.index.collection import chunk_row

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
    endpoint = os.environ.get("MILVUS_TEST_BULK_ENDPOINT")  # http://<its MinIO>:9000
    if not uri or not bulk_uri or not endpoint:
        pytest.skip("set MILVUS_TEST_URI (http://host:19530), MILVUS_TEST_BULK_URI (s3://bucket/prefix), "
                    "MILVUS_TEST_BULK_ENDPOINT and the keys in MILVUS_BULK_ACCESS_KEY / MILVUS_BULK_SECRET_KEY")
    from chunker.index.store import ChunkStore

    cfg = MilvusConfig(uri=uri, collection=f"bulk_test_{os.getpid()}", bulk_threshold=10, bulk_poll_s=1,
                       bulk_uri=bulk_uri, bulk_endpoint=endpoint)
    with ChunkStore(cfg, DIM) as store:
        try:
            sink = ChunkSink(store, cfg, PymilvusBulkOps(store, cfg))
            for _ in range(2):  # twice: the second import must not duplicate
                sink.add(*chunk_batch(50))
                assert sink.commit() == "bulk"
                assert store.count() == 50
        finally:
            store.drop()


def test_bulk_target_must_be_the_servers_object_store(tmp_path, monkeypatch):
    from chunker.deploy_checks import bulk_target_problems
    from chunker.index.store import ChunkStore, StoreError

    # Config alone: unset, a local folder, no endpoint; each named by its field.
    probs = bulk_target_problems(MilvusConfig(uri="http://m:19530"))
    assert [p.split()[0] for p in probs] == ["milvus.bulk_uri", "milvus.bulk_endpoint"]
    probs = bulk_target_problems(MilvusConfig(uri="http://m:19530", bulk_uri="/data/bulk", bulk_endpoint="http://x:9"))
    assert len(probs) == 1 and probs[0].startswith("milvus.bulk_uri '/data/bulk' is not s3://")
    assert bulk_target_problems(MilvusConfig(uri="http://m:19530", load_mode="upsert")) == []
    assert bulk_target_problems(MilvusConfig(uri=str(tmp_path / "x.db"))) == []  # Lite: no import at all
    with pytest.raises(ValueError, match="milvus.bulk_endpoint"):
        MilvusConfig(bulk_endpoint="minio:9000")
    # Credentials come from the bulk variables, never from the corpus' AWS_* ones.
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "corpus-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "corpus-secret")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://corpus-store:9000")
    monkeypatch.delenv("MILVUS_BULK_ACCESS_KEY", raising=False)
    monkeypatch.delenv("MILVUS_BULK_SECRET_KEY", raising=False)
    cfg = server_cfg("http://127.0.0.1:1", bulk_region="eu-west-1")
    with ChunkStore(MilvusConfig(uri=str(tmp_path / "m.db")), DIM) as lite:
        store = LiteAsServer(lite)
        with pytest.raises(StoreError, match=r"\$MILVUS_BULK_ACCESS_KEY \(named by milvus.bulk_access_key_env\)"):
            ChunkSink(store, cfg, lambda: PymilvusBulkOps(store, cfg))  # built at once, not at the first import
        monkeypatch.setenv("MILVUS_BULK_ACCESS_KEY", "milvus-key")
        monkeypatch.setenv("MILVUS_BULK_SECRET_KEY", "milvus-secret")
        params = PymilvusBulkOps(store, cfg).s3_params()
    assert params == {"bucket_name": "milvus-bucket", "endpoint": "127.0.0.1:9", "access_key": "milvus-key",
                      "secret_key": "milvus-secret", "secure": False, "region": "eu-west-1"}


def test_import_polls_the_rest_api_to_completion(lite_store, tmp_path):
    api = ImportAPI({"chunks"}, DONE)
    try:
        cfg = server_cfg(api.url)
        ops = LocalFilesOps(lite_store, cfg, folder=str(tmp_path / "files"))
        sink = ChunkSink(lite_store, cfg, ops, sleep=lambda s: None)
        sink.add(*chunk_batch(25))
        assert sink.commit() == "bulk" and sink.stats.imported == 25 and sink.stats.import_jobs == 1
    finally:
        api.close()
    paths = [path for path, _, _ in api.requests]
    assert paths == ["/v2/vectordb/jobs/import/create"] + ["/v2/vectordb/jobs/import/describe"] * 4
    assert {auth for _, auth, _ in api.requests} == {f"Bearer {TOKEN}"}  # Milvus auth rides on every call
    create = api.requests[0][2]
    assert create["collectionName"] == "chunks"
    files = create["files"]
    assert len(files) == 1 and files[0][0].endswith(".parquet") and os.path.isfile(files[0][0])
    assert pq.read_table(files[0][0]).num_rows == 25
    assert not create.get("token") and not create.get("accessKey")  # no object-store credentials in the body
    job_id = next(iter(api.jobs))
    assert all(body["jobId"] == job_id for _, _, body in api.requests[1:])


def test_failed_job_and_refusals_raise_with_the_servers_reason(lite_store, tmp_path, caplog):
    api = ImportAPI({"chunks"}, [{"state": "Pending", "progress": 0},
                                 {"state": "Failed", "progress": 0, "reason": "the field 'dense' is missing"}])
    try:
        cfg = server_cfg(api.url)
        sink = ChunkSink(lite_store, cfg, LocalFilesOps(lite_store, cfg, folder=str(tmp_path / "a")),
                         sleep=lambda s: None)
        sink.add(*chunk_batch(12))
        # A failed job may hold one bad row: the documents are upserted one by one instead, the reason logged.
        assert sink.commit() == "upsert" and lite_store.count() == 12 and not sink.take_refused()
        assert "failed: the field 'dense' is missing" in caplog.text
        # A wrong token: the server's 401 is a refusal, raised at once.
        bad = ChunkSink(lite_store, cfg, LocalFilesOps(lite_store, cfg, token="root:wrong", folder=str(tmp_path / "b")),
                        sleep=lambda s: None)
        bad.add(*chunk_batch(12))
        with pytest.raises(BulkImportError, match="refused.*401"):
            bad.commit()
    finally:
        api.close()
    # A server that does not know the collection: its code and message come back.
    api = ImportAPI(set(), DONE)
    try:
        cfg = server_cfg(api.url)
        other = ChunkSink(lite_store, cfg, LocalFilesOps(lite_store, cfg, folder=str(tmp_path / "c")),
                          sleep=lambda s: None)
        other.add(*chunk_batch(12))
        with pytest.raises(BulkImportError, match=r"code: 100, message: collection not found\[collection=chunks\]"):
            other.commit()
    finally:
        api.close()


def test_a_failed_poll_is_retried_not_fatal(lite_store, tmp_path):
    api = ImportAPI({"chunks"}, DONE)
    api.hiccups = 2
    try:
        cfg = server_cfg(api.url)
        sink = ChunkSink(lite_store, cfg, LocalFilesOps(lite_store, cfg, folder=str(tmp_path / "f")),
                         sleep=lambda s: None)
        sink.add(*chunk_batch(15))
        assert sink.commit() == "bulk" and sink.stats.imported == 15
        api.hiccups = 10  # the server stays unreachable: the load gives up after a bounded number of polls
        sink.add(*chunk_batch(15, "d2"))
        with pytest.raises(BulkImportError, match="5 progress polls failed"):
            sink.commit()
    finally:
        api.close()
