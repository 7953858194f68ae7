"""Query filters that cannot be turned into injections: refused values, templates, rendering for Milvus Lite, and
the rows a filtered search on Lite selects."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pydantic import ValidationError
from store_support import filter_store_at, ids, vecs  # tests/ is on sys.path under pytest

from chunker.index.filters import FilterError, QueryFilters, build_filter, escape_like, render_filter
from chunker.index.store import ChunkStore


@pytest.fixture(scope="module")
def filter_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChunkStore]:
    with filter_store_at(tmp_path_factory.mktemp("milvus")) as s:
        yield s


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
