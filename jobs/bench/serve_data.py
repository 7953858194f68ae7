"""The serving benchmark's data: a synthetic chunk collection loaded into Milvus Lite, and the query mix.

Texts come from a synthetic vocabulary so the BM25 leg has work too; vectors are random unit rows (setup speed over
meaning: the dense leg's cost does not depend on what the vectors mean).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from chunker.config import Config
from chunker.types import Chunk

_MODALITIES = ("text", "text", "text", "table", "figure")


def vocabulary(size: int = 3000, seed: int = 7) -> list[str]:
    """Pronounceable fake words: distinct enough for BM25, no real corpus needed."""
    rng = np.random.default_rng(seed)
    cons, vows = list("bcdfghklmnprstvz"), list("aeiou")
    words: set[str] = set()
    while len(words) < size:
        n = int(rng.integers(2, 5))
        words.add("".join(str(rng.choice(cons)) + str(rng.choice(vows)) for _ in range(n)))
    return sorted(words)


def synthetic_chunks(start: int, count: int, vocab: list[str], rng: np.random.Generator) -> list[Chunk]:
    out = []
    for i in range(start, start + count):
        words = rng.choice(vocab, size=int(rng.integers(40, 120)))
        doc = f"benchdoc{i // 40:06d}"
        page = (i % 40) // 2 + 1
        crumb = f"Manual {i // 40} > Section {(i % 40) // 8}"
        out.append(
            Chunk(
                chunk_id=f"bench-{i:08d}", doc_id=doc, element_ids=[f"{doc}:{i % 40}"],
                text=f"{crumb}\n\n" + " ".join(words), breadcrumb=crumb, page_start=page, page_end=page,
                modality=_MODALITIES[i % len(_MODALITIES)],  # type: ignore[arg-type]
                planner="synthetic", config_hash="bench", source=f"bench/{doc}.pdf", source_uri=f"bench/{doc}.pdf",
            )
        )
    return out


def load_collection(cfg: Config, n: int, dim: int, batch: int = 2000) -> float:
    """Insert n synthetic chunks; returns seconds taken. Vectors are random unit rows: setup speed over meaning.

    Meant for a Milvus Lite path in a child process: in-process Lite inserts ran ~5x faster than through
    `milvus-lite server` (measured), and the child's exit releases the data-dir lock for the server.
    """
    from chunker.index.collection import chunk_row
    from chunker.index.store import ChunkStore

    rng = np.random.default_rng(11)
    vocab = vocabulary()
    store = ChunkStore(cfg.milvus, dim)
    t0 = time.perf_counter()
    for start in range(0, n, batch):
        count = min(batch, n - start)
        vecs = rng.standard_normal((count, dim)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        rows = [chunk_row(c, v) for c, v in zip(synthetic_chunks(start, count, vocab, rng), vecs)]
        # Plain insert, not ChunkStore.upsert: the collection is fresh and the IDs unique, and upsert slows down
        # as the collection grows (measured ~100 rows/s past 40k rows), which would make setup the benchmark.
        store.client.insert(store.collection, rows)
        if (start // batch) % 10 == 0:
            print(f"  loaded {start + count:,}/{n:,} chunks", flush=True)
    print(f"  collection holds {store.count():,} chunks", flush=True)
    store.close()
    return time.perf_counter() - t0


def _load_child(cfg_data: dict[str, Any], n: int, dim: int, out: Any) -> None:
    out.put(load_collection(Config.model_validate(cfg_data), n, dim))


def load_in_child(cfg: Config, n: int, dim: int, timeout_s: float = 1800.0) -> float:
    """Run :func:`load_collection` in a spawned process, so the Lite lock is gone when it returns."""
    import multiprocessing as mp

    ctx = mp.get_context("spawn")  # no fork: this process may already hold gRPC threads
    out = ctx.Queue()
    proc = ctx.Process(target=_load_child, args=(cfg.model_dump(mode="json"), n, dim, out))
    proc.start()
    try:
        secs = float(out.get(timeout=timeout_s))
    finally:
        proc.join(timeout=60)
        if proc.is_alive():
            proc.kill()
    if proc.exitcode != 0:
        raise RuntimeError(f"loading process exited with {proc.exitcode}")
    return secs


def query_bodies(n: int = 200, seed: int = 3) -> list[dict[str, Any]]:
    """Varied requests: short and long questions, some with filters, k from 3 to 20."""
    rng = np.random.default_rng(seed)
    vocab = vocabulary()
    bodies = []
    for i in range(n):
        q = " ".join(rng.choice(vocab, size=int(rng.integers(2, 16))))
        body: dict[str, Any] = {"query": f"what does the manual say about {q}?", "k": int(rng.choice([3, 5, 10, 20]))}
        if i % 5 == 1:
            body["filters"] = {"modality": "table"}
        elif i % 5 == 3:
            body["filters"] = {"page_min": 2, "page_max": 10}
        bodies.append(body)
    return bodies
