"""The result cache: a repeated question costs no embedding and no store call; a write, age or eviction ends an entry.

Against the real store (Milvus Lite) and the real MiniLM, with spies that count what reaches them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from chunker.config import Config
from chunker.index.embed import Embedder
from chunker.index.filters import QueryFilters
from chunker.index.result_cache import ResultCache, normalise_question
from chunker.index.retrieval import Query, Retriever
from chunker.index.store import ChunkStore
from chunker.types import Chunk

TEXTS = [
    "The pump resets when the red button is held for five seconds.",
    "Warranty claims need the receipt and the serial number.",
    "The X300 weighs 4.2 kg without its battery.",
    "Clean the filter every month with warm water.",
]


def chunk(i: int, text: str, doc: str = "docA") -> Chunk:
    return Chunk(chunk_id=f"c{i}", doc_id=doc, element_ids=[f"{doc}:{i}"], text=text, breadcrumb="Manual",
                 page_start=i + 1, page_end=i + 1, modality="text", planner="deterministic", config_hash="h",
                 source=f"{doc}.pdf")


@pytest.fixture(scope="module")
def embedder() -> Embedder:
    return Embedder(Config().embed)


@pytest.fixture()
def store(tmp_path: Path, embedder: Embedder) -> ChunkStore:
    cfg = Config()
    cfg.milvus.uri = str(tmp_path / "cache.db")
    s = ChunkStore(cfg.milvus, embedder.dim)
    chunks = [chunk(i, t) for i, t in enumerate(TEXTS)]
    s.upsert(chunks, embedder.encode([c.text for c in chunks]))
    yield s
    s.close()


class Counting:
    """Wraps the real store and embedder and counts the calls that reach them."""

    def __init__(self, store: ChunkStore, embedder: Embedder) -> None:
        self.store, self.embedder, self.calls = store, embedder, []
        self.dim = embedder.dim

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)  # generation, mark_changed, ...

    def search_batch(self, *a: Any, **kw: Any) -> Any:
        self.calls.append("search")
        return self.store.search_batch(*a, **kw)

    def fetch(self, *a: Any, **kw: Any) -> Any:
        self.calls.append("fetch")
        return self.store.fetch(*a, **kw)

    def encode(self, texts: list[str]) -> np.ndarray:
        self.calls.append("embed")
        return self.embedder.encode(texts)


def counted(store: ChunkStore, embedder: Embedder, **retrieval: Any) -> tuple[Retriever, Counting]:
    cfg = Config()
    cfg.milvus.uri = store.cfg.uri
    cfg.retrieval.query_cache_size = 0  # the embedding cache off: every miss of the result cache embeds
    for key, value in retrieval.items():
        setattr(cfg.retrieval, key, value)
    spy = Counting(store, embedder)
    return Retriever(cfg, store=spy, embedder=spy), spy  # type: ignore[arg-type]


def ids(res: Any) -> list[str]:
    return [h.chunk_id for h in res.hits]


def test_a_repeated_question_does_not_reach_the_store(store: ChunkStore, embedder: Embedder) -> None:
    r, spy = counted(store, embedder)
    first = r.search("How do I reset the pump?", k=2)
    assert ids(first)[0] == "c0" and not first.cached
    assert spy.calls.count("embed") == 1 and spy.calls.count("search") == 2  # the two legs
    spy.calls.clear()
    again = r.search("  How do I   reset the pump?\n", k=2)  # the same question, spaced differently
    assert again.cached and spy.calls == []
    assert [(h.chunk_id, h.score, h.text, h.page_start) for h in again.hits] == \
        [(h.chunk_id, h.score, h.text, h.page_start) for h in first.hits]
    assert again.timings_ms == {"embed": 0.0, "search": 0.0, "rerank": 0.0}
    # In a batch too: the cached question is answered in its slot, only the new one is searched.
    out = r.search_many([Query("How do I reset the pump?", k=2), Query("How heavy is the X300?", k=1)])
    assert out[0].cached and not out[1].cached and ids(out[1]) == ["c2"]  # type: ignore[union-attr]
    assert spy.calls.count("embed") == 1 and spy.calls.count("search") == 2


def test_what_changes_an_answer_is_in_the_key(store: ChunkStore, embedder: Embedder) -> None:
    r, spy = counted(store, embedder)
    r.search("How do I reset the pump?", k=2)
    for q in (Query("How do I reset the pump?", k=3),  # another k
              Query("How do I reset the pump?", k=2, filters=QueryFilters(doc_id="docA")),  # a filter
              Query("how do I reset the pump?", k=2)):  # case is kept: a cased analyzer or reranker may differ
        spy.calls.clear()
        (res,) = r.search_many([q])
        assert not res.cached and "search" in spy.calls  # type: ignore[union-attr]
    # The settings are in the key: the same retriever with another candidate count searches again.
    r.cfg.retrieval.candidates = 3
    spy.calls.clear()
    assert not r.search("How do I reset the pump?", k=2).cached and "search" in spy.calls


def test_a_write_through_the_store_invalidates(store: ChunkStore, embedder: Embedder) -> None:
    r, spy = counted(store, embedder)
    assert ids(r.search("How heavy is the X300?", k=1)) == ["c2"]
    assert r.search("How heavy is the X300?", k=1).cached
    new = chunk(9, "How heavy is the X300? The X300 weighs 4.2 kg; with its battery 5.1 kg.", doc="docB")
    store.upsert([new], embedder.encode([new.text]))  # the retriever's own store object: generation moves on
    spy.calls.clear()
    res = r.search("How heavy is the X300?", k=1)
    assert not res.cached and "search" in spy.calls and ids(res) == ["c9"]  # the new chunk, not the cached answer
    store.delete_doc("docB")
    assert ids(r.search("How heavy is the X300?", k=1)) == ["c2"]
    r.invalidate()
    assert not r.search("How heavy is the X300?", k=1).cached


def test_size_zero_turns_it_off(store: ChunkStore, embedder: Embedder) -> None:
    r, spy = counted(store, embedder, result_cache_size=0)
    r.search("Clean the filter", k=1)
    spy.calls.clear()
    assert not r.search("Clean the filter", k=1).cached and spy.calls.count("search") == 2


def test_errors_are_not_cached(embedder: Embedder, tmp_path: Path) -> None:
    cfg = Config()
    cfg.milvus.uri = str(tmp_path / "x.db")
    r = Retriever(cfg, store=None, embedder=embedder)
    for _ in range(2):
        (res,) = r.search_many([Query("which part?", rerank=True)])  # no reranker configured: an error each time
        assert isinstance(res, Exception)
    assert len(r._results) == 0
    r.close()


def test_entries_expire_and_the_least_recent_is_evicted() -> None:
    now = [100.0]
    cache: ResultCache[str] = ResultCache(size=2, ttl_s=30.0, clock=lambda: now[0])
    cache.put("a", 0, "A")
    cache.put("b", 0, "B")
    assert cache.get("a", 0) == "A"  # a is now the most recent
    cache.put("c", 0, "C")  # evicts b
    assert cache.get("b", 0) is None and cache.get("a", 0) == "A" and cache.get("c", 0) == "C"
    assert cache.get("a", 1) is None  # another generation: stale, and dropped
    assert cache.get("a", 0) is None and len(cache) == 1
    now[0] += 29.9
    assert cache.get("c", 0) == "C"
    now[0] += 0.2  # 30.1 s after it was made
    assert cache.get("c", 0) is None and len(cache) == 0
    off: ResultCache[str] = ResultCache(size=0, ttl_s=30.0)
    off.put("a", 0, "A")
    assert off.get("a", 0) is None and len(off) == 0


def test_normalised_question() -> None:
    assert normalise_question("  What is\tthe  X300?\n") == "What is the X300?"
    assert normalise_question("What is the X300?") != normalise_question("what is the x300?")
