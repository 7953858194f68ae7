"""Listing, intake, the run store, the ledger and the bulk writer's files against a real S3 protocol server (moto on
loopback, tests/s3_server.py), through the same pyarrow and pymilvus code paths a run on S3 or MinIO takes.

Every test gets a fresh bucket and the standard AWS variables (``AWS_ENDPOINT_URL`` and keys), nothing else: what
works here works with ``AWS_ENDPOINT_URL=http://minio:9000`` too.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from chunker.config import IntakeConfig, MilvusConfig
from chunker.intake import sources
from chunker.intake.inputs import InputError, InputFile, iter_inputs
from chunker.intake.prepare import prepare
from chunker.run.layout import CHUNKS, LISTING, RunStore
from chunker.run.ledger import Ledger
from chunker.types import Chunk, Status

# A rename on S3 is a copy plus a delete; none of the run's writes may do one.
RENAME_OPS = {"CopyObject", "UploadPartCopy", "DeleteObject", "DeleteObjects"}
UPLOAD_OPS = {"PutObject", "CreateMultipartUpload", "UploadPart", "CompleteMultipartUpload"}


def _put(client: Any, bucket: str, key: str, body: bytes) -> None:
    client.put_object(Bucket=bucket, Key=key, Body=body)


def _keys(client: Any, bucket: str, prefix: str = "") -> list[str]:
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return sorted(o["Key"] for page in pages for o in page.get("Contents", []))


# ------------------------------------------------------------------------------------------------ listing

CORPUS = {
    "corpus/a.pdf": b"%PDF-a",
    "corpus/B.PDF": b"%PDF-B",  # upper-case suffix: the patterns match case-insensitively
    "corpus/notes.txt": b"not an input",
    "corpus/sub/deeper/c.pdf": b"%PDF-c",  # nested keys, no folder marker objects anywhere
    "corpus/sub/x y \u00e9.pdf": b"%PDF-space-accent",
    "corpus/100%.pdf": b"%PDF-percent",
    "corpus/h#1.pdf": b"%PDF-hash",
    "corpus/empty/": b"",  # a folder marker a console made: a folder, never an input
    "corpus-other/z.pdf": b"%PDF-sibling",  # shares the string prefix "corpus": must not be listed
}
EXPECTED_SOURCES = ["100%.pdf", "B.PDF", "a.pdf", "h#1.pdf", "sub/deeper/c.pdf", "sub/x y \u00e9.pdf"]


def test_listing_a_prefix_finds_every_input_and_each_uri_opens(s3, tmp_path):
    server, bucket = s3
    client = server.client()
    for key, body in CORPUS.items():
        _put(client, bucket, key, body)
    server.clear()
    for root in (f"s3://{bucket}/corpus/", f"s3://{bucket}/corpus"):
        files = list(iter_inputs(root, IntakeConfig()))
        assert sorted(f.source for f in files) == sorted(EXPECTED_SOURCES), root
        for f in files:
            # The URI a worker gets opens the very object it names, whatever characters its key has.
            digest, size = sources.fetch(f.path, tmp_path / "x")
            assert (tmp_path / "x").read_bytes() == CORPUS[f"corpus/{f.source}"], f.path
    # Listing is only ever List and Head requests: nothing is written or moved while walking a corpus.
    assert {r.op for r in server.requests} <= {"ListObjectsV2", "HeadObject", "HeadBucket", "GetObject"}

    # A single object typed as stored (space, accent) is an input of its own; a glob crosses folders.
    one = list(iter_inputs(f"s3://{bucket}/corpus/sub/x y \u00e9.pdf", IntakeConfig()))
    assert [f.source for f in one] == ["x y \u00e9.pdf"]
    sources.fetch(one[0].path, tmp_path / "y")
    assert (tmp_path / "y").read_bytes() == b"%PDF-space-accent"
    globbed = sorted(f.source for f in iter_inputs(f"s3://{bucket}/corpus/**/*.pdf", IntakeConfig()))
    assert globbed == ["100%.pdf", "a.pdf", "h#1.pdf", "sub/deeper/c.pdf", "sub/x y \u00e9.pdf"]

    with pytest.raises(InputError, match="not a file, directory, glob or manifest"):
        list(iter_inputs(f"s3://{bucket}/no-such-prefix/", IntakeConfig()))


def test_a_manifest_on_s3_names_relative_and_absolute_keys(s3, tmp_path):
    server, bucket = s3
    client = server.client()
    _put(client, bucket, "docs/a b.pdf", b"%PDF-1")
    _put(client, bucket, "elsewhere/c.pdf", b"%PDF-2")
    _put(client, bucket, "docs/list.txt", f"a b.pdf\ns3://{bucket}/elsewhere/c.pdf\n".encode())
    files = list(iter_inputs(f"s3://{bucket}/docs/list.txt", IntakeConfig()))
    assert [f.source for f in files] == ["a b.pdf", f"s3://{bucket}/elsewhere/c.pdf"]
    bodies = []
    for f in files:
        sources.fetch(f.path, tmp_path / "x")
        bodies.append((tmp_path / "x").read_bytes())
    assert bodies == [b"%PDF-1", b"%PDF-2"]


# ------------------------------------------------------------------------------------------------ intake

def test_intake_from_s3_gives_the_local_files_doc_id(s3, samples_dir, tmp_path):
    server, bucket = s3
    pdf = sorted(samples_dir.glob("*.pdf"))[0]
    key = f"corpus/with space/{pdf.name}"
    _put(server.client(), bucket, key, pdf.read_bytes())
    remote, local_pdf = prepare(InputFile(path=f"s3://{bucket}/{key}", source=pdf.name), IntakeConfig(),
                                tmp_path)
    local, _ = prepare(InputFile(path=str(pdf), source=pdf.name), IntakeConfig(), tmp_path)
    assert remote.status == Status.OK and not remote.problems
    assert (remote.doc_id, remote.num_pages, remote.size_bytes) == (local.doc_id, local.num_pages, local.size_bytes)
    assert Path(local_pdf).read_bytes() == pdf.read_bytes()  # fetched whole into the worker's folder

    # The ledger is asked right after hashing, before anything else is done with the file.
    asked: list[str] = []
    skipped, _ = prepare(InputFile(path=f"s3://{bucket}/{key}", source=pdf.name), IntakeConfig(), tmp_path,
                         skip=lambda d: asked.append(d) or True)
    assert asked == [local.doc_id] and skipped.status == Status.SKIPPED

    missing, path = prepare(InputFile(path=f"s3://{bucket}/corpus/gone.pdf", source="gone.pdf"), IntakeConfig(),
                            tmp_path)
    assert (missing.status, missing.problems[0].code, path) == (Status.FAILED, "missing", "")


# ------------------------------------------------------------------------------------------------ run store

def test_run_parts_go_straight_to_their_final_keys(s3):
    server, bucket = s3
    client = server.client()
    store = RunStore(f"s3://{bucket}/runs/r1")
    small = pa.table({"chunk_id": ["d-0", "d-1"], "text": ["one", "two"]})
    # Random bytes do not compress: a part written in many pages past pyarrow's upload part size (10 MB) goes up
    # as a multipart upload.
    rng = np.random.default_rng(0)
    big = pa.table({"blob": [rng.bytes(1000) for _ in range(12_000)]})
    store.write_segment(CHUNKS, "d", 0, small)
    store.write_segment(CHUNKS, "d", 1, big)
    store.write_json("summary.json", {"documents": 1})
    store.write_text("planning_report.txt", "ok\n")
    local = Path(pq.__file__).parent  # any small local file to upload
    sources.upload(next(local.glob("*.py")), store.normalized_uri("d"))

    ops = server.ops(bucket)
    assert {r.op for r in ops} <= UPLOAD_OPS and not {r.op for r in ops} & RENAME_OPS, ops
    written = ["normalized/d.pdf", "planning_report.txt", "summary.json", "chunks/d-00000.parquet",
               "chunks/d-00001.parquet"]
    assert {r.key for r in ops} == {f"runs/r1/{k}" for k in written}  # no .tmp key, no folder markers
    # A small part is one request; a big one is one multipart upload.
    small_ops = [r.op for r in ops if r.key.endswith("d-00000.parquet")]
    big_ops = [r.op for r in ops if r.key.endswith("d-00001.parquet")]
    assert small_ops == ["PutObject"]
    assert big_ops[0] == "CreateMultipartUpload" and big_ops[-1] == "CompleteMultipartUpload"
    assert big_ops.count("UploadPart") >= 2
    assert _keys(client, bucket) == sorted(f"runs/r1/{k}" for k in written)

    # What was written reads back whole, also through a fresh store (another process or node).
    again = RunStore(f"s3://{bucket}/runs/r1")
    assert [Path(p).name for p in again.parts(CHUNKS)] == ["d-00000.parquet", "d-00001.parquet"]
    assert pq.read_table(again.parts(CHUNKS)[0], filesystem=again.fs).equals(small)
    assert again.read_json("summary.json") == {"documents": 1}

    # clear() empties a folder of the run (the listing is per run) and nothing else. (pyarrow leaves a folder
    # marker "listing/" behind, one object per clear: harmless, parts are found by their suffix.)
    store.write_bytes(f"{LISTING}/part-00000.jsonl", b"{}\n")
    store.clear(LISTING)
    assert not [k for k in _keys(client, bucket) if "/listing/" in k and not k.endswith("/")]
    assert sorted(k for k in _keys(client, bucket) if not k.endswith("/")) == sorted(f"runs/r1/{k}" for k in written)


def test_run_folder_with_spaces_in_its_name(s3):
    server, bucket = s3
    store = RunStore(f"s3://{bucket}/my runs/r 1")
    store.write_json("summary.json", {"ok": True})
    store.write_bytes(f"{LISTING}/part-00000.jsonl", b"{}\n")
    uri = store.uri_of(LISTING, "part-00000.jsonl")
    assert " " not in uri  # percent-encoded: another process can hand it to pyarrow or Ray as it is
    fs, path = sources.open_fs(uri)
    assert fs.open_input_stream(path).read() == b"{}\n"
    assert _keys(server.client(), bucket) == ["my runs/r 1/listing/part-00000.jsonl", "my runs/r 1/summary.json"]


# ------------------------------------------------------------------------------------------------ ledger

def test_ledger_entries_live_on_s3(s3):
    server, bucket = s3
    client = server.client()
    ledger = Ledger(f"s3://{bucket}/runs/r1", "cfg1", "milvus#chunks")
    # Nothing under the prefix at all (a first run): "not done", never an error.
    assert not ledger.is_done("doc-a") and ledger.entry("doc-a") is None and ledger.count() == 0
    ledger.mark_done("doc-a", status="ok", chunks=3, source="a.pdf")
    assert ledger.is_done("doc-a") and not ledger.is_done("doc-b")
    assert ledger.entry("doc-a")["chunks"] == 3
    assert _keys(client, bucket) == ["runs/r1/ledger/cfg1/doc-a.json"]
    writes = [r for r in server.ops(bucket) if r.op not in {"GetObject", "HeadObject", "ListObjectsV2"}]
    assert [(r.op, r.key) for r in writes] == [("PutObject", "runs/r1/ledger/cfg1/doc-a.json")]

    # Another process (a worker) sees the same entries; another target or config does not count them.
    assert Ledger(f"s3://{bucket}/runs/r1", "cfg1", "milvus#chunks").is_done("doc-a")
    assert not Ledger(f"s3://{bucket}/runs/r1", "cfg1", "other#chunks").is_done("doc-a")
    assert not Ledger(f"s3://{bucket}/runs/r1", "cfg2", "milvus#chunks").is_done("doc-a")
    # A damaged entry (a hand edit, a foreign tool) means "do it again", not a crash.
    _put(client, bucket, "runs/r1/ledger/cfg1/doc-c.json", b"{not json")
    assert not ledger.is_done("doc-c") and ledger.count() == 2


# ------------------------------------------------------------------------------------------------ bulk writer

class LiteAsServer:
    """Milvus Lite presented as a server, so the real PymilvusBulkOps takes its server path (RemoteBulkWriter into
    the bucket); only the collection's schema is read from it."""

    lite = False

    def __init__(self, store: Any) -> None:
        self.collection = store.collection
        self.client = store.client


def test_bulk_writer_parquet_files_land_in_the_bulk_bucket(s3, tmp_path, monkeypatch):
    import tempfile

    from chunker.index.bulk import PymilvusBulkOps
    from chunker.index.collection import chunk_row
    from chunker.index.store import ChunkStore

    server, bucket = s3
    staging = tmp_path / "tmp"
    staging.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(staging))  # where the writer stages its files before upload
    # The bulk bucket has its own keys and endpoint; the corpus' AWS_* settings point elsewhere on purpose.
    monkeypatch.setenv("MILVUS_BULK_ACCESS_KEY", "chunker-test-key")
    monkeypatch.setenv("MILVUS_BULK_SECRET_KEY", "chunker-test-secret")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    dim = 8
    cfg = MilvusConfig(uri="http://127.0.0.1:1", bulk_uri=f"s3://{bucket}/bulk/load1",
                       bulk_endpoint=server.endpoint, bulk_region="us-east-1")
    chunks = [Chunk(chunk_id=f"d1-c{i}", doc_id="d1", element_ids=[f"d1:{i}"], text=f"text {i} \u00e9",
                    breadcrumb="A > B", page_start=1, page_end=2, modality="text", planner="deterministic",
                    config_hash="h", source="d1.pdf", source_uri="s3://corpus/d1.pdf") for i in range(30)]
    vectors = np.random.default_rng(1).random((30, dim), dtype=np.float32)
    with ChunkStore(MilvusConfig(uri=str(tmp_path / "m.db")), dim) as lite:
        ops = PymilvusBulkOps(LiteAsServer(lite), cfg)
        fields = {f.name for f in ops.schema.fields if not f.is_function_output}
        files = ops.write_files([chunk_row(c, v) for c, v in zip(chunks, vectors)])

    assert not list(staging.iterdir()), "the staging folder is removed once the files are uploaded"
    keys = _keys(server.client(), bucket)
    flat = [f for group in files for f in group]
    assert flat and all(f.startswith("bulk/load1/") and f.endswith(".parquet") for f in flat)
    assert sorted(flat) == keys  # bulk_import names keys inside the bucket the server reads; nothing else written
    tables = [pq.read_table(io.BytesIO(server.client().get_object(Bucket=bucket, Key=k)["Body"].read()))
              for k in keys]
    table = pa.concat_tables(tables)
    assert table.num_rows == 30
    assert fields <= set(table.column_names)
    assert sorted(table.column("chunk_id").to_pylist()) == sorted(c.chunk_id for c in chunks)
    row = table.filter(pa.compute.equal(table.column("chunk_id"), "d1-c3")).to_pylist()[0]
    assert row["text"] == "text 3 \u00e9" and np.allclose(row["dense"], vectors[3])


def test_an_output_bucket_that_is_not_there_is_one_line_before_any_work(s3, capsys, tmp_path):
    from jobs.ingest import main

    server, bucket = s3
    _put(server.client(), bucket, "corpus/a.pdf", b"%PDF-1.4")
    config = str(Path(__file__).resolve().parents[1] / "configs" / "local.yaml")
    rc = main(["--config", config, "--set", f"milvus.uri={tmp_path / 'm.db'}", "--input", f"s3://{bucket}/corpus/",
               "--output", "s3://no-such-bucket/runs/r1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 3 and len(err) == 1, err
    assert err[0].startswith("error: output 's3://no-such-bucket/runs/r1' cannot be used") and "NO_SUCH_BUCKET" in err[0]
    assert not (tmp_path / "m.db").exists()  # stopped before Ray or Milvus started
