"""The bulk-load path: files validated against the collection schema, the sink's decisions, and the real import
calls against a loopback server that speaks Milvus' REST import API."""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from chunker.index.bulk import (BulkImportError, BulkWriteError, ChunkSink, ImportRefused, PymilvusBulkOps,
                                 StoreRefusedAll)
from chunker.config import MilvusConfig
from chunker.types import Chunk

DIM = 8


def _chunks(n: int, doc: str = "d1") -> tuple[list[Chunk], np.ndarray]:
    chunks = [Chunk(chunk_id=f"{doc}-c{i}", doc_id=doc, element_ids=[f"{doc}:{i}"], text=f"text {i}",
                    breadcrumb="A > B", page_start=1, page_end=1, modality="text", planner="deterministic",
                    config_hash="h", source=f"{doc}.pdf", source_uri=f"/x/{doc}.pdf") for i in range(n)]
    return chunks, np.random.default_rng(0).random((n, DIM), dtype=np.float32)


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


def test_lite_always_upserts_and_a_failed_import_is_written_document_by_document(caplog):
    cfg = MilvusConfig(bulk_threshold=1)
    store = FakeStore(lite=True)
    sink = ChunkSink(store, cfg, RecordingOps())
    sink.add(*_chunks(5))
    assert sink.commit() == "upsert"
    # A failed import job (its rows may hold one the server refuses): each document is written alone instead, and
    # the server's reason is logged.
    other = FakeStore()
    failing = ChunkSink(other, MilvusConfig(uri="http://m:19530", bulk_threshold=1), RecordingOps(fail=True),
                        sleep=lambda s: None)
    for doc in ("d1", "d2"):
        failing.add(*_chunks(3, doc))
    assert failing.commit() == "upsert" and other.upserts == [3, 3] and failing.take_refused() == {}
    assert "bad file" in caplog.text


def test_bulk_writer_files_match_the_collection_schema(tmp_path):
    from chunker.index.store import ChunkStore

    cfg = MilvusConfig(uri=str(tmp_path / "m.db"))
    with ChunkStore(cfg, DIM) as store:
        ops = PymilvusBulkOps(store, cfg, str(tmp_path / "bulk"))
        chunks, vecs = _chunks(30)
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
                sink.add(*_chunks(50))
                assert sink.commit() == "bulk"
                assert store.count() == 50
        finally:
            store.drop()


# ------------------------------------------------------------------ sink decisions (fresh load, load mode)

def test_fresh_load_deletes_only_ids_this_run_already_wrote():
    cfg = MilvusConfig(uri="http://milvus:19530", bulk_threshold=10, bulk_poll_s=0.01, fresh_load=True)
    store, ops = FakeStore(rows=0), RecordingOps()
    sink = ChunkSink(store, cfg, ops, sleep=lambda s: None)
    sink.add(*_chunks(20, "a"))
    assert sink.commit() == "bulk" and sink.fresh is True
    assert ops.deleted == []  # an empty collection: nothing of doc "a" can exist yet
    # Doc "a" again (a duplicate file in the corpus) and a new doc "b": only "a"'s IDs can exist now.
    ca, va = _chunks(12, "a")
    cb, vb = _chunks(12, "b")
    sink.add(ca + cb, np.concatenate([va, vb]))
    assert sink.commit() == "bulk"
    assert sorted(ops.deleted) == sorted(c.chunk_id for c in ca)
    assert store.counts == 1  # emptiness is checked once, at the first commit


def test_fresh_load_on_a_collection_with_rows_keeps_deleting():
    cfg = MilvusConfig(uri="http://milvus:19530", bulk_threshold=10, bulk_poll_s=0.01, fresh_load=True)
    ops = RecordingOps()
    sink = ChunkSink(FakeStore(rows=7), cfg, ops, sleep=lambda s: None)  # a resumed run: rows already there
    sink.add(*_chunks(20))
    assert sink.commit() == "bulk" and sink.fresh is False
    assert len(ops.deleted) == 20


def test_load_mode_upsert_never_imports():
    cfg = MilvusConfig(uri="http://milvus:19530", bulk_threshold=1, load_mode="upsert")
    store, ops = FakeStore(), RecordingOps()
    sink = ChunkSink(store, cfg, ops)
    sink.add(*_chunks(30))
    assert sink.commit() == "upsert" and store.upserts == [30] and ops.calls == []


class LiteAsServer:
    """A Milvus Lite store presented as a server, so the real PymilvusBulkOps runs its server path: schema and
    deletes go to Lite, the import calls go to the loopback REST server."""

    lite = False

    def __init__(self, store: Any) -> None:
        self.inner = store
        self.collection = store.collection
        self.client = store.client

    def upsert(self, chunks: list[Chunk], vectors: np.ndarray) -> int:
        return self.inner.upsert(chunks, vectors)

    def count(self) -> int:
        return self.inner.count()


def _server_cfg(url: str, **kw: Any) -> MilvusConfig:
    return MilvusConfig(uri=url, bulk_uri="s3://milvus-bucket/bulk", bulk_endpoint="http://127.0.0.1:9",
                        bulk_threshold=10, bulk_poll_s=0.01, **kw)


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
    cfg = _server_cfg("http://127.0.0.1:1", bulk_region="eu-west-1")
    with ChunkStore(MilvusConfig(uri=str(tmp_path / "m.db")), DIM) as lite:
        store = LiteAsServer(lite)
        with pytest.raises(StoreError, match=r"\$MILVUS_BULK_ACCESS_KEY \(named by milvus.bulk_access_key_env\)"):
            ChunkSink(store, cfg, lambda: PymilvusBulkOps(store, cfg))  # built at once, not at the first import
        monkeypatch.setenv("MILVUS_BULK_ACCESS_KEY", "milvus-key")
        monkeypatch.setenv("MILVUS_BULK_SECRET_KEY", "milvus-secret")
        params = PymilvusBulkOps(store, cfg).s3_params()
    assert params == {"bucket_name": "milvus-bucket", "endpoint": "127.0.0.1:9", "access_key": "milvus-key",
                      "secret_key": "milvus-secret", "secure": False, "region": "eu-west-1"}


# ------------------------------------------------------ the import REST API, spoken by a loopback server

TOKEN = "root:Milvus"


class ImportAPI:
    """Milvus' REST v2 import endpoints as documented (POST /v2/vectordb/jobs/import/create, .../describe):
    HTTP 401 with code 1800 without the right bearer token, {"code": 0, "data": ...} otherwise, a non-zero code
    for an unknown collection. Each job walks through a scripted list of describe answers."""

    def __init__(self, collections: set[str], script: list[dict[str, Any]]) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        import threading

        self.collections = collections
        self.script = script
        self.requests: list[tuple[str, str, dict[str, Any]]] = []
        self.jobs: dict[str, int] = {}
        self.hiccups = 0  # describe calls answered with HTTP 503 before the real answer
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                body = json.loads(raw or b"{}")
                api.requests.append((self.path, self.headers.get("Authorization", ""), body))
                status, answer = api.answer(self.path, self.headers.get("Authorization", ""), body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def answer(self, path: str, auth: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if auth != f"Bearer {TOKEN}":
            return 401, {"code": 1800, "message": "user hasn't authenticated"}
        if path == "/v2/vectordb/jobs/import/create":
            if body.get("collectionName") not in self.collections:
                return 200, {"code": 100, "message": f"collection not found[collection={body.get('collectionName')}]"}
            job_id = str(448707763884413158 + len(self.jobs))
            self.jobs[job_id] = 0
            return 200, {"code": 0, "data": {"jobId": job_id}}
        if path == "/v2/vectordb/jobs/import/describe":
            if self.hiccups:
                self.hiccups -= 1
                return 503, {"code": 503, "message": "proxy not healthy"}
            job_id = str(body.get("jobId"))
            if job_id not in self.jobs:
                return 200, {"code": 0, "data": {"jobId": job_id, "state": "Failed", "progress": 0,
                                                 "reason": f"import job does not exist, jobID={job_id}"}}
            step = self.script[min(self.jobs[job_id], len(self.script) - 1)]
            self.jobs[job_id] += 1
            return 200, {"code": 0, "data": {"collectionName": "chunks", "jobId": job_id, "completeTime": "",
                                             "importedRows": 0, "totalRows": 0, "fileSize": 1024, "details": [],
                                             "reason": "", **step}}
        return 404, {"code": 404, "message": f"no route {path}"}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class LocalFilesOps(PymilvusBulkOps):
    """The real class with its files written by LocalBulkWriter (no S3 here); everything else unchanged."""

    def __init__(self, *args: Any, folder: str, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.folder = folder

    def _writer(self) -> Any:
        from pymilvus.bulk_writer import BulkFileType, LocalBulkWriter

        return LocalBulkWriter(self.schema, local_path=self.folder, file_type=BulkFileType.PARQUET)

    def probe(self) -> None:
        return None  # its files are written here: no bucket to probe


@pytest.fixture()
def lite_store(tmp_path, monkeypatch):
    from chunker.index.store import ChunkStore

    monkeypatch.setenv("MILVUS_BULK_ACCESS_KEY", "k")
    monkeypatch.setenv("MILVUS_BULK_SECRET_KEY", "s")
    monkeypatch.setenv("MILVUS_TOKEN", TOKEN)
    with ChunkStore(MilvusConfig(uri=str(tmp_path / "m.db")), DIM) as store:
        yield LiteAsServer(store)


DONE = [{"state": "Pending", "progress": 0}, {"state": "Importing", "progress": 40},
        {"state": "Importing", "progress": 80}, {"state": "Completed", "progress": 100, "importedRows": 25,
                                                   "totalRows": 25, "completeTime": "2026-11-30T10:00:00Z"}]


def test_import_polls_the_rest_api_to_completion(lite_store, tmp_path):
    api = ImportAPI({"chunks"}, DONE)
    try:
        cfg = _server_cfg(api.url)
        ops = LocalFilesOps(lite_store, cfg, folder=str(tmp_path / "files"))
        sink = ChunkSink(lite_store, cfg, ops, sleep=lambda s: None)
        sink.add(*_chunks(25))
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
        cfg = _server_cfg(api.url)
        sink = ChunkSink(lite_store, cfg, LocalFilesOps(lite_store, cfg, folder=str(tmp_path / "a")),
                         sleep=lambda s: None)
        sink.add(*_chunks(12))
        # A failed job may hold one bad row: the documents are upserted one by one instead, the reason logged.
        assert sink.commit() == "upsert" and lite_store.count() == 12 and not sink.take_refused()
        assert "failed: the field 'dense' is missing" in caplog.text
        # A wrong token: the server's 401 is a refusal, raised at once.
        bad = ChunkSink(lite_store, cfg, LocalFilesOps(lite_store, cfg, token="root:wrong", folder=str(tmp_path / "b")),
                        sleep=lambda s: None)
        bad.add(*_chunks(12))
        with pytest.raises(BulkImportError, match="refused.*401"):
            bad.commit()
    finally:
        api.close()
    # A server that does not know the collection: its code and message come back.
    api = ImportAPI(set(), DONE)
    try:
        cfg = _server_cfg(api.url)
        other = ChunkSink(lite_store, cfg, LocalFilesOps(lite_store, cfg, folder=str(tmp_path / "c")),
                          sleep=lambda s: None)
        other.add(*_chunks(12))
        with pytest.raises(BulkImportError, match=r"code: 100, message: collection not found\[collection=chunks\]"):
            other.commit()
    finally:
        api.close()


def test_a_failed_poll_is_retried_not_fatal(lite_store, tmp_path):
    api = ImportAPI({"chunks"}, DONE)
    api.hiccups = 2
    try:
        cfg = _server_cfg(api.url)
        sink = ChunkSink(lite_store, cfg, LocalFilesOps(lite_store, cfg, folder=str(tmp_path / "f")),
                         sleep=lambda s: None)
        sink.add(*_chunks(15))
        assert sink.commit() == "bulk" and sink.stats.imported == 15
        api.hiccups = 10  # the server stays unreachable: the load gives up after a bounded number of polls
        sink.add(*_chunks(15, "d2"))
        with pytest.raises(BulkImportError, match="5 progress polls failed"):
            sink.commit()
    finally:
        api.close()


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
        sink.add(*_chunks(2, doc))
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
    down.add(*_chunks(2, "a"))
    with pytest.raises(StoreUnavailable, match="unreachable"):
        down.commit()
    everything = ChunkSink(RefusingStore({"a", "b"}), MilvusConfig(uri="http://m:19530"))
    for doc in ("a", "b"):
        everything.add(*_chunks(2, doc))
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
        sink.add(*_chunks(2, doc))
    sink.commit()
    assert store.upserts == [2] and list(sink.take_refused()) == [("bad", "/x/bad.pdf")]


# ------------------------------------------------ the bulk bucket on a real S3 server (moto): probe, upload, counts


def _moto_cfg(url: str, server: Any, bucket: str) -> MilvusConfig:
    return MilvusConfig(uri=url, bulk_uri=f"s3://{bucket}/bulk", bulk_endpoint=server.endpoint,
                        bulk_region="us-east-1", bulk_threshold=10, bulk_poll_s=0.01)


def _keys(server: Any, bucket: str) -> list[str]:
    return sorted(o["Key"] for o in server.client().list_objects_v2(Bucket=bucket).get("Contents", []))


def test_the_bulk_bucket_and_its_keys_are_probed_when_the_sink_is_built(s3, lite_store, monkeypatch):
    from chunker.errors import SetupError
    from chunker.index.store import StoreError

    server, bucket = s3
    cfg = _moto_cfg("http://127.0.0.1:1", server, bucket)
    ChunkSink(lite_store, cfg, lambda: PymilvusBulkOps(lite_store, cfg))
    probes = [r for r in server.ops(bucket) if r.op in ("PutObject", "DeleteObject")]
    assert [r.op for r in probes] == ["PutObject", "DeleteObject"] and probes[0].key.startswith("bulk/.chunker-probe-")
    assert _keys(server, bucket) == [], "the probe leaves nothing behind"
    # A bucket that is not there: one line when the sink is built, before any document is converted.
    missing = _moto_cfg("http://127.0.0.1:1", server, "no-such-bulk-bucket")
    with pytest.raises(StoreError, match="bulk bucket 'no-such-bulk-bucket' at .* does not exist") as err:
        ChunkSink(lite_store, missing, lambda: PymilvusBulkOps(lite_store, missing))
    assert isinstance(err.value, SetupError) and "\n" not in str(err.value)
    # An endpoint that does not answer: the same, within seconds.
    dead = cfg.model_copy(update={"bulk_endpoint": "http://127.0.0.1:9"})
    with pytest.raises(StoreError, match="cannot be written with \\$MILVUS_BULK_ACCESS_KEY"):
        ChunkSink(lite_store, dead, lambda: PymilvusBulkOps(lite_store, dead))


def test_files_uploaded_to_the_bulk_bucket_are_imported(s3, lite_store):
    server, bucket = s3
    api = ImportAPI({"chunks"}, DONE)
    try:
        cfg = _moto_cfg(api.url, server, bucket)
        sink = ChunkSink(lite_store, cfg, lambda: PymilvusBulkOps(lite_store, cfg), sleep=lambda s: None)
        sink.add(*_chunks(25))
        assert sink.commit() == "bulk" and sink.stats.imported == 25
    finally:
        api.close()
    files = api.requests[0][2]["files"]
    assert [f for group in files for f in group] == [k for k in _keys(server, bucket) if k.endswith(".parquet")]


def test_a_failed_upload_fails_the_commit_with_its_cause_before_anything_is_deleted(s3, lite_store):
    server, bucket = s3
    lite_store.upsert(*_chunks(12))  # a re-run: the batch's IDs are in the collection already
    api = ImportAPI({"chunks"}, DONE)
    try:
        cfg = _moto_cfg(api.url, server, bucket)
        sink = ChunkSink(lite_store, cfg, lambda: PymilvusBulkOps(lite_store, cfg), sleep=lambda s: None)
        server.client().delete_bucket(Bucket=bucket)  # gone after the probe: every upload fails
        sink.add(*_chunks(12))
        with pytest.raises(BulkWriteError) as err:
            sink.commit()
    finally:
        api.close()
    msg = str(err.value)
    assert "put 0 of 12 rows" in msg and "nothing was deleted or imported" in msg and "doesn't exist" in msg, msg
    assert lite_store.count() == 12, "no ID was deleted for rows that were never written"
    assert api.requests == [], "no import was started"


# pymilvus raises the failed flush in its own thread (that is the defect the check exists for): pytest sees it.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_flush_that_loses_rows_fails_the_commit_before_any_delete(lite_store, tmp_path, monkeypatch):
    from pymilvus.bulk_writer import buffer

    cfg = _server_cfg("http://127.0.0.1:1")
    ops = RecordingDeletes(lite_store, cfg, folder=str(tmp_path / "files"))
    real = buffer.Buffer.persist
    calls = []

    def flaky(self, local_path, **kw):  # noqa: ANN001, ANN202
        calls.append(local_path)
        if len(calls) == 2:
            raise OSError("disk full (test)")
        return real(self, local_path, **kw)

    monkeypatch.setattr(buffer.Buffer, "persist", flaky)
    with pytest.raises(BulkWriteError, match="of 30 rows.*disk full \\(test\\)"):
        ops.write_files(_rows(30))
    assert len(calls) >= 2 and ops.deleted == []


class RecordingDeletes(LocalFilesOps):
    """Flushes a small chunk at a time (several files per load), and records deletes."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.deleted: list[str] = []

    def _writer(self) -> Any:
        from pymilvus.bulk_writer import BulkFileType, LocalBulkWriter

        return LocalBulkWriter(self.schema, local_path=self.folder, file_type=BulkFileType.PARQUET, chunk_size=2048)

    def delete_ids(self, ids: list[str]) -> None:
        self.deleted.extend(ids)


def _rows(n: int) -> list[dict[str, Any]]:
    from chunker.index.collection import chunk_row

    chunks, vecs = _chunks(n)
    return [chunk_row(c, v) for c, v in zip(chunks, vecs)]
