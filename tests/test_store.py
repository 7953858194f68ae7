"""ChunkStore on Milvus Lite (and a Lite server over HTTP), and filters that cannot be turned into injections."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from milvus_lite_server import free_port  # tests/ is on sys.path under pytest
from pydantic import ValidationError
from ranking import assert_same_ranking, assert_same_rankings

from chunker.config import MilvusConfig
from chunker.index.filters import FilterError, QueryFilters, build_filter, escape_like, render_filter
from chunker.index.collection import analyzer_params, chunk_row
from chunker.index.store import ChunkStore, SchemaMismatch, StoreError, StoreUnavailable
from chunker.types import Chunk

DIM = 8
SOURCES = ["dir_1/a.pdf", "dirX1/b.pdf", "dir%2/c.pdf", 'q"t/d.pdf', "other/e.pdf"]


def make_chunks(n: int, doc: str = "d1", source: str = "dir_1/a.pdf", text: str = "text") -> list[Chunk]:
    return [
        Chunk(chunk_id=f"{doc}-{i}", doc_id=doc, element_ids=[f"{doc}:{i}"], text=f"{text} number {i}",
              breadcrumb="Guide > Part", page_start=i + 1, page_end=i + 2,
              modality="figure" if i % 3 == 0 else "text", planner="deterministic", config_hash="h",
              source=source, source_uri=f"file:///{source}")
        for i in range(n)
    ]


def vecs(n: int, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


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


@pytest.fixture(scope="module")
def filter_store(lite_root: Path) -> ChunkStore:
    # Read-only for its tests, so shared: creating a Lite collection costs ~1 s.
    s = ChunkStore(MilvusConfig(uri=str(lite_root / "store.db")), DIM, collection="filters")
    chunks = [c for i, src in enumerate(SOURCES) for c in make_chunks(3, doc=f"doc{i}", source=src)]
    s.upsert(chunks, vecs(len(chunks)))
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


def test_oversized_text_is_clipped_on_a_character_boundary() -> None:
    chunk = make_chunks(1, text="é" * 40_000)[0]
    row = chunk_row(chunk, vecs(1)[0])
    assert len(row["text"].encode()) <= 65535 and row["text"].startswith("éé")


def test_search_modes_and_scores(filter_store: ChunkStore) -> None:
    q = vecs(15)[4]
    dense = filter_store.search(q, None, mode="dense", limit=3)
    assert dense[0]["chunk_id"] == "doc1-1" and dense[0]["score"] == pytest.approx(1.0, abs=1e-4)
    assert set(dense[0]) >= {"chunk_id", "doc_id", "source", "breadcrumb", "text", "page_start", "element_ids", "score"}
    sparse = filter_store.search(None, "number 2", mode="sparse", limit=20)
    assert sparse and all(r["score"] > 0 for r in sparse)
    assert [r["score"] for r in sparse] == sorted((r["score"] for r in sparse), reverse=True)
    for fusion in ("rrf", "weighted"):
        hybrid = filter_store.search(q, "number 1", mode="hybrid", limit=5, fusion=fusion)
        assert hybrid[0]["chunk_id"] == "doc1-1"
    # Blank text: hybrid degrades to dense instead of sending BM25 nothing.
    assert filter_store.search(q, "  ", mode="hybrid", limit=1)[0]["chunk_id"] == "doc1-1"
    with pytest.raises(ValueError):
        filter_store.search(None, "", mode="sparse")


def test_search_batch_answers_each_query_as_search_does(filter_store: ChunkStore) -> None:
    qv = vecs(15)[[4, 7, 11]]
    texts = ["number 1", "number 2", "number 0"]
    expr, params = build_filter(QueryFilters(modality="text"))
    for mode in ("dense", "sparse", "hybrid"):
        for fexpr, fparams in (("", None), (expr, params)):
            batch = filter_store.search_batch(qv, texts, mode=mode, limit=5, filter_expr=fexpr, filter_params=fparams)
            single = [filter_store.search(v, t, mode=mode, limit=5, filter_expr=fexpr, filter_params=fparams)
                      for v, t in zip(qv, texts)]
            # The same rows and ranking; scores agree to float32 precision, not to the last bit (a batched search
            # sums in another order), and rows with tied scores (equal texts under BM25) may come in either order.
            assert_same_rankings(batch, single)
            assert all(r["modality"] == "text" for rows in batch for r in rows) or not fexpr
    # Blank texts in a hybrid batch go dense, the others stay hybrid, each in its own slot.
    mixed = filter_store.search_batch(qv, ["  ", "number 1", ""], mode="hybrid", limit=3)
    assert mixed[0][0]["chunk_id"] == "doc1-1"
    assert_same_ranking(mixed[2], filter_store.search(qv[2], None, mode="dense", limit=3))
    assert_same_ranking(mixed[1], filter_store.search(qv[1], "number 1", limit=3))
    assert filter_store.search_batch(None, [], mode="sparse") == []
    with pytest.raises(ValueError, match="2 query texts"):
        filter_store.search_batch(qv, texts[:2], mode="hybrid")
    with pytest.raises(ValueError):
        filter_store.search_batch(None, ["number", " "], mode="sparse")


def test_ids_only_legs_and_fetch_by_key(filter_store: ChunkStore) -> None:
    # What the adaptive hybrid path asks for: each leg's IDs and scores alone, then the winners' fields in one call.
    q = vecs(15)[4]
    for mode, dense, text in (("dense", q, None), ("sparse", None, "number 2")):
        full = filter_store.search(dense, text, mode=mode, limit=6)
        bare = filter_store.search_batch(None if dense is None else dense.reshape(1, -1), [text or ""], mode=mode,
                                         limit=6, fields=[])[0]
        assert [set(r) for r in bare] == [{"chunk_id", "score"}] * len(full)
        assert [r["chunk_id"] for r in bare] == [r["chunk_id"] for r in full]
        assert [r["score"] for r in bare] == pytest.approx([r["score"] for r in full], rel=1e-6)
    full = filter_store.search(q, None, mode="dense", limit=4)
    ids = [r["chunk_id"] for r in full]
    got = filter_store.fetch([*reversed(ids), "no-such-chunk", ids[0]])
    assert set(got) == set(ids)  # an ID no longer stored is absent, a repeated one asked once
    for r in full:
        assert got[r["chunk_id"]] == {k: v for k, v in r.items() if k != "score"}
    assert set(filter_store.fetch(ids[:1], ["text"])[ids[0]]) == {"chunk_id", "text"}
    assert filter_store.fetch([]) == {}


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


def test_analyzer_params() -> None:
    assert analyzer_params("english", lite=True)["tokenizer"] == "standard"
    assert analyzer_params("multilingual", lite=False)["tokenizer"] == "icu"
    assert analyzer_params("multilingual", lite=True)["tokenizer"] == "standard"
    assert analyzer_params("chinese", lite=False)["tokenizer"] == "jieba"
    with pytest.raises(StoreError):
        analyzer_params("klingon", lite=True)


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


# --------------------------------------------------------------------------- filters


@pytest.mark.parametrize("bad", [
    {"doc_id": 'x" or 1==1 or doc_id == "'},
    {"doc_id": "abc\\"},
    {"doc_id": "a" * 129},
    {"doc_id": "doc1 or 1==1"},
    {"modality": "text or 1==1"},
    {"source_prefix": "dir\\"},
    {"source_prefix": "a" * 513},
    {"source_prefix": "a\nb"},
    {"source_prefix": ""},
    {"page_min": 0},
    {"page_min": "1 or 1==1"},
    {"page_min": 5, "page_max": 2},
    {"expr": "1==1"},
])
def test_unsafe_filters_are_refused(bad: dict) -> None:
    with pytest.raises(ValidationError):
        QueryFilters(**bad)


def test_build_filter_uses_templates() -> None:
    expr, params = build_filter(QueryFilters(doc_id="abc", modality="table", page_min=2, page_max=9))
    assert expr == "doc_id == {doc_id} and modality == {modality} and page_end >= {page_min} and page_start <= {page_max}"
    assert params == {"doc_id": "abc", "modality": "table", "page_min": 2, "page_max": 9}
    assert build_filter(None) == ("", {}) and build_filter(QueryFilters()) == ("", {})
    assert escape_like("a_b%c") == "a\\_b\\%c"


def test_render_filter_guards() -> None:
    assert render_filter("x == {v}", {"v": 'a"b'}) == 'x == "a\\"b"'
    assert render_filter('s like "{v}%" and x == {v}', {"v": 3}) == 's like "{v}%" and x == 3'
    with pytest.raises(FilterError, match="no parameter"):
        render_filter("x == {v}", {"w": 1})
    with pytest.raises(FilterError, match="not used"):
        render_filter("x == {v}", {"v": 1, "w": 2})
    with pytest.raises(FilterError, match="booleans"):
        render_filter("x == {v}", {"v": True})


def ids(rows: list[dict]) -> set[str]:
    return {r["chunk_id"] for r in rows}


def test_filters_select_exactly_on_lite(filter_store: ChunkStore) -> None:
    def run(f: QueryFilters) -> set[str]:
        expr, params = build_filter(f)
        return ids(filter_store.search(vecs(1, 9)[0], "number", mode="hybrid", limit=50, filter_expr=expr, filter_params=params))

    assert run(QueryFilters(doc_id="doc3")) == {"doc3-0", "doc3-1", "doc3-2"}
    assert run(QueryFilters(modality="figure")) == {f"doc{i}-0" for i in range(5)}
    assert run(QueryFilters(page_min=3, page_max=3)) == {f"doc{i}-{j}" for i in range(5) for j in (1, 2)}
    # '_' is a literal: "dir_1/" must not match "dirX1/".
    assert run(QueryFilters(source_prefix="dir_1/")) == {"doc0-0", "doc0-1", "doc0-2"}
    assert run(QueryFilters(source_prefix="dir%")) == {"doc2-0", "doc2-1", "doc2-2"}
    assert run(QueryFilters(source_prefix='q"t/')) == {"doc3-0", "doc3-1", "doc3-2"}


@pytest.mark.parametrize("prefix", ['" or 1==1 or source like "', "%", "_", '"', "' or ''=='", "x" * 512])
def test_injected_prefixes_match_nothing(filter_store: ChunkStore, prefix: str) -> None:
    expr, params = build_filter(QueryFilters(source_prefix=prefix))
    assert filter_store.search(vecs(1)[0], "number", mode="hybrid", limit=50, filter_expr=expr, filter_params=params) == []


def test_values_that_skip_validation_are_still_literals(filter_store: ChunkStore) -> None:
    # model_construct bypasses validation: rendering alone must still neutralise the value.
    f = QueryFilters.model_construct(doc_id='doc1" or doc_id != "', source_prefix=None, modality=None, page_min=None, page_max=None)
    expr, params = build_filter(f)
    assert filter_store.search(vecs(1)[0], None, mode="dense", limit=50, filter_expr=expr, filter_params=params) == []
    assert filter_store.delete_doc('doc1" or doc_id != "') == 0
    assert filter_store.count() == 15


# --------------------------------------------------------------------------- servers


def roundtrip(cfg: MilvusConfig) -> None:
    s = ChunkStore(cfg, DIM, collection="server_roundtrip")
    try:
        chunks = make_chunks(6, doc="srv")
        assert s.upsert(chunks, vecs(6)) == 6
        assert s.count() == 6
        assert s.search(vecs(6)[2], "number 2", mode="hybrid", limit=1)[0]["chunk_id"] == "srv-2"
        expr, params = build_filter(QueryFilters(doc_id="srv", page_min=5))
        assert ids(s.search(vecs(6)[2], None, mode="dense", limit=10, filter_expr=expr, filter_params=params)) == {
            "srv-3", "srv-4", "srv-5"}
    finally:
        s.drop()
        s.close()


@pytest.mark.milvus_server
def test_milvus_server_roundtrip() -> None:
    uri = os.environ.get("MILVUS_TEST_URI")
    if not uri:
        pytest.skip("MILVUS_TEST_URI is not set")
    roundtrip(MilvusConfig(uri=uri))


@pytest.fixture(scope="module")
def lite_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, subprocess.Popen]]:
    """A `milvus-lite server` on a loopback port: a real gRPC Milvus endpoint that tests may also freeze."""
    from milvus_lite_server import lite_server as start

    with start(tmp_path_factory.mktemp("srv")) as server:
        yield server


def test_lite_server_over_http(lite_server: tuple[str, subprocess.Popen]) -> None:
    roundtrip(MilvusConfig(uri=lite_server[0]))


# ------------------------------------------------------------------ index settings and deadlines

@pytest.mark.parametrize("index_type", ["HNSW", "IVF_FLAT", "IVF_SQ8", "FLAT", "AUTOINDEX"])
def test_configured_index_is_built_and_searched(lite_root: Path, index_type: str) -> None:
    # ef and nlist far below the limit and the row count: ef is raised to the limit, nlist is the index's business.
    cfg = MilvusConfig(uri=str(lite_root / "store.db"), index_type=index_type, hnsw_m=8, hnsw_ef=2, ivf_nlist=4,
                       ivf_nprobe=4)
    s = ChunkStore(cfg, DIM, collection=f"idx_{index_type.lower()}")
    try:
        s.upsert(make_chunks(40), vecs(40))
        assert s.client.describe_index(s.collection, "dense")["index_type"] == index_type
        hits = s.search(vecs(40)[7], None, mode="dense", limit=10)
        assert len(hits) == 10 and hits[0]["chunk_id"] == "d1-7"
        params = s._dense_search_params(10)
        assert params["metric_type"] == "COSINE"
        assert params.get("params") == {"HNSW": {"ef": 10}, "IVF_FLAT": {"nprobe": 4}, "IVF_SQ8": {"nprobe": 4}}.get(
            index_type)
    finally:
        s.drop()
        s.close()


def test_an_existing_collection_is_searched_with_its_own_index(lite_root: Path) -> None:
    uri = str(lite_root / "store.db")
    first = ChunkStore(MilvusConfig(uri=uri, index_type="IVF_FLAT"), DIM, collection="idx_kept")
    try:
        first.upsert(make_chunks(12), vecs(12))
        again = ChunkStore(MilvusConfig(uri=uri, index_type="HNSW"), DIM, collection="idx_kept")
        assert again.index_type == "IVF_FLAT"  # config changes apply to new collections only
        assert again._dense_search_params(5)["params"] == {"nprobe": 16}
        assert len(again.search(vecs(12)[3], None, mode="dense", limit=5)) == 5
    finally:
        first.drop()
        first.close()


def test_index_search_params_follow_milvus_limits() -> None:
    from chunker.index.params import index_build_params, index_search_params

    cfg = MilvusConfig(uri="http://m:19530", hnsw_m=32, hnsw_ef_construction=360, hnsw_ef=64, ivf_nlist=4096,
                       ivf_nprobe=32, diskann_search_list=50)
    assert index_build_params(cfg.model_copy(update={"index_type": "HNSW"})) == {"M": 32, "efConstruction": 360}
    assert index_build_params(cfg.model_copy(update={"index_type": "IVF_SQ8"})) == {"nlist": 4096}
    assert index_build_params(cfg.model_copy(update={"index_type": "DISKANN"})) == {}
    assert index_search_params(cfg, "HNSW", 10) == {"ef": 64}
    assert index_search_params(cfg, "HNSW", 200) == {"ef": 200}  # Milvus refuses ef < limit
    assert index_search_params(cfg, "IVF_SQ8", 200) == {"nprobe": 32}
    assert index_search_params(cfg, "DISKANN", 100) == {"search_list": 100}
    assert index_search_params(cfg, "FLAT", 10) == {} and index_search_params(cfg, "AUTOINDEX", 10) == {}


def test_index_settings_are_validated_by_field(lite_server: tuple[str, subprocess.Popen], tmp_path: Path) -> None:
    from chunker.config import ConfigError, load_config

    with pytest.raises(ConfigError, match="milvus.index_type DISKANN does not build on Milvus Lite"):
        load_config(None, [f"milvus.uri={tmp_path / 'x.db'}", "milvus.index_type=DISKANN"])
    with pytest.raises(ConfigError, match=r"milvus.index_type: Input should be 'AUTOINDEX'"):
        load_config(None, ["milvus.index_type=IVF_PQ"])
    with pytest.raises(ConfigError, match=r"milvus.ivf_nprobe \(64\) must not exceed milvus.ivf_nlist \(32\)"):
        load_config(None, ["milvus.ivf_nlist=32", "milvus.ivf_nprobe=64"])
    assert load_config(None, ["milvus.uri=http://milvus:19530", "milvus.index_type=DISKANN"]).milvus.index_type == "DISKANN"
    # Lite behind `milvus-lite server` looks like a server by its URI: refused once its version says Lite.
    with pytest.raises(StoreError, match="milvus.index_type DISKANN does not build on Milvus Lite"):
        ChunkStore(MilvusConfig(uri=lite_server[0], index_type="DISKANN"), DIM, collection="never")


def test_a_frozen_server_fails_within_the_call_timeout(lite_server: tuple[str, subprocess.Popen]) -> None:
    uri, proc = lite_server
    s = ChunkStore(MilvusConfig(uri=uri, call_timeout_s=1.0, write_timeout_s=2.0), DIM, collection="frozen")
    try:
        s.upsert(make_chunks(5), vecs(5))
        assert s.search(vecs(5)[1], "number 1", mode="hybrid", limit=1)[0]["chunk_id"] == "d1-1"
        os.kill(proc.pid, signal.SIGSTOP)  # accepts connections (the kernel does), never answers
        try:
            for call in (lambda: s.search(vecs(5)[1], "number 1", mode="hybrid", limit=1),
                         lambda: s.search(vecs(5)[1], None, mode="dense", limit=1), s.ready,
                         lambda: s.delete_doc("d1")):  # a write: its own deadline, or the lost peer
                t0 = time.monotonic()
                with pytest.raises(StoreUnavailable, match=r"Milvus at \S+ (did not answer|is unreachable)"):
                    call()
                # Without a deadline a search waited ~70 s here (gRPC keepalive); with one, about the deadline.
                assert time.monotonic() - t0 < 4.0
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        assert s.search(vecs(5)[1], "number 1", mode="hybrid", limit=1)[0]["chunk_id"] == "d1-1"  # and it recovers
    finally:
        s.drop()
        s.close()


def test_bm25_text_has_the_file_name_and_the_breadcrumb_once() -> None:
    from chunker.index.collection import search_text, source_words

    c = Chunk(chunk_id="x", doc_id="d", element_ids=["d:1"], text="Notes > Debt\n\nTotal debt $49,046.",
              breadcrumb="Notes > Debt", page_start=3, page_end=3, modality="table", planner="p", config_hash="h",
              source="filings/BWH_QR_2024-06-30.pdf")
    assert source_words(c.source) == "BWH QR 2024 06 30" and source_words("") == ""
    assert search_text(c) == "BWH QR 2024 06 30\nNotes > Debt\n\nTotal debt $49,046."
    assert chunk_row(c, vecs(1)[0])["search_text"] == search_text(c)
    bare = Chunk(**{**c.__dict__, "text": "Total debt $49,046.", "source": ""})
    assert search_text(bare) == "Notes > Debt\nTotal debt $49,046."  # a crumb the text lacks is added


def test_row_strings_are_valid_utf8_whatever_the_input() -> None:
    c = Chunk(chunk_id="x", doc_id="d", element_ids=["d:1"], text="a\ud835b \ud835\udc65", breadcrumb="B\udcff",
              page_start=1, page_end=1, modality="text", planner="p", config_hash="h", source="odd\udcfe.pdf")
    row = chunk_row(c, vecs(1)[0])
    assert row["text"] == "a\ufffdb \U0001D465" and row["breadcrumb"] == "B\ufffd" and row["source"] == "odd\ufffd.pdf"
    for key in ("text", "breadcrumb", "source", "search_text"):
        row[key].encode("utf-8")
