"""The bulk bucket on a real S3 server (moto): the probe when the sink is built, files uploaded and imported, and
import files that lack rows (a failed upload, a flush that loses rows) caught before any delete; such a commit is
upserted instead."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from bulk_support import (  # tests/ is on sys.path under pytest
    DONE, ImportAPI, LiteAsServer, LocalFilesOps, chunk_batch, import_rows, lite_as_server, server_cfg,
)

from chunker.config import MilvusConfig
from chunker.index.bulk import BulkWriteError, ChunkSink, PymilvusBulkOps


@pytest.fixture()
def lite_store(tmp_path, monkeypatch) -> Iterator[LiteAsServer]:
    with lite_as_server(tmp_path, monkeypatch) as store:
        yield store


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
        sink.add(*chunk_batch(25))
        assert sink.commit() == "bulk" and sink.stats.imported == 25
    finally:
        api.close()
    files = api.requests[0][2]["files"]
    assert [f for group in files for f in group] == [k for k in _keys(server, bucket) if k.endswith(".parquet")]


def test_a_failed_upload_loads_the_commit_by_upserts_instead(s3, lite_store, caplog):
    """Nothing was deleted yet when the files turn out incomplete, so the commit's rows go in by upserts (idempotent
    by chunk_id) and the run goes on; it used to stop the whole run (BulkWriteError was a setup error)."""
    server, bucket = s3
    lite_store.upsert(*chunk_batch(12))  # a re-run: the batch's IDs are in the collection already
    api = ImportAPI({"chunks"}, DONE)
    try:
        cfg = _moto_cfg(api.url, server, bucket)
        sink = ChunkSink(lite_store, cfg, lambda: PymilvusBulkOps(lite_store, cfg), sleep=lambda s: None)
        server.client().delete_bucket(Bucket=bucket)  # gone after the probe: every upload fails
        c, v = chunk_batch(12)
        sink.add(c, v + 1.0)  # new vectors for the same IDs: the upserts must replace the old rows
        assert sink.commit() == "upsert"
    finally:
        api.close()
    assert api.requests == [], "no import was started"
    assert sink.stats.write_fallbacks == 1 and sink.stats.upserted == 12 and not sink.take_refused()
    assert lite_store.count() == 12, "every row there once, none lost, none doubled"
    assert "put 0 of 12 rows" in caplog.text and "doesn't exist" in caplog.text, "the cause is logged"
    assert "loaded by upserts instead" in caplog.text


# pymilvus raises the failed flush in its own thread (that is the defect the check exists for): pytest sees it.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_flush_that_loses_rows_fails_the_commit_before_any_delete(lite_store, tmp_path, monkeypatch):
    from pymilvus.bulk_writer import buffer

    cfg = server_cfg("http://127.0.0.1:1")
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
        ops.write_files(import_rows(30))
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

