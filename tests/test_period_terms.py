"""A year glued to its period prefix ("FY2022") split apart in the BM25 query: the rule, and a real Milvus Lite
collection where only the split query finds the filing of the year asked."""

from __future__ import annotations

import numpy as np

from chunker.config import Config
from chunker.index.period_terms import split_periods
from chunker.index.retrieval import Retriever
from chunker.index.store import ChunkStore
from chunker.types import Chunk


def test_period_prefixes_and_four_digit_years_are_split_nothing_else():
    assert split_periods("Revenue from FY2016 to FY2017?") == "Revenue from FY 2016 to FY 2017?"
    assert split_periods("Q22023 margin, h12024 and 3Q2021") == "Q2 2023 margin, h1 2024 and 3Q 2021"
    assert split_periods("FY'2023") == "FY 2023"
    # Model numbers, two-digit years, ranges and words that merely end in a year stay as written.
    for kept in ("A2023 pump", "FY22 outlook", "FY2022-23", "Q52023", "abcFY2022", "MAX2020", "FY20234"):
        assert split_periods(kept) == kept


def _chunk(i: int, year: int) -> Chunk:
    doc = f"annual{year}"
    crumb = "Results of Operations"
    text = f"{crumb}\n\nNet revenue for fiscal {year} rose on unit growth in every region ({i})."
    return Chunk(chunk_id=f"{year}{i:028x}", doc_id=doc, element_ids=[f"{doc}:{i}"], text=text, breadcrumb=crumb,
                 page_start=1, page_end=1, modality="text", planner="t", config_hash="h", source=f"{doc}.pdf",
                 source_uri=f"/x/{doc}.pdf")


def test_the_bm25_leg_finds_the_year_only_when_it_is_split(tmp_path):
    """Two years' filings say the same words but the year; the question names one year as "FY2021". As one token
    it matches no chunk and both years tie; split, the asked year's chunks rank first."""
    chunks = [_chunk(i, y) for y in (2021, 2022) for i in range(3)]
    cfg = Config.model_validate({"milvus": {"uri": str(tmp_path / "m.db")}, "retrieval": {"mode": "sparse"}})
    off = cfg.model_copy(update={"retrieval": cfg.retrieval.model_copy(update={"split_period_tokens": False})})
    store = ChunkStore(cfg.milvus, dim=4)
    try:
        store.upsert(chunks, np.random.default_rng(0).standard_normal((len(chunks), 4)).astype(np.float32))
        question = "How did net revenue change in FY2021?"
        split = Retriever(cfg, store=store).search(question, k=3).hits
        assert [h.doc_id for h in split] == ["annual2021"] * 3
        glued = Retriever(off, store=store).search(question, k=6).hits
        scores = {h.doc_id: h.score for h in glued}
        assert len(scores) == 2 and abs(scores["annual2021"] - scores["annual2022"]) < 1e-6, \
            "as one token the year weighs nothing: both years' chunks score alike"
    finally:
        store.close()
