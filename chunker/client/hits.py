"""What every searcher of :mod:`chunker.client` shares: its interface, the filters it takes and what a hit says
beyond its text (the metadata the framework adapters attach)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from pydantic import ValidationError

from chunker.index.filters import FilterError, QueryFilters
from chunker.index.retrieval import Hit

Filters = QueryFilters | Mapping[str, Any] | None


@runtime_checkable
class Searcher(Protocol):
    def search(self, query: str, k: int = 5, filters: Filters = None,
               rerank: bool | None = None) -> list[Hit]: ...


@runtime_checkable
class AsyncSearcher(Searcher, Protocol):
    async def asearch(self, query: str, k: int = 5, filters: Filters = None,
                      rerank: bool | None = None) -> list[Hit]: ...


def as_filters(filters: Filters) -> QueryFilters | None:
    """``filters`` as the endpoint's own filter model (a dict is checked here, before any request): a wrong key or
    value is a :class:`FilterError` naming it."""
    if filters is None or isinstance(filters, QueryFilters):
        return filters
    try:
        return QueryFilters.model_validate(dict(filters))
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'filters'}: {e['msg']}" for e in exc.errors())
        raise FilterError(f"invalid filters {dict(filters)!r}: {problems}") from None


# Keys a framework should not put in front of the text it hands a model: the text itself, and scores or IDs.
NOT_FOR_THE_MODEL = ("text", "context", "score", "rank", "chunk_id", "doc_id", "context_page_end")


def hit_metadata(hit: Hit) -> dict[str, Any]:
    """A hit's metadata, flat JSON values: where it comes from (source, doc_id, pages, breadcrumb, the document's
    identity), how it ranked, and the chunk's own text and its context apart (a framework document's content is the
    two together, :attr:`Hit.reading_text`)."""
    return {
        "chunk_id": hit.chunk_id, "score": float(hit.score), "rank": hit.rank, "source": hit.source,
        "doc_id": hit.doc_id, "page_start": hit.page_start, "page_end": hit.page_end,
        "breadcrumb": hit.breadcrumb, "identity": hit.identity, "modality": hit.modality, "text": hit.text,
        "context": hit.context, "context_page_end": hit.context_page_end,
    }
