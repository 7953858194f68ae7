"""ChunkStore's searches on Milvus Lite: dense / BM25 / hybrid scores, batched searches that answer as single ones,
ID-only legs, rows fetched by key, and the dense index each search is parameterised for."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from ranking import assert_same_ranking, assert_same_rankings  # tests/ is on sys.path under pytest
from store_support import DIM, filter_store_at, make_chunks, vecs

from chunker.config import MilvusConfig
from chunker.index.filters import QueryFilters, build_filter
from chunker.index.store import ChunkStore


@pytest.fixture(scope="module")
def lite_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("milvus")


@pytest.fixture(scope="module")
def filter_store(lite_root: Path) -> Iterator[ChunkStore]:
    with filter_store_at(lite_root) as s:
        yield s


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


# ------------------------------------------------------------------ index settings


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
        # (Lite's AUTOINDEX is an HNSW graph, searched with HNSW's ef.)
        assert params.get("params") == {"HNSW": {"ef": 10}, "IVF_FLAT": {"nprobe": 4}, "IVF_SQ8": {"nprobe": 4},
                                        "AUTOINDEX": {"ef": 10}}.get(index_type)
    finally:
        s.drop()
        s.close()


def test_lite_autoindex_is_searched_at_the_configured_ef(lite_root: Path) -> None:
    # Lite builds AUTOINDEX as an HNSW graph per sealed segment (in the background, after a flush) and searched it
    # at its own ef 64 when given none: on 3,000 random 64-dim vectors that misses some of the exact top 20. At an
    # ef above the row count the search walks the whole graph and finds the exact top 20.
    import numpy as np

    rng = np.random.default_rng(7)
    n, dim = 3000, 64
    v = rng.normal(size=(n, dim)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    q = rng.normal(size=(12, dim)).astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    exact = [set(np.argsort(-(v @ x))[:20].tolist()) for x in q]

    def top20(store: ChunkStore) -> list[set[int]]:
        return [{int(r["chunk_id"].split("-")[1]) for r in rows}
                for rows in store.search_batch(q, None, mode="dense", limit=20, fields=[])]

    uri = str(lite_root / "store.db")
    narrow = ChunkStore(MilvusConfig(uri=uri, hnsw_ef=20), dim, collection="ef_lite")
    try:
        narrow.upsert(make_chunks(n), v)
        narrow.flush()
        # Until the graph is built Lite searches the segment exhaustively; at ef 20 the graph shows by its misses.
        deadline = time.monotonic() + 120  # (seconds on an idle box; minutes allowed for a loaded one)
        while top20(narrow) == exact:
            assert time.monotonic() < deadline, "Lite searched exhaustively for two minutes: no HNSW graph was built"
            time.sleep(0.5)
        wide = ChunkStore(MilvusConfig(uri=uri, hnsw_ef=4000), dim, collection="ef_lite")
        try:
            assert top20(wide) == exact
        finally:
            wide.close()
    finally:
        narrow.drop()
        narrow.close()


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


def test_bm25_parameters_are_the_ones_the_index_scores_with(lite_root: Path) -> None:
    # Milvus Lite read only a JSON "params" key and used its own k1 (1.5, Milvus' is 1.2) when given flat keys.
    # With no length normalisation (b = 0) a short and a long chunk that each hold the word once score the same;
    # with full normalisation the short one scores higher.
    short, long_ = make_chunks(2)
    short.text = "refund"
    long_.text = "refund " + " ".join(f"filler{i}" for i in range(40))
    scores = {}
    for b in (0.0, 1.0):
        s = ChunkStore(MilvusConfig(uri=str(lite_root / "store.db"), bm25_k1=1.2, bm25_b=b), DIM,
                       collection=f"bm25_b{int(b)}")
        try:
            s.upsert([short, long_], vecs(2))
            built = s.client.describe_index(s.collection, "sparse")
            assert built["params"] == {"bm25_k1": 1.2, "bm25_b": b}
            scores[b] = {r["chunk_id"]: r["score"] for r in s.search(None, "refund", mode="sparse", limit=2)}
        finally:
            s.drop()
            s.close()
    assert scores[0.0][short.chunk_id] == pytest.approx(scores[0.0][long_.chunk_id])
    assert scores[1.0][short.chunk_id] > 1.5 * scores[1.0][long_.chunk_id]


def test_dense_build_parameters_reach_the_index(lite_root: Path) -> None:
    cfg = MilvusConfig(uri=str(lite_root / "store.db"), index_type="HNSW", hnsw_m=8, hnsw_ef_construction=40)
    s = ChunkStore(cfg, DIM, collection="hnsw_built")
    try:
        assert s.client.describe_index(s.collection, "dense")["params"] == {"M": 8, "efConstruction": 40}
    finally:
        s.drop()
        s.close()


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
    assert index_search_params(cfg, "AUTOINDEX", 10, lite=True) == {"ef": 64}  # Lite's AUTOINDEX is HNSW
    assert index_search_params(cfg, "FLAT", 10, lite=True) == {}
