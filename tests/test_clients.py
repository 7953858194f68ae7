"""The ways an application asks the index (chunker.client), against the real thing: the sample corpus ingested by
the real pipeline into a `milvus-lite server`, the Ray Serve endpoint of serving/app.py over it, and the HTTP client,
the LangChain and LlamaIndex retrievers and the library searcher each asked the demo's question.

One Ray runtime, one ingest and one Serve application for the module (~40 s on 2 cores)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from milvus_lite_server import free_port, lite_server  # tests/ is on sys.path under pytest

from chunker.client import EndpointClient, EndpointError, MilvusSearcher
from chunker.index.filters import FilterError

pytestmark = [pytest.mark.ray, pytest.mark.slow]

QUESTION = "How many days do I have to file a warranty claim?"
ANSWER = "within 90 days"  # the scanned notice (chunker.eval.samples), read through OCR
META = {"chunk_id", "score", "rank", "source", "doc_id", "page_start", "page_end", "breadcrumb", "identity",
        "modality", "text", "context", "context_page_end"}


@pytest.fixture(scope="module")
def live(samples_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(endpoint URL, Milvus URI) of the ingested samples."""
    import ray
    from ray import serve

    from chunker.config import load_config
    from jobs.ingest import run_ingest
    from serving.app import build_app

    work = tmp_path_factory.mktemp("clients")
    with lite_server(work / "milvus") as (uri, _):
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}})
        try:
            summary = run_ingest(load_config("configs/local.yaml", [f"milvus.uri={uri}"]), str(samples_dir),
                                 str(work / "run"), verbose=False)
            assert summary.ok == 4 and summary.collection_rows > 10, summary.problems
            port = free_port()
            serve.start(http_options={"host": "127.0.0.1", "port": port})
            serve.run(build_app({"config": "configs/local.yaml", "milvus.uri": uri}), name="clients", route_prefix="/")
            yield f"http://127.0.0.1:{port}", uri
        finally:
            try:
                serve.shutdown()
            finally:
                ray.shutdown()


@pytest.fixture(scope="module")
def client(live: tuple[str, str]) -> Iterator[EndpointClient]:
    with EndpointClient(live[0], timeout_s=120.0) as c:
        assert c.ready()
        yield c


def test_the_http_client_answers_the_demo_question(client: EndpointClient) -> None:
    hits = client.search(QUESTION, k=3)
    assert [h.rank for h in hits] == [1, 2, 3]
    top = hits[0]
    assert top.source == "scanned-notice.pdf" and ANSWER in top.reading_text
    assert top.page_start >= 1 and top.breadcrumb and top.doc_id and top.chunk_id and top.score > 0
    # Filters go through as the endpoint's own model; the answer keeps to them.
    travel = client.search(QUESTION, k=5, filters={"source_prefix": "travel"})
    assert travel and all(h.source.startswith("travel") for h in travel)
    assert asyncio.run(client.asearch(QUESTION, k=3)) == hits


def test_the_http_client_says_what_was_wrong(client: EndpointClient) -> None:
    with pytest.raises(EndpointError) as refused:
        client.search(QUESTION, k=0)
    assert refused.value.status == 422 and refused.value.kind == "invalid_request" and "k" in str(refused.value)
    with pytest.raises(FilterError, match="page_min"):  # checked before any request
        client.search(QUESTION, filters={"page_min": 0})
    with EndpointClient(f"http://127.0.0.1:{free_port()}", timeout_s=5.0) as nobody:
        assert not nobody.ready()
        with pytest.raises(EndpointError) as down:
            nobody.search(QUESTION)
    assert down.value.status == 0 and down.value.kind == "unreachable" and "did not answer" in str(down.value)


def test_the_langchain_retriever_returns_documents_with_the_hits_metadata(client: EndpointClient) -> None:
    from langchain_core.documents import Document

    from chunker.client.langchain import ChunkRetriever

    expected = client.search(QUESTION, k=4)
    retriever = ChunkRetriever(searcher=client, k=4)
    docs = retriever.invoke(QUESTION)
    assert all(isinstance(d, Document) for d in docs)
    assert [d.id for d in docs] == [h.chunk_id for h in expected]
    top = docs[0]
    assert ANSWER in top.page_content and set(top.metadata) == META
    assert top.metadata["source"] == "scanned-notice.pdf" and top.metadata["score"] == pytest.approx(expected[0].score)
    assert [d.id for d in asyncio.run(retriever.ainvoke(QUESTION))] == [d.id for d in docs]  # the async client
    only = ChunkRetriever(searcher=client, k=5, filters={"source_prefix": "travel"}).invoke(QUESTION)
    assert only and all(d.metadata["source"].startswith("travel") for d in only)


def test_the_llamaindex_retriever_returns_scored_nodes(client: EndpointClient) -> None:
    from llama_index.core.schema import MetadataMode, NodeWithScore

    from chunker.client.llamaindex import ChunkNodeRetriever

    expected = client.search(QUESTION, k=4)
    retriever = ChunkNodeRetriever(client, k=4)
    nodes = retriever.retrieve(QUESTION)
    assert all(isinstance(n, NodeWithScore) for n in nodes)
    assert [n.node.node_id for n in nodes] == [h.chunk_id for h in expected]
    assert [n.score for n in nodes] == pytest.approx([h.score for h in expected])
    top = nodes[0].node
    assert ANSWER in top.get_content() and set(top.metadata) == META
    # What a model is shown: the text once, with where it comes from, not its IDs or a second copy of the text.
    shown = top.get_content(metadata_mode=MetadataMode.LLM)
    assert shown.count(ANSWER) == 1 and "scanned-notice.pdf" in shown and top.node_id not in shown
    assert [n.node.node_id for n in asyncio.run(retriever.aretrieve(QUESTION))] == [n.node.node_id for n in nodes]


def test_the_library_searcher_over_the_milvus_uri_answers_as_the_endpoint(live: tuple[str, str],
                                                                        client: EndpointClient) -> None:
    from chunker.client.langchain import ChunkRetriever
    from chunker.client.llamaindex import ChunkNodeRetriever

    with MilvusSearcher(live[1], config="configs/local.yaml") as searcher:
        local = searcher.search(QUESTION, k=4)
        served = client.search(QUESTION, k=4)
        # The same retriever (fusion, context, identity) in this process: the same hits in the same order.
        assert [h.chunk_id for h in local] == [h.chunk_id for h in served]
        assert [h.reading_text for h in local] == [h.reading_text for h in served]
        docs = ChunkRetriever(searcher=searcher, k=2).invoke(QUESTION)
        assert [d.id for d in docs] == [h.chunk_id for h in local[:2]]
        assert [d.id for d in asyncio.run(ChunkRetriever(searcher=searcher, k=2).ainvoke(QUESTION))] == \
            [d.id for d in docs]
        nodes = ChunkNodeRetriever(searcher, k=2).retrieve(QUESTION)
        assert [n.node.node_id for n in nodes] == [h.chunk_id for h in local[:2]]


def test_retrievers_refuse_what_is_not_a_searcher_or_a_bad_setting() -> None:
    from chunker.client.langchain import ChunkRetriever
    from chunker.client.llamaindex import ChunkNodeRetriever

    with pytest.raises(TypeError, match="has no search"):
        ChunkNodeRetriever(object())
    with pytest.raises(ValueError, match="k must be between 1 and 50"):
        ChunkNodeRetriever(EndpointClient("http://127.0.0.1:9"), k=0)
    with pytest.raises(ValueError, match="has no search"):
        ChunkRetriever(searcher="http://127.0.0.1:8000")
    with pytest.raises(ValueError, match="page_min"):
        ChunkRetriever(searcher=EndpointClient("http://127.0.0.1:9"), filters={"page_min": 0})
