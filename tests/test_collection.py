"""The collection's row of a chunk (clipped, valid UTF-8, the BM25 text) and its analyzers: no Milvus needed."""

from __future__ import annotations

import pytest
from store_support import make_chunks, vecs  # tests/ is on sys.path under pytest

from chunker.errors import StoreError
from chunker.index.collection import analyzer_params, chunk_row
from chunker.types import Chunk


def test_oversized_text_is_clipped_on_a_character_boundary() -> None:
    chunk = make_chunks(1, text="é" * 40_000)[0]
    row = chunk_row(chunk, vecs(1)[0])
    assert len(row["text"].encode()) <= 65535 and row["text"].startswith("éé")


def test_analyzer_params() -> None:
    assert analyzer_params("english", lite=True)["tokenizer"] == "standard"
    assert analyzer_params("multilingual", lite=False)["tokenizer"] == "icu"
    assert analyzer_params("multilingual", lite=True)["tokenizer"] == "standard"
    assert analyzer_params("chinese", lite=False)["tokenizer"] == "jieba"
    with pytest.raises(StoreError):
        analyzer_params("klingon", lite=True)


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
