"""Search a collection by its Milvus URI, without the endpoint.

    from chunker.client import MilvusSearcher

    searcher = MilvusSearcher("output/milvus.db", config="configs/local.yaml")   # or http://milvus:19530
    hits = searcher.search("How many days do I have to file a warranty claim?", k=3)

It runs :class:`chunker.index.retrieval.Retriever`, the endpoint's own retriever, in this process: the same hybrid
fusion, context of short hits and document identity as the endpoint. The config must be the one the collection was
ingested with (its embedding model and Milvus settings); ``milvus.uri`` is taken from ``uri``. Milvus Lite lets one
process open a data folder at a time: beside a running ingest or endpoint, serve the folder with ``milvus-lite
server`` and pass its ``http://`` URI.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chunker.client.hits import Filters, as_filters
from chunker.config import Config, load_config
from chunker.index.retrieval import Hit, Retriever


class MilvusSearcher:
    """``config``: a YAML path or a :class:`Config` (default: the built-in defaults); ``overrides``: ``key=value``
    items as ``--set`` takes them."""

    def __init__(self, uri: str | None = None, config: Config | str | Path | None = None,
                 overrides: list[str] | None = None) -> None:
        if isinstance(config, Config):
            if overrides:
                raise ValueError("overrides apply to a config file; set them on the Config object instead")
            cfg = config.model_copy(deep=True)
            if uri:
                cfg.milvus.uri = uri  # validated on assignment, as an override would be
        else:
            cfg = load_config(config, list(overrides or []) + ([f"milvus.uri={uri}"] if uri else []))
        self.cfg = cfg
        self.retriever = Retriever(cfg)

    def search(self, query: str, k: int = 5, filters: Filters = None, rerank: bool | None = None) -> list[Hit]:
        return self.retriever.search(query, k, as_filters(filters), rerank).hits

    def close(self) -> None:
        self.retriever.close()

    def __enter__(self) -> "MilvusSearcher":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

