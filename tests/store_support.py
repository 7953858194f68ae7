"""What the ChunkStore tests share: small chunks and vectors, and the read-only store their filter tests search.

Imported by tests/test_store*.py and tests/test_filters.py (tests/ is on sys.path under pytest).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from chunker.config import MilvusConfig
from chunker.index.store import ChunkStore
from chunker.types import Chunk

DIM = 8
# Source paths with the characters a LIKE prefix or a quoted literal could trip on.
SOURCES = ["dir_1/a.pdf", "dirX1/b.pdf", "dir%2/c.pdf", 'q"t/d.pdf', "other/e.pdf"]


def make_chunks(n: int, doc: str = "d1", source: str = "dir_1/a.pdf", text: str = "text") -> list[Chunk]:
    return [
        Chunk(chunk_id=f"{doc}-{i}", doc_id=doc, element_ids=[f"{doc}:{i}"], text=f"{text} number {i}",
              breadcrumb="Guide > Part", page_start=i + 1, page_end=i + 2,
              modality="figure" if i % 3 == 0 else "text", planner="deterministic", config_hash="h",
              source=source, source_uri=f"file:///{source}")
        for i in range(n)
    ]


def vecs(n: int, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def ids(rows: list[dict]) -> set[str]:
    return {r["chunk_id"] for r in rows}


@contextmanager
def filter_store_at(lite_root: Path) -> Iterator[ChunkStore]:
    """Three chunks of each of ``SOURCES`` (doc0 ... doc4) in collection "filters" of ``lite_root``/store.db;
    read-only for the tests that use it, so a module shares one (creating a Lite collection costs ~1 s)."""
    s = ChunkStore(MilvusConfig(uri=str(lite_root / "store.db")), DIM, collection="filters")
    chunks = [c for i, src in enumerate(SOURCES) for c in make_chunks(3, doc=f"doc{i}", source=src)]
    s.upsert(chunks, vecs(len(chunks)))
    yield s
    s.drop()
    s.close()
