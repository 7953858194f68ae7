"""Common query words left out of the BM25 query: the sample, the pruning rule, and a real Milvus Lite collection
answering the pruned query with the same ranking."""

from __future__ import annotations

import math

import numpy as np
import pytest

from chunker.config import Config
from chunker.index.common_terms import REFRESH_S, CommonTerms, common_words, prune
from chunker.index.retrieval import Query, Retriever
from chunker.index.store import ChunkStore
from chunker.types import Chunk


def test_common_words_are_those_in_the_share_of_texts():
    texts = [f"Manual {i} says part{i} fits" for i in range(40)] + ["manual only"] * 5
    words = common_words(texts, 0.9)
    assert words == {"manual"}, "in 45 of 45; 'says' and 'fits' are in 40 of 45 (0.89)"
    assert common_words(texts, 0.85) == {"manual", "says", "fits"}
    assert common_words(texts[:10], 0.5) == frozenset(), "too few texts to tell"
    assert common_words(texts, 1.0) == frozenset(), "1 turns it off"


def test_prune_drops_whole_common_words_only():
    common = frozenset({"manual", "s", "k"})
    assert prune("What does the Manual say about the pump?", common) == "What does the say about the pump?"
    assert prune('"manual," pump', common) == "pump", "edge punctuation aside"
    # Tokens the index splits its own way are kept whole: dropping "s" from "U.S." would change another word.
    assert prune("U.S. 10-K manual", common) == "U.S. 10-K"
    assert prune("Manual", common) == "Manual", "a question of common words only is sent whole"
    assert prune("pump", frozenset()) == "pump"


def test_common_terms_sample_once_then_on_write_or_after_a_while():
    calls = []
    now = [0.0]

    def sample(n: int) -> list[str]:
        calls.append(n)
        return ["alpha beta"] * 30

    terms = CommonTerms(sample, 0.9, clock=lambda: now[0])
    assert terms.prune(["alpha gamma"], generation=0) == ["gamma"]
    terms.prune(["alpha"], generation=0)
    assert len(calls) == 1, "sampled once"
    terms.prune(["alpha"], generation=1)
    assert len(calls) == 2, "a write through this process samples again"
    now[0] = REFRESH_S + 1
    terms.prune(["alpha"], generation=1)
    assert len(calls) == 3, "and so does time (other processes' writes)"


def test_a_failed_sample_leaves_queries_whole():
    def sample(n: int) -> list[str]:
        raise RuntimeError("store down")

    assert CommonTerms(sample, 0.9).prune(["alpha beta"], 0) == ["alpha beta"]


def _chunks(n: int) -> list[Chunk]:
    rng = np.random.default_rng(5)
    vocab = [f"w{i}" for i in range(300)]
    out = []
    for i in range(n):
        words = " ".join(rng.choice(vocab, size=30))
        doc = f"doc{i // 10}"
        out.append(Chunk(chunk_id=f"{i:032x}", doc_id=doc, element_ids=[f"{doc}:{i}"],
                         text=f"Handbook > Part {i % 10}\n\nhandbook {words}", breadcrumb=f"Handbook > Part {i % 10}",
                         page_start=1, page_end=1, modality="text", planner="t", config_hash="h",
                         source=f"{doc}.pdf", source_uri=f"/x/{doc}.pdf"))
    return out


@pytest.mark.slow
def test_a_lite_collection_ranks_the_pruned_query_as_the_whole_one(tmp_path):
    """On a real Milvus Lite collection: the sample finds the word every chunk holds, and BM25 scores without it
    differ from the whole query's by at most that word's weight: idf = ln(1 + 0.5 / 400.5) = 0.00125 times at most
    k1 + 1 = 2.2 for its frequency. Each chunk's score moves by that much at most, so the k-th best score does too;
    chunks within it of each other may change places (random texts tie often), nothing else can."""
    chunks = _chunks(400)
    base = Config.model_validate({"milvus": {"uri": str(tmp_path / "m.db")}, "retrieval": {"mode": "sparse"}})
    off = base.model_copy(update={"retrieval": base.retrieval.model_copy(update={"common_term_share": 1.0})})
    store = ChunkStore(base.milvus, dim=4)
    try:
        vecs = np.random.default_rng(1).standard_normal((len(chunks), 4)).astype(np.float32)
        store.upsert(chunks, vecs)
        sample = store.sample_search_texts(100)
        assert 10 <= len(sample) <= 100, "every 16th row of 400 (hex IDs ending in 0)"
        words = common_words(sample, 0.9)
        assert "handbook" in words and "w7" not in words
        questions = [Query(question=f"what does the handbook say about w{i} w{i + 7} w{i + 50}", k=10)
                     for i in range(0, 60, 6)]
        assert all("handbook" not in prune(q.question, words) for q in questions)
        with_pruning = Retriever(base, store=store).search_many(questions)
        without = Retriever(off, store=store).search_many(questions)
        bound = 2.2 * math.log(1 + 0.5 / 400.5) + 1e-4
        for a, b in zip(with_pruning, without):
            assert len(a.hits) == len(b.hits) == 10
            for ha, hb in zip(a.hits, b.hits):
                assert abs(ha.score - hb.score) <= bound, (ha.score, hb.score)
            overlap = len({h.chunk_id for h in a.hits} & {h.chunk_id for h in b.hits})
            assert overlap >= 5, "the same chunks, give or take near ties at the cut"
    finally:
        store.close()
