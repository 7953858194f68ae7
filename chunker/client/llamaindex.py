"""A LlamaIndex retriever over the query endpoint or a Milvus URI (``pip install 'vision-chunker[llamaindex]'``).

    from chunker.client.llamaindex import ChunkNodeRetriever

    retriever = ChunkNodeRetriever.from_endpoint("http://127.0.0.1:8000", k=5)
    nodes = retriever.retrieve("How many days do I have to file a warranty claim?")

Each ``NodeWithScore`` is one hit: a ``TextNode`` whose ID is the chunk ID, whose text is the chunk's text with its
context, and whose metadata is :func:`chunker.client.hits.hit_metadata`; its score is the hit's fused score. The
chunk's own text, its context, score, rank and IDs stay out of what LlamaIndex shows a model or an embedder (they are
in the text already, or mean nothing to a model); source, pages, breadcrumb and identity go with the text, for
citations.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from chunker.client.endpoint import EndpointClient
from chunker.client.hits import NOT_FOR_THE_MODEL, AsyncSearcher, Filters, Searcher, as_filters, hit_metadata
from chunker.client.library import MilvusSearcher
from chunker.config import Config
from chunker.index.retrieval import Hit


def to_node(hit: Hit) -> NodeWithScore:
    node = TextNode(id_=hit.chunk_id, text=hit.reading_text, metadata=hit_metadata(hit),
                    excluded_llm_metadata_keys=list(NOT_FOR_THE_MODEL),
                    excluded_embed_metadata_keys=list(NOT_FOR_THE_MODEL))
    return NodeWithScore(node=node, score=float(hit.score))


class ChunkNodeRetriever(BaseRetriever):
    """Hits of a :class:`chunker.client.Searcher` as LlamaIndex ``NodeWithScore``s, best first."""

    def __init__(self, searcher: Searcher, k: int = 5, filters: Filters = None, rerank: bool | None = None,
                 **kwargs: Any) -> None:
        if not isinstance(searcher, Searcher):
            raise TypeError(f"searcher {type(searcher).__name__} has no search(query, k, filters, rerank)")
        if not 1 <= k <= 50:
            raise ValueError(f"k must be between 1 and 50 (the endpoint's bounds), not {k}")
        super().__init__(**kwargs)
        self.searcher = searcher
        self.k = k
        self.filters = as_filters(filters)  # a wrong filter fails now, naming its field
        self.rerank = rerank

    @classmethod
    def from_endpoint(cls, base_url: str = "http://127.0.0.1:8000", timeout_s: float = 30.0,
                      **kwargs: Any) -> "ChunkNodeRetriever":
        return cls(EndpointClient(base_url, timeout_s), **kwargs)

    @classmethod
    def from_milvus(cls, uri: str, config: Config | str | Path | None = None, **kwargs: Any) -> "ChunkNodeRetriever":
        return cls(MilvusSearcher(uri, config), **kwargs)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        hits = self.searcher.search(query_bundle.query_str, k=self.k, filters=self.filters, rerank=self.rerank)
        return [to_node(h) for h in hits]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        if not isinstance(self.searcher, AsyncSearcher):
            return self._retrieve(query_bundle)  # a local searcher has no async path: the search runs here
        hits = await self.searcher.asearch(query_bundle.query_str, k=self.k, filters=self.filters,
                                           rerank=self.rerank)
        return [to_node(h) for h in hits]
