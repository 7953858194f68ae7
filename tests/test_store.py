"""ChunkStore on Milvus Lite: idempotent upserts, deletes scoped by source URI, the schema it opens, and the errors
of a store it cannot open. Searches: tests/test_store_search.py; servers and deadlines: tests/test_store_servers.py."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from milvus_lite_server import free_port  # tests/ is on sys.path under pytest
from store_support import DIM, make_chunks, vecs

from chunker.config import MilvusConfig
from chunker.index.store import ChunkStore, SchemaMismatch, StoreError, StoreUnavailable
from chunker.types import Chunk


@pytest.fixture(scope="module")
def lite_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("milvus")


@pytest.fixture()
def store(lite_root: Path, request: pytest.FixtureRequest) -> ChunkStore:
    # One Lite directory per module (one in-process server); one collection per test keeps tests independent.
    cfg = MilvusConfig(uri=str(lite_root / "store.db"), upsert_batch=4)
    s = ChunkStore(cfg, DIM, collection=f"t_{request.node.name.replace('[', '_').replace(']', '_').replace('-', '_')}"[:60])
    yield s
    s.drop()
    s.close()


def test_upsert_is_idempotent_and_batched(store: ChunkStore, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = store.client.upsert
    monkeypatch.setattr(store.client, "upsert", lambda name, rows, **kw: calls.append(len(rows)) or real(name, rows, **kw))
    chunks = make_chunks(10)
    assert store.upsert(chunks, vecs(10)) == 10
    assert calls == [4, 4, 2]  # upsert_batch=4
    assert store.upsert(chunks, vecs(10)) == 10
    assert store.count() == 10
    assert store.chunk_ids() == {c.chunk_id for c in chunks}
    changed = make_chunks(10, text="changed")
    store.upsert(changed[:1], vecs(1))
    row = store.client.query(store.collection, filter='chunk_id == "d1-0"', output_fields=["text", "element_ids"])[0]
    assert row["text"] == "changed number 0" and row["element_ids"] == ["d1:0"]
    assert store.count() == 10


def test_upsert_rejects_mismatched_inputs(store: ChunkStore) -> None:
    with pytest.raises(ValueError, match="2 chunks but 3 vectors"):
        store.upsert(make_chunks(2), vecs(3))
    with pytest.raises(ValueError, match="dim"):
        store.upsert(make_chunks(2), np.zeros((2, DIM + 1), dtype=np.float32))


def make_doc(n: int, doc: str, uri: str, source: str = "x.pdf") -> list[Chunk]:
    return [Chunk(chunk_id=f"{doc}-{i}", doc_id=doc, element_ids=[f"{doc}:{i}"], text=f"{doc} {i}", breadcrumb="",
                  page_start=1, page_end=1, modality="text", planner="deterministic", config_hash="h", source=source,
                  source_uri=uri) for i in range(n)]


def test_reingest_replaces_old_version_and_delete_doc(store: ChunkStore) -> None:
    store.upsert(make_chunks(5, doc="old", source="s.pdf"), vecs(5))
    store.upsert(make_chunks(2, doc="keep", source="other.pdf"), vecs(2, 1))
    store.upsert(make_chunks(3, doc="new", source="s.pdf"), vecs(3, 2))
    assert store.delete_other_versions("file:///s.pdf", keep_doc_id="new") == 5
    assert {i.split("-")[0] for i in store.chunk_ids()} == {"new", "keep"}
    assert store.delete_other_versions("file:///s.pdf", keep_doc_id="new") == 0
    assert store.delete_doc("keep") == 2
    assert store.count() == 3


def test_versions_are_keyed_by_absolute_uri_not_the_relative_source(store: ChunkStore) -> None:
    # The same relative name under two input roots: two documents. Keyed by `source`, re-ingesting one deleted both.
    store.upsert(make_doc(3, "a-old", "/root1/x.pdf"), vecs(3))
    store.upsert(make_doc(2, "b", "/root2/x.pdf"), vecs(2, 1))
    store.upsert(make_doc(4, "a-new", "/root1/x.pdf"), vecs(4, 2))
    store.delete_stale([("/root1/x.pdf", "a-new", [f"a-new-{i}" for i in range(4)])])
    assert {i.rsplit("-", 1)[0] for i in store.chunk_ids()} == {"a-new", "b"}
    assert store.count() == 6


def test_stale_deletes_are_batched_per_commit_and_exact(store: ChunkStore, monkeypatch: pytest.MonkeyPatch) -> None:
    # Earlier versions of 30 documents, a plan that shrank for each, and one bystander under another root.
    for k in range(30):
        store.upsert(make_doc(2, f"v1{k:02d}", f"/r/{k}.pdf"), vecs(2, k))
        store.upsert(make_doc(3, f"v2{k:02d}", f"/r/{k}.pdf"), vecs(3, k))
    store.upsert(make_doc(2, "other", "/elsewhere/0.pdf"), vecs(2))
    calls: list[str] = []
    real = store.client.delete
    monkeypatch.setattr(store.client, "delete", lambda name, **kw: calls.append(kw["filter"]) or real(name, **kw))
    # The new plan of each document keeps chunks 0 and 1 only.
    n = store.delete_stale([(f"/r/{k}.pdf", f"v2{k:02d}", [f"v2{k:02d}-0", f"v2{k:02d}-1"]) for k in range(30)])
    assert len(calls) == 1 and n == 90  # one expression for the whole commit, no count queries
    assert store.chunk_ids() == {f"v2{k:02d}-{i}" for k in range(30) for i in (0, 1)} | {"other-0", "other-1"}


def test_delete_groups_stay_bounded(store: ChunkStore, monkeypatch: pytest.MonkeyPatch) -> None:
    from chunker.index import store as store_mod

    monkeypatch.setattr(store_mod, "DELETE_TERMS", 10)
    calls: list[str] = []
    real = store.client.delete
    monkeypatch.setattr(store.client, "delete", lambda name, **kw: calls.append(kw["filter"]) or real(name, **kw))
    store.delete_stale([(f"/r/{k}.pdf", f"d{k}", [f"d{k}-{i}" for i in range(3)]) for k in range(6)]
                       + [("/r/big.pdf", "big", [f"big-{i}" for i in range(40)])])
    assert len(calls) == 4  # 2 documents (5 terms each) per call, and the big one alone


def test_scalar_indexes_on_the_delete_keys(store: ChunkStore) -> None:
    assert {"doc_id", "source_uri"} <= set(store.client.list_indexes(store.collection))


def test_collections_without_scalar_indexes_get_them_on_open(lite_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from chunker.index import collection

    cfg = MilvusConfig(uri=str(lite_root / "store.db"))
    monkeypatch.setattr(collection, "SCALAR_INDEXED", ())  # a collection made before the indexes existed
    with ChunkStore(cfg, DIM, collection="t_late_index") as s:
        assert not {"doc_id", "source_uri"} & set(s.client.list_indexes(s.collection))
    monkeypatch.undo()
    with ChunkStore(cfg, DIM, collection="t_late_index") as s:
        assert {"doc_id", "source_uri"} <= set(s.client.list_indexes(s.collection))
        s.drop()


def test_every_write_bumps_the_generation(store: ChunkStore) -> None:
    seen = [store.generation]
    store.upsert(make_chunks(3), vecs(3))
    seen.append(store.generation)
    store.delete_doc_except("d1", {"d1-0"})
    seen.append(store.generation)
    store.delete_doc("d1")
    seen.append(store.generation)
    store.mark_changed()  # a writer that loads rows another way (bulk import) says so itself
    seen.append(store.generation)
    assert seen == sorted(set(seen)) and len(seen) == 5


def test_schema_version_and_dim_mismatch_explain_rebuild(lite_root: Path) -> None:
    cfg = MilvusConfig(uri=str(lite_root / "store.db"))
    s = ChunkStore(cfg, DIM, collection="dimcheck")
    try:
        with pytest.raises(SchemaMismatch, match="jobs.rechunk"):
            ChunkStore(cfg, DIM * 2, collection="dimcheck")
        from pymilvus import DataType

        schema = s.client.create_schema(auto_id=False)
        schema.add_field("id", DataType.INT64, is_primary=True)
        schema.add_field("v", DataType.FLOAT_VECTOR, dim=DIM)
        s.client.create_collection("foreign", schema=schema)
        with pytest.raises(SchemaMismatch, match="schema version unknown"):
            ChunkStore(cfg, DIM, collection="foreign")
    finally:
        s.client.drop_collection("foreign")
        s.drop()


def test_lite_path_must_end_in_db(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=".db"):
        ChunkStore(MilvusConfig(uri=str(tmp_path / "store")), DIM)


def test_unreachable_server_is_store_unavailable() -> None:
    t = time.perf_counter()
    with pytest.raises(StoreUnavailable, match="cannot reach Milvus"):
        ChunkStore(MilvusConfig(uri=f"http://127.0.0.1:{free_port()}"), DIM)
    assert time.perf_counter() - t < 15


def test_locked_lite_dir_says_how_to_share_it(tmp_path: Path) -> None:
    path = tmp_path / "locked.db"
    holder = subprocess.Popen(
        [sys.executable, "-c", f"from pymilvus import MilvusClient; MilvusClient({str(path)!r}); print('ready', flush=True); "
         "import sys; sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "ready"
        with pytest.raises(StoreUnavailable, match="milvus-lite server --data-dir"):
            ChunkStore(MilvusConfig(uri=str(path)), DIM)
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)

