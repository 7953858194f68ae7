"""What the bulk-load tests share: chunks with vectors, a Lite store that the real PymilvusBulkOps takes for a
server, a loopback server that speaks Milvus' REST import API, and PymilvusBulkOps with its files in a folder.

Imported by tests/test_bulk*.py (tests/ is on sys.path under pytest).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from chunker.config import MilvusConfig
from chunker.index.bulk import PymilvusBulkOps
from chunker.types import Chunk

DIM = 8
TOKEN = "root:Milvus"
DONE = [{"state": "Pending", "progress": 0}, {"state": "Importing", "progress": 40},
        {"state": "Importing", "progress": 80}, {"state": "Completed", "progress": 100, "importedRows": 25,
                                                   "totalRows": 25, "completeTime": "2026-11-30T10:00:00Z"}]


def chunk_batch(n: int, doc: str = "d1") -> tuple[list[Chunk], np.ndarray]:
    chunks = [Chunk(chunk_id=f"{doc}-c{i}", doc_id=doc, element_ids=[f"{doc}:{i}"], text=f"text {i}",
                    breadcrumb="A > B", page_start=1, page_end=1, modality="text", planner="deterministic",
                    config_hash="h", source=f"{doc}.pdf", source_uri=f"/x/{doc}.pdf") for i in range(n)]
    return chunks, np.random.default_rng(0).random((n, DIM), dtype=np.float32)


def import_rows(n: int) -> list[dict[str, Any]]:
    from chunker.index.collection import chunk_row

    chunks, vecs = chunk_batch(n)
    return [chunk_row(c, v) for c, v in zip(chunks, vecs)]


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


def server_cfg(url: str, **kw: Any) -> MilvusConfig:
    return MilvusConfig(uri=url, bulk_uri="s3://milvus-bucket/bulk", bulk_endpoint="http://127.0.0.1:9",
                        bulk_threshold=10, bulk_poll_s=0.01, **kw)


class ImportAPI:
    """Milvus' REST v2 import endpoints as documented (POST /v2/vectordb/jobs/import/create, .../describe, .../list):
    HTTP 401 with code 1800 without the right bearer token, {"code": 0, "data": ...} otherwise, a non-zero code
    for an unknown collection. Each job walks through a scripted list of describe answers, whose ``details`` name
    its files (one entry per file group, ``fileName`` the group's files joined by commas). ``answer_delay_s`` holds
    a create's answer back that long after the job is made (with ``create_on_timeout=False`` it makes no job and drops
    the connection without answering)."""

    def __init__(self, collections: set[str], script: list[dict[str, Any]]) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        import threading

        self.collections = collections
        self.script = script
        self.requests: list[tuple[str, str, dict[str, Any]]] = []
        self.jobs: dict[str, int] = {}
        self.files: dict[str, list[list[str]]] = {}
        self.answer_delay_s = 0.0
        self.create_on_timeout = True
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
                if self.path.endswith("/create") and api.answer_delay_s:
                    if not api.create_on_timeout:
                        self.close_connection = True  # dropped without an answer, and without a job
                        return
                    time.sleep(api.answer_delay_s)  # the client has given up by now
                data = json.dumps(answer).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # a late answer whose client has gone, as the test meant

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
            if self.answer_delay_s and not self.create_on_timeout:
                return 200, {"code": 0, "data": {"jobId": job_id}}  # never made, never answered (see do_POST)
            self.jobs[job_id] = 0
            self.files[job_id] = body.get("files") or []
            return 200, {"code": 0, "data": {"jobId": job_id}}
        if path == "/v2/vectordb/jobs/import/list":
            records = [{"collectionName": body.get("collectionName"), "jobId": j, "progress": 0,
                        "state": self.script[min(n, len(self.script) - 1)]["state"]} for j, n in self.jobs.items()]
            return 200, {"code": 0, "data": {"records": records}}
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
            details = [{"fileName": ",".join(group), "fileSize": 1024, "state": step["state"]}
                       for group in self.files.get(job_id, [])]
            return 200, {"code": 0, "data": {"collectionName": "chunks", "jobId": job_id, "completeTime": "",
                                             "importedRows": 0, "totalRows": 0, "fileSize": 1024, "details": details,
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


@contextmanager
def lite_as_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LiteAsServer]:
    """A Milvus Lite store in ``tmp_path`` as a server, with the bulk keys and the Milvus token set."""
    from chunker.index.store import ChunkStore

    monkeypatch.setenv("MILVUS_BULK_ACCESS_KEY", "k")
    monkeypatch.setenv("MILVUS_BULK_SECRET_KEY", "s")
    monkeypatch.setenv("MILVUS_TOKEN", TOKEN)
    with ChunkStore(MilvusConfig(uri=str(tmp_path / "m.db")), DIM) as store:
        yield LiteAsServer(store)
