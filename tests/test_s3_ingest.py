"""A whole ``jobs.ingest`` with its corpus and run folder on S3 (moto on loopback), Milvus Lite locally: the local Ray
runtime the job starts hands the AWS variables to its workers, every artefact lands on S3 without renames, a second
run skips everything through the ledger there, and a changed object replaces its old chunks."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytestmark = [pytest.mark.ray, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[1]
BUCKET = "ingest-bucket"
RENAME_OPS = {"CopyObject", "UploadPartCopy", "DeleteObject"}


@pytest.fixture(scope="module")
def s3_corpus(s3_server, samples_dir):
    """The samples under s3://ingest-bucket/corpus/ (one in a sub-prefix, with a space in its key) and the AWS
    variables set before the job starts Ray, as a user's shell would have them."""
    import ray

    if ray.is_initialized():  # a runtime started without these variables would not pass them on
        ray.shutdown()
    client = s3_server.client()
    client.create_bucket(Bucket=BUCKET)
    keys = {}
    for pdf in sorted(samples_dir.glob("*.pdf")):
        key = (f"corpus/policies/{pdf.stem.replace('-', ' ')}.pdf" if pdf.name.startswith("travel")
               else f"corpus/{pdf.name}")
        client.put_object(Bucket=BUCKET, Key=key, Body=pdf.read_bytes())
        keys[pdf.name] = key
    with pytest.MonkeyPatch.context() as mp:
        for name, value in s3_server.env().items():
            mp.setenv(name, value)
        yield s3_server, keys
        ray.shutdown()


def _ingest(db: Path, *args: str) -> int:
    from jobs.ingest import main

    return main(["--config", str(REPO / "configs" / "local.yaml"), "--set", f"milvus.uri={db}",
                 "--input", f"s3://{BUCKET}/corpus/", *args])


def _get(client: Any, key: str) -> bytes:
    return client.get_object(Bucket=BUCKET, Key=key)["Body"].read()


def _keys(client: Any, prefix: str) -> list[str]:
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    return sorted(o["Key"] for page in pages for o in page.get("Contents", []))


def _table(client: Any, prefix: str) -> pa.Table:
    return pa.concat_tables([pq.read_table(io.BytesIO(_get(client, k)))
                             for k in _keys(client, prefix) if k.endswith(".parquet")])


def _chunk_ids(db: Path) -> set[str]:
    from chunker.config import load_config
    from chunker.index.store import ChunkStore

    cfg = load_config(str(REPO / "configs" / "local.yaml"), [f"milvus.uri={db}"])
    with ChunkStore(cfg.milvus, 384) as store:
        return store.chunk_ids()


def test_ingest_with_corpus_and_run_on_s3_resumes_and_replaces(s3_corpus, tmp_path, samples_dir):
    server, keys = s3_corpus
    client = server.client()
    db = tmp_path / "milvus.db"
    out = f"s3://{BUCKET}/runs/r1"

    server.clear()
    assert _ingest(db, "--output", out) == 0
    summary = json.loads(_get(client, "runs/r1/summary.json"))
    assert (summary["documents"], summary["ok"], summary["failed"]) == (4, 4, 0), summary["problems"]
    assert summary["chunks"] > 10 and summary["collection_rows"] == summary["chunks"]
    for stage in ("batches", "elements", "chunks"):
        assert len([k for k in _keys(client, f"runs/r1/{stage}/") if k.endswith(".parquet")]) == 4, stage
    docs = _table(client, "runs/r1/documents/").to_pylist()
    assert {d["status"] for d in docs} == {"ok"} and len(docs) == 4
    assert {d["source"] for d in docs} == {k.removeprefix("corpus/") for k in keys.values()}
    folder = f"runs/r1/ledger/{summary['config_hash']}/"
    ledger = [k for k in _keys(client, folder)]
    by_doc = sorted(k for k in ledger if "/by-uri/" not in k)
    assert by_doc == sorted(f"{folder}{d['doc_id']}.json" for d in docs)
    assert len(ledger) - len(by_doc) == 4, "and one entry per source URI, asked before any byte is fetched"
    assert _keys(client, "runs/r1/listing/")  # the streamed listing the workers read
    # Written by the driver and by Ray workers in other processes: never a temporary key, never a rename.
    run_ops = server.ops(BUCKET, "runs/r1/")
    assert not [r for r in run_ops if r.op in RENAME_OPS or ".tmp" in r.key]
    assert not [k for k in _keys(client, "runs/") if ".tmp" in k]
    chunk_rows = _table(client, "runs/r1/chunks/").to_pylist()
    ids1 = {r["chunk_id"] for r in chunk_rows}
    assert _chunk_ids(db) == ids1
    travel = next(d for d in docs if d["source"].startswith("policies/"))
    assert travel["source_uri"].startswith(f"s3://{BUCKET}/corpus/policies/")

    # The same job again: the ledger on S3 says every document is done; nothing is converted or loaded again.
    assert _ingest(db, "--output", out) == 0
    again = json.loads(_get(client, "runs/r1/summary.json"))
    assert (again["documents"], again["skipped"], again["ok"]) == (4, 4, 0)
    assert _chunk_ids(db) == ids1

    # A changed object under the same key: a new doc_id, its old chunks replaced, the others untouched.
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 16)
    pdf.cell(0, 10, "Travel and Expense Policy", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", size=10)
    pdf.multi_cell(0, 5, "Claims are now due within 45 days. Receipts are needed above EUR 10.")
    client.put_object(Bucket=BUCKET, Key=keys[next(n for n in keys if n.startswith("travel"))],
                      Body=bytes(pdf.output()))
    assert _ingest(db, "--output", out) == 0
    third = json.loads(_get(client, "runs/r1/summary.json"))
    assert (third["ok"], third["skipped"], third["failed"]) == (1, 3, 0), third["problems"]
    new_docs = _table(client, "runs/r1/documents/").to_pylist()
    changed = next(d for d in new_docs if d["status"] == "ok")
    assert changed["source"] == travel["source"] and changed["doc_id"] != travel["doc_id"]
    ids3 = _chunk_ids(db)
    old_travel = {r["chunk_id"] for r in chunk_rows if r["doc_id"] == travel["doc_id"]}
    assert old_travel and not (old_travel & ids3), "the changed object's old chunks are gone"
    assert ids1 - old_travel <= ids3, "the other documents keep their chunks"
    new_chunks = {r["chunk_id"] for r in _table(client, "runs/r1/chunks/").to_pylist()
                  if r["doc_id"] == changed["doc_id"]}
    assert new_chunks and new_chunks <= ids3
