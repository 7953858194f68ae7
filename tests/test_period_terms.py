"""A year glued to its period prefix ("FY2022") split apart in the BM25 query: the rule, and a real Milvus Lite
collection where only the split query finds the filing of the year asked; a quarter glued in a file name
("ACME_2023Q2_10Q.pdf") found by a question that writes it apart ("Q2 of FY2023")."""

from __future__ import annotations

import hashlib

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


def _chunk(i: int, year: int, doc: str = "") -> Chunk:
    doc = doc or f"annual{year}"
    crumb = "Results of Operations"
    text = f"{crumb}\n\nNet revenue for fiscal {year} rose on unit growth in every region ({i})."
    return Chunk(chunk_id=hashlib.md5(f"{doc}:{i}".encode()).hexdigest(), doc_id=doc, element_ids=[f"{doc}:{i}"],
                 text=text, breadcrumb=crumb, page_start=1, page_end=1, modality="text", planner="t", config_hash="h",
                 source=f"{doc}.pdf", source_uri=f"/x/{doc}.pdf")


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


def test_a_quarter_glued_in_the_file_name_is_found_by_a_question_that_writes_it_apart(tmp_path):
    """Two quarterly filings of one year say the same words; only their file names tell the quarter, glued to
    the year ("2023Q2"). The question asks for "Q2 of FY2023": the name's split words rank that quarter first."""
    from chunker.index.collection import source_words

    assert source_words("ACME_2023Q2_10Q.pdf") == "ACME 2023Q2 2023 Q2 10Q 10 Q"
    assert source_words("Airbus A350.pdf") == "Airbus A350"  # a code that starts with letters stays whole
    chunks = [_chunk(i, 2023, doc=f"ACME_2023{q}_10Q") for q in ("Q2", "Q3") for i in range(3)]
    cfg = Config.model_validate({"milvus": {"uri": str(tmp_path / "m.db")}, "retrieval": {"mode": "sparse"}})
    store = ChunkStore(cfg.milvus, dim=4)
    try:
        store.upsert(chunks, np.random.default_rng(0).standard_normal((len(chunks), 4)).astype(np.float32))
        hits = Retriever(cfg, store=store).search("How did net revenue change in Q2 of FY2023 (10-Q)?", k=6).hits
        assert [h.doc_id for h in hits] == ["ACME_2023Q2_10Q"] * 3 + ["ACME_2023Q3_10Q"] * 3
        assert hits[2].score > hits[3].score
    finally:
        store.close()
