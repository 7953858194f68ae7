"""Retriever: dense / BM25 / hybrid over Milvus Lite with the real MiniLM, figure boost, cross-encoder rerank.
The fusion and near-duplicate functions alone: tests/test_fusion.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from ranking import assert_same_ranking  # tests/ is on sys.path under pytest

from chunker.config import Config
from chunker.index.embed import Embedder
from chunker.index.filters import QueryFilters
from chunker.index.retrieval import (
    CrossEncoderReranker, Hit, Query, Reranker, RerankerUnavailable, Retriever, boost_figures, is_visual_question,
)
from chunker.index.store import ChunkStore
from chunker.types import Chunk

TARGET = "c5"
CORPUS = [
    ("Warranty", "The ZX-4471P controller carries a two-year warranty covering repairs and replacement parts."),
    ("Warranty", "Warranty terms for the ZX-4417Q sensor: three years, parts and labour included."),
    ("Warranty", "The QX-4471Z gateway warranty lasts eighteen months from the date of purchase."),
    ("Warranty", "Extended warranty plans are available for every controller in the ZX family."),
    ("Warranty", "Claims under warranty must include the serial number and the proof of purchase."),
    ("Shipping", "Part ZX-4471Q ships in a grey carton with foam inserts; its coverage period is five years."),
    ("Install", "Mount the controller on a DIN rail and connect the supply before powering on."),
    ("Figures", "Figure 3: block diagram of the controller showing the power stage and the bus interface."),
    ("Install", "The controller block layout places the power stage next to the bus interface connector."),
]
CODE_QUESTION = "What is the warranty on the ZX-4471Q?"


def corpus_chunks() -> list[Chunk]:
    return [
        Chunk(chunk_id=f"c{i}", doc_id="docA" if i < 6 else "docB", element_ids=[f"d:{i}"], text=t,
              breadcrumb=f"Manual > {b}", page_start=i + 1, page_end=i + 1,
              modality="figure" if b == "Figures" else "text", planner="deterministic", config_hash="h",
              source="manuals/zx.pdf" if i < 6 else "manuals/install.pdf")
        for i, (b, t) in enumerate(CORPUS)
    ]


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder(Config().embed)


@pytest.fixture(scope="module")
def cfg(tmp_path_factory: pytest.TempPathFactory) -> Config:
    c = Config()
    c.milvus.uri = str(tmp_path_factory.mktemp("retrieval") / "r.db")
    return c


@pytest.fixture(scope="module")
def store(cfg: Config, embedder: Embedder) -> ChunkStore:
    s = ChunkStore(cfg.milvus, embedder.dim)
    chunks = corpus_chunks()
    s.upsert(chunks, embedder.encode([f"{c.breadcrumb}\n{c.text}" for c in chunks]))
    yield s
    s.close()


def retriever(cfg: Config, store: ChunkStore, embedder: Embedder, reranker: Reranker | None = None, **retrieval) -> Retriever:
    c = cfg.model_copy(deep=True)
    for key, value in retrieval.items():
        setattr(c.retrieval, key, value)
    return Retriever(c, store=store, embedder=embedder, reranker=reranker)


def rank_of(hits: list[Hit], chunk_id: str) -> int:
    return next((h.rank for h in hits if h.chunk_id == chunk_id), 10**6)


@pytest.mark.parametrize("mode", ["dense", "sparse", "hybrid"])
def test_every_mode_returns_hits_with_timings(cfg: Config, store: ChunkStore, embedder: Embedder, mode: str) -> None:
    res = retriever(cfg, store, embedder, mode=mode).search("How do I mount the controller on a rail?", k=3)
    assert 1 <= len(res.hits) <= 3 and [h.rank for h in res.hits] == list(range(1, len(res.hits) + 1))
    assert res.hits[0].chunk_id == "c6" and res.hits[0].breadcrumb == "Manual > Install"
    assert res.hits[0].source == "manuals/install.pdf" and res.hits[0].page_start == 7
    assert set(res.timings_ms) == {"embed", "search", "rerank", "context"}
    assert (res.timings_ms["embed"] > 0) == (mode != "sparse")


def test_exact_product_code_needs_bm25(cfg: Config, store: ChunkStore, embedder: Embedder) -> None:
    ranks = {
        mode: rank_of(retriever(cfg, store, embedder, mode=mode).search(CODE_QUESTION, k=9).hits, TARGET)
        for mode in ("dense", "sparse", "hybrid")
    }
    weighted = retriever(cfg, store, embedder, mode="hybrid", fusion="weighted", dense_weight=0.3)
    ranks["weighted"] = rank_of(weighted.search(CODE_QUESTION, k=9).hits, TARGET)
    # MiniLM sees the near-identical codes of the distractors as the same thing; BM25 matches "4471q" exactly.
    assert ranks["sparse"] == 1
    assert ranks["dense"] > 1
    assert ranks["hybrid"] < ranks["dense"] and ranks["hybrid"] <= 3
    assert ranks["weighted"] == 1


def test_filters_pass_through(cfg: Config, store: ChunkStore, embedder: Embedder) -> None:
    r = retriever(cfg, store, embedder)
    hits = r.search("controller", k=9, filters=QueryFilters(doc_id="docB")).hits
    assert hits and {h.doc_id for h in hits} == {"docB"}
    hits = r.search("controller", k=9, filters=QueryFilters(source_prefix="manuals/zx", page_max=2)).hits
    assert {h.chunk_id for h in hits} <= {"c0", "c1"} and hits
    assert r.search("controller", k=9, filters=QueryFilters(source_prefix="manuals_zx")).hits == []


def test_is_visual_question() -> None:
    kw = Config().retrieval.visual_keywords
    assert is_visual_question("Show me the block DIAGRAM of the controller", kw)
    assert is_visual_question("Which charts compare the sensors?", kw)
    assert not is_visual_question("What does the graphical installer do?", kw)
    assert not is_visual_question("Which photographer took it?", kw)
    assert not is_visual_question("anything", [])


class FakeStore:
    """Returns fixed rows so score arithmetic can be checked exactly; honours ChunkStore's ``fields`` and
    ``fetch`` (fields by primary key) the way the real store does."""

    def __init__(self, rows: list[dict]) -> None:
        self.rows = rows
        self.calls: list[dict] = []
        self.fetched: list[list[str]] = []
        self.generation = 0

    def search(self, dense, text, **kw) -> list[dict]:
        self.calls.append(kw)
        return [dict(r) for r in self.rows]

    def search_batch(self, dense, texts, fields=None, **kw) -> list[list[dict]]:
        self.calls.append(dict(kw, texts=list(texts)))
        keep = None if fields is None else {"chunk_id", "score", *fields}
        return [[{k: v for k, v in r.items() if keep is None or k in keep} for r in self.rows] for _ in texts]

    def fetch(self, chunk_ids, fields=None) -> dict[str, dict]:
        self.fetched.append(list(chunk_ids))
        rows = {r["chunk_id"]: {k: v for k, v in r.items() if k != "score"} for r in self.rows}
        return {c: rows[c] for c in chunk_ids if c in rows}


def row(cid: str, score: float, modality: str = "text", text: str = "") -> dict:
    return {"chunk_id": cid, "score": score, "modality": modality, "text": text or cid, "breadcrumb": "B",
            "source": "s.pdf", "doc_id": "d", "page_start": 1, "page_end": 1}


class ScriptedReranker:
    def __init__(self, scores: dict[str, float]) -> None:
        self.scores = scores
        self.calls: list[tuple[str, list[str]]] = []

    def score(self, question: str, passages: list[str]) -> list[float]:
        self.calls.append((question, passages))
        return [self.scores[p.split("\n")[-1]] for p in passages]


def test_figure_boost_applies_to_visual_questions_only(embedder: Embedder) -> None:
    rows = [row("txt", 0.030), row("fig", 0.025, "figure")]
    cfg = Config()
    cfg.retrieval.fusion = "rrf"  # the store's scores pass through unfused: the boost arithmetic is checked on them
    r = Retriever(cfg, store=FakeStore(rows), embedder=embedder)  # type: ignore[arg-type]
    visual = r.search("Show the block diagram", k=2).hits
    assert [h.chunk_id for h in visual] == ["fig", "txt"]
    assert visual[0].score == pytest.approx(0.025 * cfg.retrieval.figure_boost)
    plain = r.search("Which block comes first?", k=2).hits
    assert [h.chunk_id for h in plain] == ["txt", "fig"] and plain[1].score == pytest.approx(0.025)
    # Negative (L2-style) scores are still promoted, never demoted.
    assert boost_figures([row("a", -1.0), row("b", -1.2, "figure")], 1.35)[0]["chunk_id"] == "b"


def test_scripted_rerank_reorders_and_skips_visual(embedder: Embedder) -> None:
    store = FakeStore([row("a", 0.9), row("b", 0.8), row("c", 0.7)])
    scorer = ScriptedReranker({"a": 0.1, "b": 0.5, "c": 0.9})
    r = Retriever(Config(), store=store, embedder=embedder, reranker=scorer)  # type: ignore[arg-type]
    res = r.search("which part?", k=2, rerank=True)
    assert [h.chunk_id for h in res.hits] == ["c", "b"] and res.hits[0].score == pytest.approx(0.9)
    assert scorer.calls[0][1][0] == "B\na"  # breadcrumb + text is what the cross-encoder reads
    assert res.timings_ms["rerank"] > 0
    assert [h.chunk_id for h in r.search("which part?", k=2).hits] == ["a", "b"]  # cfg.retrieval.rerank is off
    scorer.calls.clear()
    r.search("which figure shows it?", k=2, rerank=True)
    assert scorer.calls == []
    assert store.calls[0]["limit"] == Config().retrieval.candidates


def test_rerank_without_model_is_a_clear_error(embedder: Embedder) -> None:
    r = Retriever(Config(), store=FakeStore([row("a", 1.0)]), embedder=embedder)  # type: ignore[arg-type]
    with pytest.raises(RerankerUnavailable, match="reranker_model"):
        r.search("which part?", rerank=True)
    cfg = Config()
    cfg.retrieval.rerank = True
    with pytest.raises(RerankerUnavailable):
        Retriever(cfg, store=FakeStore([]), embedder=embedder).search("q")  # type: ignore[arg-type]
    with pytest.raises(RerankerUnavailable, match="not a local folder"):
        CrossEncoderReranker("/nonexistent/model")


def tiny_cross_encoder(path: Path) -> Path:
    """A random BERT sequence classifier with a small WordPiece vocabulary, built offline."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification, BertTokenizerFast

    words = sorted({w.strip(".,:;?!()").lower() for _, t in CORPUS for w in t.split()} | {"what", "is", "on"})
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *[w for w in words if w]]
    path.mkdir(parents=True, exist_ok=True)
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    BertTokenizerFast(vocab_file=str(path / "vocab.txt")).save_pretrained(str(path))
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128, num_labels=1)
    BertForSequenceClassification(config).save_pretrained(str(path))
    return path


def test_real_cross_encoder_class(tmp_path: Path, cfg: Config, store: ChunkStore, embedder: Embedder) -> None:
    model_dir = tiny_cross_encoder(tmp_path / "ce")
    r = retriever(cfg, store, embedder, reranker_model=str(model_dir), rerank=True, candidates=9)
    res = r.search(CODE_QUESTION, k=9)
    assert len(res.hits) == 9 and res.timings_ms["rerank"] > 0
    scores = [h.score for h in res.hits]
    assert scores == sorted(scores, reverse=True)
    # The hit scores are the cross-encoder's own, on (question, breadcrumb + text).
    direct = CrossEncoderReranker(str(model_dir)).score(CODE_QUESTION, [f"{h.breadcrumb}\n{h.text}" for h in res.hits])
    assert np.allclose(direct, scores, atol=1e-5)


def test_bad_arguments(cfg: Config, store: ChunkStore, embedder: Embedder) -> None:
    r = retriever(cfg, store, embedder)
    with pytest.raises(ValueError):
        r.search("  ")
    with pytest.raises(ValueError):
        r.search("q", k=0)


def test_search_many_matches_search_and_groups_by_filter(cfg: Config, store: ChunkStore, embedder: Embedder) -> None:
    r = retriever(cfg, store, embedder, result_cache_size=0)  # each search below reaches the store
    queries = [
        Query("How do I mount the controller on a rail?", k=3),
        Query(CODE_QUESTION, k=9, filters=QueryFilters(doc_id="docA")),
        Query("controller", k=9, filters=QueryFilters(doc_id="docB")),
        Query("What is the warranty?", k=2),
    ]
    calls = []
    search_batch = store.search_batch

    def spy(dense, texts, **kw):
        calls.append(list(texts))
        return search_batch(dense, texts, **kw)

    r._store = type("Spy", (), {"search_batch": staticmethod(spy), "fetch": store.fetch,  # type: ignore[assignment]
                                "query_rows": store.query_rows})()
    batch = r.search_many(queries)
    r._store = store
    # One call per leg (dense, BM25) per filter group; the two unfiltered questions share their calls.
    assert len(calls) == 6 and sorted(map(len, calls)) == [1, 1, 1, 1, 2, 2]
    for q, res in zip(queries, batch):
        assert not isinstance(res, Exception)
        one = r.search(q.question, k=q.k, filters=q.filters)
        # Same hits and ranking, scores to float32 precision, tied hits in either order (tests/ranking.py).
        assert_same_ranking(res.hits, one.hits, skip=("rank",))
        assert len(res.hits) <= q.k
        assert res.batch_size == 4 and res.timings_ms["embed"] > 0
    assert {h.doc_id for h in batch[2].hits} == {"docB"}


def test_search_many_keeps_errors_in_their_slot(embedder: Embedder) -> None:
    store = FakeStore([row("a", 0.9), row("b", 0.8)])
    r = Retriever(Config(), store=store, embedder=embedder)  # type: ignore[arg-type]
    out = r.search_many([Query("  "), Query("which part?", k=1), Query("q", k=0), Query("which part?", rerank=True)])
    assert isinstance(out[0], ValueError) and isinstance(out[2], ValueError)
    assert isinstance(out[3], RerankerUnavailable)
    assert [h.chunk_id for h in out[1].hits] == ["a"]  # type: ignore[union-attr]
    assert all(c["texts"] == ["which part?"] for c in store.calls)  # failed questions cost no search
    assert r.search_many([]) == []


def test_query_embedding_cache_is_an_lru(embedder: Embedder) -> None:
    cfg = Config()
    cfg.retrieval.query_cache_size = 2
    cfg.retrieval.result_cache_size = 0  # the embedding cache alone: a cached answer would skip embedding altogether
    r = Retriever(cfg, store=FakeStore([row("a", 1.0)]), embedder=embedder)  # type: ignore[arg-type]
    encoded: list[list[str]] = []
    real = embedder.encode

    class Counting:
        dim = embedder.dim

        def encode(self, texts: list[str]) -> np.ndarray:
            encoded.append(list(texts))
            return real(texts)

    r._embedder = Counting()  # type: ignore[assignment]
    r.search_many([Query("alpha"), Query("beta"), Query("alpha")])
    r.search("alpha")
    r.search("gamma")  # evicts beta, the least recently used
    r.search("beta")
    assert encoded == [["alpha", "beta"], ["gamma"], ["beta"]]
    assert np.allclose(r._embed(["alpha"])[0], real(["alpha"])[0])


# -- the adaptive hybrid fetch plan: IDs and scores per leg, fused, then the needed rows' fields in one call --------
class Spy:
    """The real store, recording each search's ``fields`` and each fetch's IDs; ``lite`` says which kind of store the
    retriever sees (Milvus Lite reads every field of a hit anyway, a server does not)."""

    def __init__(self, store: ChunkStore, lite: bool) -> None:
        self.store, self.lite, self.searches, self.fetches = store, lite, [], []

    def search_batch(self, dense, texts, **kw):
        self.searches.append((kw.get("mode"), kw.get("fields")))
        return self.store.search_batch(dense, texts, **kw)

    def fetch(self, chunk_ids, fields=None):
        self.fetches.append(list(chunk_ids))
        return self.store.fetch(chunk_ids, fields)

    def query_rows(self, expr, params, fields, limit):  # short hits' followers (chunker/index/context.py)
        return self.store.query_rows(expr, params, fields, limit)


def reference(cfg: Config, store: ChunkStore, embedder: Embedder, question: str, threshold: float) -> list[dict]:
    """The candidates as the path before the fetch plan made them: both legs with every field, fused, demoted."""
    from chunker.index.fusion import demote_duplicates, fuse_adaptive

    vec = embedder.encode([question])
    dense = store.search_batch(vec, [question], mode="dense", limit=cfg.retrieval.candidates)[0]
    sparse = store.search_batch(None, [question], mode="sparse", limit=cfg.retrieval.candidates)[0]
    return demote_duplicates(fuse_adaptive(dense, sparse), threshold)


def answer(hits: list[Hit]) -> list[tuple]:
    return [(h.chunk_id, h.score, h.text, h.breadcrumb, h.source, h.doc_id, h.page_start, h.modality) for h in hits]


@pytest.mark.parametrize("lite", [True, False])
@pytest.mark.parametrize("threshold", [0.5, 1.0])  # the duplicate step on (reads every candidate's text) / off
def test_fetch_plan_reads_only_the_fields_it_needs(cfg: Config, store: ChunkStore, embedder: Embedder,
                                                   threshold: float, lite: bool) -> None:
    r = retriever(cfg, store, embedder, duplicate_threshold=threshold, result_cache_size=0)
    spy = Spy(store, lite)
    r._store = spy  # type: ignore[assignment]
    res = r.search(CODE_QUESTION, k=2)
    ref = reference(cfg, store, embedder, CODE_QUESTION, threshold)
    # The same answer as fetching every field in both legs: ranks, scores and every field of each hit.
    assert answer(res.hits) == [(x["chunk_id"], x["score"], x["text"], x["breadcrumb"], x["source"], x["doc_id"],
                                 x["page_start"], x["modality"]) for x in ref[:2]]
    if lite or threshold < 1:
        # Lite reads whole rows for each hit whatever is asked, and demotion reads every candidate's text: the
        # legs bring the fields, no second call.
        assert sorted(spy.searches) == [("dense", None), ("sparse", None)] and spy.fetches == []
        assert "fetch" not in res.split_ms
    else:  # a server, nothing reads the candidates: IDs, scores and doc_id per leg (fusion's document gate reads
        # it), then the top k's fields by key
        assert sorted(spy.searches) == [("dense", ["doc_id"]), ("sparse", ["doc_id"])]
        assert spy.fetches == [[x["chunk_id"] for x in ref[:2]]] and "fetch" in res.split_ms
    assert set(res.split_ms) >= {"dense", "sparse", "legs", "fuse", "duplicates"}
    # A visual question re-sorts every candidate by modality: every candidate comes with its fields.
    spy.searches.clear()
    spy.fetches.clear()
    visual = r.search("Show the block diagram of the controller", k=1)
    assert spy.fetches == [] and sorted(spy.searches) == [("dense", None), ("sparse", None)] and visual.hits[0].text


def test_legs_concurrent_or_in_turn_give_the_same_answer(cfg: Config, store: ChunkStore, embedder: Embedder) -> None:
    questions = [CODE_QUESTION, "How do I mount the controller on a rail?", "warranty claims"]
    answers = []
    for concurrent in (True, False):
        r = retriever(cfg, store, embedder, concurrent_legs=concurrent, result_cache_size=0)
        answers.append([[(h.chunk_id, h.score) for h in res.hits]  # type: ignore[union-attr]
                        for res in r.search_many([Query(q, k=5) for q in questions])])
    assert answers[0] == answers[1] and all(answers[0])


def test_one_store_call_for_the_fusions_inside_milvus(cfg: Config, store: ChunkStore, embedder: Embedder) -> None:
    # Dense, BM25 alone and RRF / weighted hybrid need no client-side fusion: their one call returns the fields.
    for mode, fusion in (("dense", "adaptive"), ("sparse", "adaptive"), ("hybrid", "rrf")):
        r = retriever(cfg, store, embedder, mode=mode, fusion=fusion, result_cache_size=0)
        spy = Spy(store, lite=False)
        r._store = spy  # type: ignore[assignment]
        hits = r.search("How do I mount the controller on a rail?", k=3).hits
        assert spy.searches == [(mode, None)] and spy.fetches == [] and hits[0].text
