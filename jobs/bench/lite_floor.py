"""Milvus Lite's own floor per search call at a collection's size, and what it means for hybrid over dense.

Why: issue 24 asks that a hybrid search cost at most twice a dense one on Milvus Lite at 100k chunks. A hybrid
question is two Lite searches (a dense one and a BM25 one: our adaptive fusion sends both legs; Lite's own
HybridSearch also runs each route as a separate ``Collection.search``, milvus_lite/adapter/grpc/servicer.py), and
every Lite search first walks every row of the collection in Python to drop replaced and deleted versions
(milvus_lite/search/executor_indexed.py for dense, ``Collection._search_sparse`` in
milvus_lite/engine/collection.py for sparse), whatever the query. That walk is the same for a search that finds
nothing, so it is measured as one: a dense search for one neighbour, a BM25 search for a word no chunk holds. The
ratio's floor is then (dense floor + BM25 floor + the BM25 scoring) over (the dense search).

The collection is opened in this process with Lite's engine (no server, no gRPC), so nothing else may hold the
data directory (a running ``milvus-lite server`` or benchmark): the error says so.

    python -m jobs.bench.lite_floor --db output/bench100k-v2.db [--questions 40]
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any, Callable

import numpy as np

from chunker.config.index import RetrievalConfig
from chunker.errors import SetupError
from chunker.index.collection import ROW_FIELDS
from chunker.index.common_terms import SAMPLE_ROWS, common_words, prune
from jobs.bench.serve_data import query_bodies
from jobs.bench.serve_http import percentiles

# A word of no chunk: the synthetic vocabulary is consonant-vowel syllables, real text rarely holds this.
ABSENT_WORD = "qxjzwv"


def open_collection(db: str, name: str) -> tuple[Any, Any]:
    """Lite's engine and the collection, opened in this process; a SetupError naming the directory otherwise."""
    try:
        from milvus_lite.db import MilvusLite
    except ImportError as exc:
        raise SetupError(f"milvus-lite is not installed ({exc}); this benchmark measures Milvus Lite only") from None
    try:
        lite = MilvusLite(db)
        col = lite.get_collection(name)
        col.load()
    except Exception as exc:  # noqa: BLE001 - Lite raises its own types for a locked dir or a missing collection
        raise SetupError(f"cannot open collection {name!r} in Milvus Lite directory {db}: {exc} (is a Lite server "
                         "or another benchmark holding it?)") from None
    return lite, col


def _timed(call: Callable[[], Any], n: int) -> dict[str, float]:
    call()  # the first call builds Lite's per-segment caches (the sparse index): not a search's cost
    out = []
    for _ in range(n):
        t = time.perf_counter()
        call()
        out.append((time.perf_counter() - t) * 1000)
    return percentiles(out)


def measure(col: Any, questions: int, limit: int, dim: int) -> dict[str, Any]:
    """p50/p95/p99 ms of each kind of Lite search, one question per call, as the retriever sends them on Lite."""
    bodies = [b for b in query_bodies(max(questions * 2, 20)) if "filters" not in b][:questions]
    # What the retriever drops (chunker/index/common_terms.py): the words in common_term_share of the BM25 texts of
    # a sample of rows (ChunkStore.sample_search_texts takes the same kind of sample through the client).
    sample = [r["search_text"] for r in col.query(expr='chunk_id like "%0"', output_fields=["search_text"],
                                                  limit=SAMPLE_ROWS)]
    common = common_words(sample, RetrievalConfig().common_term_share)
    texts = [prune(b["query"], common) for b in bodies]
    rng = np.random.default_rng(5)
    vecs = rng.standard_normal((len(texts), dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    fields = [f for f in ROW_FIELDS if f in {f.name for f in col.schema.fields}]
    turn = {"i": 0}

    def each(fn: Callable[[int], Any]) -> Callable[[], Any]:
        def call() -> Any:
            i = turn["i"] = (turn["i"] + 1) % len(texts)
            return fn(i)
        return call

    def dense(k: int) -> Callable[[int], Any]:
        return lambda i: col.search([vecs[i].tolist()], top_k=k, anns_field="dense", output_fields=fields)

    def bm25(text: Callable[[int], str]) -> Callable[[int], Any]:
        return lambda i: col.search([text(i)], top_k=limit, anns_field="sparse", output_fields=fields)

    rows = {
        "dense search": _timed(each(dense(limit)), questions),
        "dense floor (one neighbour)": _timed(each(dense(1)), questions),
        "BM25 search": _timed(each(bm25(lambda i: texts[i])), questions),
        "BM25 floor (a word no chunk holds)": _timed(each(bm25(lambda i: ABSENT_WORD)), questions),
    }
    d, df = rows["dense search"]["p50"], rows["dense floor (one neighbour)"]["p50"]
    s, sf = rows["BM25 search"]["p50"], rows["BM25 floor (a word no chunk holds)"]["p50"]
    return {
        "rows": int(col.num_entities),
        "questions": len(texts), "limit": limit, "dropped_common_words": sorted(common),
        "search_ms": rows,
        # Two Lite calls, one at a time in the one Lite process: the sum is what a hybrid question costs the store.
        "hybrid_over_dense_p50": round((d + s) / d, 2) if d else None,
        "floor_share_of_dense": round(df / d, 2) if d else None,
        "floor_share_of_bm25": round(sf / s, 2) if s else None,
        # Even with free BM25 scoring a hybrid question pays the BM25 call's walk on top of a dense search.
        "hybrid_over_dense_if_bm25_scoring_were_free": round((d + sf) / d, 2) if d else None,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m jobs.benchmark lite-floor", description=__doc__.split("\n")[0])
    p.add_argument("--db", required=True, help="a Milvus Lite data directory (e.g. from jobs.bench.serve --db)")
    p.add_argument("--collection", default="chunks")
    p.add_argument("--questions", type=int, default=40, help="questions per kind of search")
    p.add_argument("--limit", type=int, default=20, help="candidates per leg (retrieval.candidates)")
    p.add_argument("--json", default=None, help="also write the figures here")
    a = p.parse_args(argv)
    try:
        lite, col = open_collection(a.db, a.collection)
    except SetupError as exc:
        print(f"error: {exc}")
        return 2
    try:
        dim = next(f.dim for f in col.schema.fields if f.name == "dense")
        out = measure(col, a.questions, a.limit, int(dim))
    finally:
        lite.close()
    print(f"Milvus Lite {a.db} ({out['rows']} rows), {out['questions']} questions per row, limit {out['limit']}:")
    for name, pct in out["search_ms"].items():
        print(f"  {name:36s} p50 {pct['p50']:7.1f}  p95 {pct['p95']:7.1f}  p99 {pct['p99']:7.1f} ms")
    print(f"  hybrid / dense (the two calls' p50s): {out['hybrid_over_dense_p50']}x; the floor is "
          f"{out['floor_share_of_dense']:.0%} of a dense search and {out['floor_share_of_bm25']:.0%} of a BM25 one; "
          f"with free BM25 scoring: {out['hybrid_over_dense_if_bm25_scoring_were_free']}x")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
