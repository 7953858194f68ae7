"""A small client of the query endpoint (``POST /v1/query``, serving/app.py), over httpx.

    from chunker.client import EndpointClient

    with EndpointClient("http://127.0.0.1:8000") as client:
        for hit in client.search("How many days do I have to file a warranty claim?", k=3):
            print(hit.score, hit.source, hit.page_start, hit.breadcrumb)

Hits are :class:`chunker.index.retrieval.Hit`, what the endpoint answered field for field. Whatever the endpoint
refuses or cannot answer is an :class:`EndpointError` with its HTTP status, the endpoint's kind (``invalid_request``,
``store_unavailable``, ``not_ready``, ``rerank_unavailable``, ``internal``; ``unreachable`` when no answer came) and
its message, which names the offending field.
"""

from __future__ import annotations

import asyncio
from dataclasses import fields
from types import TracebackType
from typing import Any

import httpx

from chunker.client.hits import Filters, as_filters
from chunker.errors import ChunkerError
from chunker.index.retrieval import Hit

_HIT_FIELDS = frozenset(f.name for f in fields(Hit))


class EndpointError(ChunkerError):
    """The endpoint refused the query or could not answer it."""

    def __init__(self, message: str, *, status: int, kind: str) -> None:
        super().__init__(message)
        self.status = status  # HTTP status; 0 when no answer came (refused connection, timeout)
        self.kind = kind


class EndpointClient:
    """``base_url`` is the endpoint's root (``serve.host:serve.port``); ``timeout_s`` bounds each request."""

    def __init__(self, base_url: str = "http://127.0.0.1:8000", timeout_s: float = 30.0,
                 headers: dict[str, str] | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self._options: dict[str, Any] = {"base_url": self.base_url, "timeout": timeout_s, "headers": headers or {}}
        self._client = httpx.Client(**self._options)
        # An async client's connections belong to the event loop that opened them: one per loop, made on first use
        # in it (a script calling asyncio.run twice gets a fresh one the second time).
        self._aclient: httpx.AsyncClient | None = None
        self._aloop: asyncio.AbstractEventLoop | None = None

    def search(self, query: str, k: int = 5, filters: Filters = None, rerank: bool | None = None) -> list[Hit]:
        body = _body(query, k, filters, rerank)
        try:
            response = self._client.post("/v1/query", json=body)
        except httpx.HTTPError as exc:
            raise _unreachable(self.base_url, exc) from None
        return _hits(self.base_url, response)

    async def asearch(self, query: str, k: int = 5, filters: Filters = None,
                      rerank: bool | None = None) -> list[Hit]:
        body = _body(query, k, filters, rerank)
        loop = asyncio.get_running_loop()
        if self._aclient is None or self._aloop is not loop:
            self._aclient, self._aloop = httpx.AsyncClient(**self._options), loop
        try:
            response = await self._aclient.post("/v1/query", json=body)
        except httpx.HTTPError as exc:
            raise _unreachable(self.base_url, exc) from None
        return _hits(self.base_url, response)

    def ready(self) -> bool:
        """Whether the endpoint answers and can search (``GET /readyz``: its model loaded, its store reachable)."""
        try:
            return self._client.get("/readyz").status_code == 200
        except httpx.HTTPError:
            return False

    def close(self) -> None:
        self._client.close()

    async def aclose(self) -> None:
        if self._aclient is not None and self._aloop is asyncio.get_running_loop():
            await self._aclient.aclose()
        self._aclient = self._aloop = None

    def __enter__(self) -> "EndpointClient":
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _body(query: str, k: int, filters: Filters, rerank: bool | None) -> dict[str, Any]:
    checked = as_filters(filters)  # a wrong filter fails here, naming its field, before any request
    body: dict[str, Any] = {"query": query, "k": k}
    if checked is not None:
        body["filters"] = checked.model_dump(exclude_none=True)
    if rerank is not None:
        body["rerank"] = rerank
    return body


def _unreachable(base_url: str, exc: httpx.HTTPError) -> EndpointError:
    return EndpointError(f"query endpoint {base_url} did not answer: {type(exc).__name__}: {exc}", status=0,
                         kind="unreachable")


def _hits(base_url: str, response: httpx.Response) -> list[Hit]:
    try:
        payload = response.json()
    except ValueError:
        payload = None
    if response.status_code != 200:
        kind = payload.get("error", "http_error") if isinstance(payload, dict) else "http_error"
        message = payload.get("message", "") if isinstance(payload, dict) else response.text[:300]
        raise EndpointError(f"query endpoint {base_url} answered {response.status_code} ({kind}): {message}",
                            status=response.status_code, kind=kind)
    if not isinstance(payload, dict) or not isinstance(payload.get("hits"), list):
        raise EndpointError(f"query endpoint {base_url} answered 200 without a hit list: {response.text[:300]}",
                            status=response.status_code, kind="bad_answer")
    # Fields a newer endpoint adds are left out rather than refused: the client keeps working across versions.
    return [Hit(**{k: v for k, v in h.items() if k in _HIT_FIELDS}) for h in payload["hits"]]
