"""Request and response bodies of the query endpoint.

They are the public HTTP contract (they shape /openapi.json), so they are strict: unknown fields are rejected and
types are not coerced ("5" is not a k, "yes" is not a bool). Filter validation, including rejection of values that
could smuggle a Milvus expression, belongs to :class:`chunker.index.filters.QueryFilters`; this module only embeds it.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, StrictStr, model_validator

from chunker.index.filters import QueryFilters

_SURROGATE = re.compile("[\ud800-\udfff]")


def _unpaired_surrogate(value: Any, where: str) -> str | None:
    """Where in a JSON body a string holds an unpaired UTF-16 surrogate: valid JSON (a lone ``\\ud800`` escape),
    but not text; it would fail deep inside the tokenizer or the store instead of here."""
    if isinstance(value, str):
        return where if _SURROGATE.search(value) else None
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        found = _unpaired_surrogate(item, f"{where}.{key}")
        if found:
            return found
    return None


class QueryRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _text_only(cls, data: Any) -> Any:
        where = _unpaired_surrogate(data, "body")
        if where:
            raise ValueError(f"{where} holds an unpaired UTF-16 surrogate escape (e.g. \\ud800): not valid text")
        return data

    query: StrictStr = Field(..., description="The question; not empty, at most serve.max_query_chars characters.")
    k: StrictInt = Field(5, ge=1, le=50, description="Hits to return.")
    filters: QueryFilters | None = Field(None, description="Restrict the search by document, source, modality or pages.")
    rerank: StrictBool | None = Field(None, description="Rerank with the cross-encoder; null: the configured default.")


class HitOut(BaseModel):
    rank: int = Field(..., description="1-based position in the answer.")
    score: float = Field(..., description="Score after fusion, rerank and boosts (higher is better).")
    chunk_id: str
    text: str = Field(..., description="Chunk text, prefixed with its heading chain.")
    breadcrumb: str = Field(..., description="Heading path of the chunk, e.g. 'Guide > Install > Linux'.")
    source: str = Field(..., description="Document path relative to the ingested input root.")
    doc_id: str
    page_start: int = Field(..., description="First page of the chunk (1-based).")
    page_end: int = Field(..., description="Last page of the chunk (1-based, inclusive).")
    modality: Literal["text", "table", "figure"]
    identity: str = Field("", description="The document's identity line (title or issuer, kind, period).")
    context: str = Field(
        "", description="For a short hit: the chunks that follow it in its section, verbatim, in order (read it "
        "after text); empty otherwise (retrieval.context_below_chars)."
    )
    context_page_end: int = Field(
        0, description="The last page the context reaches (1-based; 0 without context): text and context together "
        "span page_start to max(page_end, context_page_end)."
    )


class Timings(BaseModel):
    embed: float = Field(0.0, description="Query embedding, ms.")
    search: float = Field(0.0, description="Milvus search (all legs), ms.")
    rerank: float = Field(0.0, description="Cross-encoder rerank and boosts, ms.")
    context: float = Field(0.0, description="Looking up the followers of short hits (their context), ms.")
    total: float = Field(0.0, description="Whole request inside the replica, ms.")
    queue: float = Field(0.0, description="Waiting for a batch to start (the previous batch still running), ms.")
    wait: float = Field(
        0.0, description="Rest of total: waiting for the batch to form and run, the batch's other filter groups, "
        "request handling, ms."
    )


class QueryResponse(BaseModel):
    query: str
    k: int
    mode: str = Field(..., description="Retrieval mode used: dense, sparse or hybrid.")
    rerank: bool = Field(..., description="Whether the cross-encoder rerank was asked for.")
    hits: list[HitOut]
    timings_ms: Timings
    batch_size: int = Field(1, description="Queries the replica embedded and searched together with this one.")
    cached: bool = Field(
        False, description="Answered from the replica's result cache (the same question, filters, k and rerank "
        "within retrieval.result_cache_ttl_s): no embedding, no search."
    )


class ErrorDetail(BaseModel):
    field: str = Field(..., description="Dotted location of the offending input ('body.k', 'body.filters.doc_id').")
    message: str


class ErrorResponse(BaseModel):
    error: str = Field(..., description="Machine-readable kind: invalid_request, store_unavailable, not_ready, internal.")
    message: str = Field(..., description="What went wrong, for a person.")
    details: list[ErrorDetail] = Field(default_factory=list)


class HealthResponse(BaseModel):
    status: Literal["ok", "not_ready"]
    checks: dict[str, str] = Field(default_factory=dict, description="Per-check outcome: 'ok' or the reason it failed.")
