"""Asking the index from an application.

Two searchers answer with :class:`chunker.index.retrieval.Hit`, the endpoint's hit field for field (text, breadcrumb,
document, pages, score, chunk ID, identity, context):

* :class:`EndpointClient`: the HTTP query endpoint (``vision-chunker serve``), over httpx, sync and async;
* :class:`MilvusSearcher`: a collection by its Milvus URI, for users without the endpoint; the endpoint's own
  retriever in this process (fusion, context and identity included), not a second implementation.

The retrievers of the RAG frameworks take either (optional extras, imported only where used):

* :class:`chunker.client.langchain.ChunkRetriever` (``pip install 'vision-chunker[langchain]'``): ``Document``s;
* :class:`chunker.client.llamaindex.ChunkNodeRetriever` (``[llamaindex]``): ``NodeWithScore``s.
"""

from chunker.client.endpoint import EndpointClient, EndpointError
from chunker.client.hits import AsyncSearcher, Searcher, as_filters, hit_metadata
from chunker.client.library import MilvusSearcher

__all__ = ["AsyncSearcher", "EndpointClient", "EndpointError", "MilvusSearcher", "Searcher", "as_filters",
           "hit_metadata"]
