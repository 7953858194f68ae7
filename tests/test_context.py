"""Small-to-big reading (chunker/index/context.py): a short hit comes with the chunks that follow it in its section,
verbatim and in order, on a real Milvus Lite collection."""
from __future__ import annotations

import numpy as np
import pytest

from chunker.config import Config
from chunker.index.context import body, follow, ordinal
from chunker.index.retrieval import Retriever
from chunker.index.store import ChunkStore
from chunker.types import Chunk

INTRO = "The following table sets forth the notional amounts of our derivative instruments:"
SWAPS = "Cross currency swaps | In millions | At December 31, 2021: 32,502; At December 31, 2020: 26,288. " * 3
FORWARDS = "Foreign exchange forwards | In millions | At December 31, 2021: 932; At December 31, 2020: 1,405. " * 4
OTHER = "Pensions are funded by the company; nothing here is about notional amounts of derivative swaps. " * 3


def _chunk(doc: str, n: list[int], crumb: str, body_text: str, page: int) -> Chunk:
    return Chunk(chunk_id=f"{doc}-{n[0]:04d}".ljust(32, "0"), doc_id=doc, element_ids=[f"{doc}:{i}" for i in n],
                 text=f"{crumb}\n\n{body_text}" if crumb else body_text, breadcrumb=crumb, page_start=page,
                 page_end=page, modality="text", planner="t", config_hash="h", source=f"{doc}.pdf",
                 source_uri=f"/x/{doc}.pdf")


def _corpus() -> list[Chunk]:
    rates = "Annual Report > Derivative Instruments"
    return [
        _chunk("a", [0, 1], rates, INTRO, 85),          # heading + intro: short
        _chunk("a", [2, 3], rates, SWAPS, 85),
        _chunk("a", [4, 5], rates, FORWARDS, 86),       # same section, next page
        _chunk("a", [6, 7], "Annual Report > Pensions", OTHER, 86),
        _chunk("b", [0], "Annual Report > Derivative Instruments", "Notional amounts of derivatives: none.", 3),
        _chunk("b", [1], "Annual Report > Leases", "Lease notional amounts are not derivative instruments. " * 2, 3),
    ]


@pytest.fixture()
def store(tmp_path):
    cfg = Config.model_validate({"milvus": {"uri": str(tmp_path / "m.db")}})
    s = ChunkStore(cfg.milvus, dim=4)
    chunks = _corpus()
    s.upsert(chunks, np.random.default_rng(3).standard_normal((len(chunks), 4)).astype(np.float32))
    yield s
    s.close()


def _retriever(store: ChunkStore, **retrieval: object) -> Retriever:
    cfg = Config.model_validate({"milvus": {"uri": "unused"}, "retrieval": {"mode": "sparse", **retrieval}})
    return Retriever(cfg, store=store)


def test_helpers_read_element_ordinals_and_bodies():
    assert ordinal("abc:12") == ("abc", 12) and ordinal("a:b:3") == ("a:b", 3)
    assert ordinal("no-number") is None and ordinal("x:") is None
    assert body({"text": "A > B\n\nrows", "breadcrumb": "A > B"}) == "rows"
    assert body({"text": "rows", "breadcrumb": ""}) == "rows"


def test_a_short_hit_is_read_with_what_follows_it_in_its_section(store):
    hits = _retriever(store).search("notional amounts of derivative instruments table", k=6).hits
    intro = next(h for h in hits if h.chunk_id.startswith("a-0000"))
    # Both followers, verbatim and in order (the first alone is under 600 with the intro), never the next section.
    assert intro.context == f"{SWAPS}\n\n{FORWARDS}"
    assert intro.context_chunk_ids == [_corpus()[1].chunk_id, _corpus()[2].chunk_id]
    assert intro.reading_text == f"{intro.text}\n\n{SWAPS}\n\n{FORWARDS}"
    assert intro.text.endswith(INTRO) and (intro.page_start, intro.page_end) == (85, 85), "the hit itself unchanged"
    # The context runs on to page 86: what the reader gets spans 85-86, and says so.
    assert intro.context_page_end == 86 and intro.reading_page_end == 86
    for h in hits:
        if len(h.text) >= 250:
            assert h.context == "", "a hit long enough is read alone"
    short_b = next(h for h in hits if h.chunk_id.startswith("b-0000"))
    assert short_b.context == "", "the chunk after it opens another section: not its context"
    assert short_b.context_page_end == 0 and short_b.reading_page_end == short_b.page_end == 3
    # The whole answer is one store query more, not one per hit: the ranking is the same with context off.
    off = _retriever(store, context_below_chars=0).search("notional amounts of derivative instruments table", k=6)
    assert [h.chunk_id for h in off.hits] == [h.chunk_id for h in hits]
    assert all(h.context == "" for h in off.hits)


def test_context_stops_once_the_hit_and_it_hold_enough(store):
    hits = _retriever(store, context_to_chars=200).search("notional amounts derivative instruments", k=6).hits
    intro = next(h for h in hits if h.chunk_id.startswith("a-0000"))
    assert intro.context == SWAPS, "the first whole follower takes it past 200 characters"


def test_a_hit_without_element_ids_is_read_alone(tmp_path):
    cfg = Config.model_validate({"milvus": {"uri": str(tmp_path / "m.db")}})
    s = ChunkStore(cfg.milvus, dim=4)
    try:
        odd = _chunk("c", [0], "X", "Notional amounts, briefly.", 1)
        odd.element_ids = []
        s.upsert([odd, _chunk("c", [1], "X", SWAPS, 1)], np.ones((2, 4), dtype=np.float32))
        hits = _retriever(s).search("notional amounts", k=2).hits
        assert all(h.context == "" for h in hits)
    finally:
        s.close()


class NoQueries:
    def query_rows(self, *a: object, **kw: object) -> list[dict]:
        raise AssertionError("the candidates held every answer: no store query")


def _row(c: Chunk) -> dict:
    return {"chunk_id": c.chunk_id, "doc_id": c.doc_id, "breadcrumb": c.breadcrumb, "text": c.text,
            "element_ids": c.element_ids, "page_start": c.page_start, "page_end": c.page_end}


def test_followers_among_the_candidates_need_no_store_query():
    intro, swaps, forwards, pensions = (_row(c) for c in _corpus()[:4])
    # The intro's followers are candidates of the same search: read from there.
    got = follow(NoQueries(), [intro], 250, 600, candidates=[pensions, forwards, swaps])
    assert got[intro["chunk_id"]].text == f"{SWAPS}\n\n{FORWARDS}"
    # A short hit whose next chunk (a candidate) opens another section has no context, and that needs no query.
    short_forwards = dict(forwards, text="Annual Report > Derivative Instruments\n\nShort.")
    assert follow(NoQueries(), [short_forwards], 250, 600, candidates=[pensions]) == {}
    # IDs-only candidates (no text) are not read as followers.
    ids_only = {"chunk_id": swaps["chunk_id"], "doc_id": "a", "score": 1.0}
    with pytest.raises(AssertionError, match="no store query"):
        follow(NoQueries(), [intro], 250, 600, candidates=[ids_only])
