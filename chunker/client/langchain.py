"""A LangChain retriever over the query endpoint or a Milvus URI (``pip install 'vision-chunker[langchain]'``).

    from chunker.client.langchain import ChunkRetriever

    retriever = ChunkRetriever.from_endpoint("http://127.0.0.1:8000", k=5)
    docs = retriever.invoke("How many days do I have to file a warranty claim?")

Each ``Document`` is one hit: its content the chunk's text with its context (what a reader of the hit needs), its
``id`` the chunk ID, its metadata :func:`chunker.client.hits.hit_metadata` (source, doc_id, pages, breadcrumb,
identity, score, rank, the chunk's own text and its context apart). The fusion, the context and the identity stay
the project's: pointing a generic Milvus vector store at the collection would lose all three.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, field_validator

from chunker.client.endpoint import EndpointClient
from chunker.client.hits import AsyncSearcher, Searcher, as_filters, hit_metadata
from chunker.client.library import MilvusSearcher
from chunker.config import Config
from chunker.index.retrieval import Hit


def to_document(hit: Hit) -> Document:
    return Document(id=hit.chunk_id, page_content=hit.reading_text, metadata=hit_metadata(hit))


class ChunkRetriever(BaseRetriever):
    """Hits of a :class:`chunker.client.Searcher` as LangChain ``Document``s, best first."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    searcher: Any = Field(description="an EndpointClient, a MilvusSearcher, or anything with search(query, k, "
                                      "filters, rerank) -> list[Hit]")
    k: int = Field(5, ge=1, le=50, description="Hits per query (the endpoint allows 1-50).")
    filters: dict[str, Any] | None = Field(None, description="Filters of every query: doc_id, source_prefix, "
                                                             "modality, page_min, page_max.")
    rerank: bool | None = Field(None, description="Cross-encoder rerank; None: the searcher's configured default.")

    @field_validator("searcher")
    @classmethod
    def _is_a_searcher(cls, v: Any) -> Any:
        if not isinstance(v, Searcher):
            raise ValueError(f"searcher {type(v).__name__} has no search(query, k, filters, rerank)")
        return v

    @field_validator("filters")
    @classmethod
    def _valid_filters(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        as_filters(v)  # a wrong filter fails now, naming its field, not at the first query
        return v

    @classmethod
    def from_endpoint(cls, base_url: str = "http://127.0.0.1:8000", timeout_s: float = 30.0,
                      **kwargs: Any) -> "ChunkRetriever":
        return cls(searcher=EndpointClient(base_url, timeout_s), **kwargs)

    @classmethod
    def from_milvus(cls, uri: str, config: Config | str | Path | None = None, **kwargs: Any) -> "ChunkRetriever":
        return cls(searcher=MilvusSearcher(uri, config), **kwargs)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        hits = self.searcher.search(query, k=self.k, filters=self.filters, rerank=self.rerank)
        return [to_document(h) for h in hits]

    async def _aget_relevant_documents(self, query: str, *,
                                       run_manager: AsyncCallbackManagerForRetrieverRun) -> list[Document]:
        if not isinstance(self.searcher, AsyncSearcher):  # a local searcher: LangChain runs it in a thread
            return await super()._aget_relevant_documents(query, run_manager=run_manager)
        hits = await self.searcher.asearch(query, k=self.k, filters=self.filters, rerank=self.rerank)
        return [to_document(h) for h in hits]
