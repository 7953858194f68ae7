"""Query-time retrieval: one code path for the query job, the Ray Serve endpoint and the evaluation job.

question -> embed (the ingest embedder) -> Milvus top-N per leg (dense / BM25) -> fused (chunker/index/fusion.py)
  -> near-duplicate chunks after the first moved down (see :func:`demote_duplicates`) ->
  visual question: boost figure chunks, no cross-encoder (it reads text only, figures are described briefly)
  otherwise: optional cross-encoder rerank on (question, breadcrumb + text) -> top k
  -> a short hit gets the chunks that follow it in its section as its context (chunker/index/context.py)
"""

from __future__ import annotations

import re
import time
from collections import OrderedDict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from chunker.config import Config
from chunker.index.common_terms import CommonTerms
from chunker.index.context import follow
from chunker.index.embed import Embedder
from chunker.index.filters import QueryFilters, build_filter
from chunker.index.fusion import demote_duplicates, fuse_adaptive
from chunker.index.period_terms import split_periods
from chunker.index.rerank import CrossEncoderReranker, Reranker, RerankerUnavailable  # noqa: F401 - their home before
from chunker.index.result_cache import ResultCache, normalise_question
from chunker.index.store import ChunkStore


@dataclass
class Hit:
    rank: int
    score: float
    chunk_id: str
    text: str
    breadcrumb: str
    source: str
    doc_id: str
    page_start: int
    page_end: int
    modality: str
    identity: str = ""  # the document's identity line (title/issuer, kind, period)
    # A short hit's followers in its section, verbatim (chunker/index/context.py); "" when it has none.
    context: str = ""
    context_chunk_ids: list[str] = field(default_factory=list)
    context_page_end: int = 0  # the last page the context reaches (0: no context)

    @property
    def reading_text(self) -> str:
        """What a reader gets: the chunk, then its context."""
        return f"{self.text}\n\n{self.context}" if self.context else self.text

    @property
    def reading_page_end(self) -> int:
        """The last page of what a reader gets: the context's when it runs on past the chunk's own last page."""
        return max(self.page_end, self.context_page_end)


@dataclass
class Query:
    """One question of a :meth:`Retriever.search_many` batch."""

    question: str
    k: int = 5
    filters: QueryFilters | None = None
    rerank: bool | None = None  # None: retrieval.rerank decides


@dataclass
class SearchResult:
    hits: list[Hit]
    timings_ms: dict[str, float] = field(default_factory=dict)  # embed, search, rerank, context (short hits' followers)
    batch_size: int = 1  # questions embedded (and searched, per filter group) together with this one
    cached: bool = False  # answered from the result cache: no embedding, no store call
    # The search's own steps, ms, shared with its filter group: dense, sparse (each leg's store call), legs (both,
    # wall), fuse, fetch (fields by primary key, when the legs returned IDs only), duplicates; or the one store call
    # of a single-call mode.
    split_ms: dict[str, float] = field(default_factory=dict)


@dataclass
class _Plan:
    """One question of a batch on its way to the store."""

    i: int
    visual: bool
    scorer: Any
    expr: str
    params: dict[str, Any] | None
    key: tuple[Any, ...]


@contextmanager
def _timed(split: dict[str, float], step: str) -> Iterator[None]:
    t = time.perf_counter()
    try:
        yield
    finally:
        split[step] = split.get(step, 0.0) + (time.perf_counter() - t) * 1000


def is_visual_question(question: str, keywords: list[str]) -> bool:
    """True when any keyword occurs as a whole word (plurals too: "charts", "graphs"), case-insensitive."""
    words = [re.escape(k.strip()) for k in keywords if k.strip()]
    if not words:
        return False
    return re.search(r"\b(?:" + "|".join(words) + r")(?:s|es)?\b", question, re.IGNORECASE) is not None


def passage_text(row: dict[str, Any]) -> str:
    """What the cross-encoder reads: the heading chain gives a short chunk its topic."""
    crumb = row.get("breadcrumb") or ""
    return f"{crumb}\n{row.get('text') or ''}" if crumb else (row.get("text") or "")


def boost_figures(rows: list[dict[str, Any]], boost: float) -> list[dict[str, Any]]:
    """Figure chunks' scores multiplied by ``boost``, re-sorted (stable)."""
    out = []
    for r in rows:
        r = dict(r)
        if r.get("modality") == "figure":
            # Scores are "higher is better" but can be negative (L2): dividing keeps the boost a promotion.
            r["score"] = r["score"] * boost if r["score"] >= 0 else r["score"] / boost
        out.append(r)
    return sorted(out, key=lambda r: r["score"], reverse=True)


class Retriever:
    """Builds the store, embedder and reranker it was not handed, from ``cfg``, on first use."""

    def __init__(
        self,
        cfg: Config,
        store: ChunkStore | None = None,
        embedder: Embedder | None = None,
        reranker: Reranker | None = None,
    ) -> None:
        self.cfg = cfg
        self._store = store
        self._embedder = embedder
        self._reranker = reranker
        # question -> vector; a retriever is used by one thread at a time (the Serve batch handler).
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        rc = cfg.retrieval
        self._results: ResultCache[list[Hit]] = ResultCache(rc.result_cache_size, rc.result_cache_ttl_s)
        self._pool: ThreadPoolExecutor | None = None  # the BM25 leg's thread (concurrent_legs), made on first use
        self._terms = CommonTerms(lambda n: self.store.sample_search_texts(n), rc.common_term_share)

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = Embedder(self.cfg.embed)
        return self._embedder

    @property
    def store(self) -> ChunkStore:
        if self._store is None:
            self._store = ChunkStore(self.cfg.milvus, self.embedder.dim)
        return self._store

    def reranker(self) -> Reranker:
        """The cross-encoder, loaded on first need; a clear error when none is configured."""
        if self._reranker is None:
            path = self.cfg.retrieval.reranker_model
            if not path:
                raise RerankerUnavailable(
                    "reranking was requested but retrieval.reranker_model is not set; no cross-encoder is bundled "
                    "for offline use: download one and set retrieval.reranker_model=/path/to/model, or turn "
                    "rerank off"
                )
            self._reranker = CrossEncoderReranker(path, device=self.cfg.embed.device)
        return self._reranker

    def search(
        self, question: str, k: int = 5, filters: QueryFilters | None = None, rerank: bool | None = None
    ) -> SearchResult:
        out = self.search_many([Query(question, k, filters, rerank)])[0]
        if isinstance(out, BaseException):
            raise out
        return out

    def search_many(self, queries: list[Query]) -> list[SearchResult | Exception]:
        """Answer several questions at once: one embedding call, one store call per leg and distinct filter.

        The result list matches ``queries``; a question that cannot be answered (empty, bad k, bad filter,
        rerank unavailable, store error) holds its exception, so one bad request never fails its neighbours.
        ``timings_ms`` of a result are those of the shared steps it took part in (the batch's embed, its
        filter group's search) plus its own rerank. A question answered in the last ``result_cache_ttl_s`` with the
        same filters, k and settings, and no write through this process's store since, comes from the result
        cache (``cached``; no embedding, no store call).
        """
        rc = self.cfg.retrieval
        out: list[SearchResult | Exception | None] = [None] * len(queries)
        generation = self._generation()  # read before searching: a write racing the search makes its answer stale
        settings = rc.model_dump_json() if self._results.size else ""
        plans: list[_Plan] = []
        for i, q in enumerate(queries):
            try:
                if not q.question or not q.question.strip():
                    raise ValueError("question must not be empty")
                if q.k < 1:
                    raise ValueError(f"k must be >= 1 (got {q.k})")
                visual = is_visual_question(q.question, rc.visual_keywords)
                want_rerank = rc.rerank if q.rerank is None else q.rerank
                # Fail before any work when a rerank cannot happen (visual questions skip the cross-encoder anyway).
                scorer = self.reranker() if want_rerank and not visual else None
                expr, params = build_filter(q.filters)
                key = (normalise_question(q.question), q.k, expr, repr(sorted((params or {}).items())),
                       scorer is not None, settings)
                hits = self._results.get(key, generation)
                if hits is not None:
                    out[i] = SearchResult(hits=list(hits), timings_ms={"embed": 0.0, "search": 0.0, "rerank": 0.0},
                                          cached=True)
                    continue
                plans.append(_Plan(i, visual, scorer, expr, params, key))
            except Exception as exc:  # noqa: BLE001 - the request's own error, returned in its slot
                out[i] = exc
        if not plans:
            return out  # type: ignore[return-value]

        vectors: dict[int, np.ndarray] = {}
        embed_ms = 0.0
        if rc.mode in ("dense", "hybrid"):  # BM25 alone needs no vector (and no model load)
            t = time.perf_counter()
            try:
                vecs = self._embed([queries[p.i].question for p in plans])
            except Exception as exc:  # noqa: BLE001 - every question of the batch shares the failure
                for p in plans:
                    out[p.i] = exc
                return out  # type: ignore[return-value]
            embed_ms = (time.perf_counter() - t) * 1000
            vectors = {p.i: v for p, v in zip(plans, vecs)}

        groups: dict[str, list[_Plan]] = {}
        for plan in plans:
            groups.setdefault(repr((plan.expr, sorted((plan.params or {}).items()))), []).append(plan)
        for group in groups.values():
            idx = [p.i for p in group]
            t = time.perf_counter()
            split: dict[str, float] = {}
            try:
                rows_per_q = self._search(
                    np.stack([vectors[i] for i in idx]) if vectors else None,
                    [queries[i].question for i in idx], limit=max(rc.candidates, max(queries[i].k for i in idx)),
                    expr=group[0].expr, params=group[0].params,
                    # Visual questions re-sort every candidate by modality, reranked ones by text: they need all
                    # candidates' fields; the others their top k.
                    keep=[None if p.visual or p.scorer is not None else queries[p.i].k for p in group], split=split,
                )
            except Exception as exc:  # noqa: BLE001 - the group's questions share the failure
                for i in idx:
                    out[i] = exc
                continue
            search_ms = (time.perf_counter() - t) * 1000
            for p, rows in zip(group, rows_per_q):
                timings = {"embed": embed_ms, "search": search_ms, "rerank": 0.0}
                try:
                    res = self._finish(queries[p.i], rows, p.visual, p.scorer, timings)
                    res.batch_size, res.split_ms = len(plans), dict(split)
                    self._results.put(p.key, generation, list(res.hits))
                    out[p.i] = res
                except Exception as exc:  # noqa: BLE001 - e.g. a reranker that misbehaves on this question
                    out[p.i] = exc
        return out  # type: ignore[return-value]

    def _generation(self) -> int:
        """The store's write generation (0 before the store is opened: nothing is cached yet either)."""
        return int(getattr(self._store, "generation", 0) or 0)

    def _search(self, vectors: np.ndarray | None, texts: list[str], limit: int, expr: str,
                params: dict[str, Any] | None, keep: list[int | None] | None = None,
                split: dict[str, float] | None = None) -> list[list[dict[str, Any]]]:
        """Candidates per question, best first, each with its fields. ``keep``: per question, how many of the best
        rows need their fields (None: all candidates); ``split`` receives each step's milliseconds.

        Adaptive fusion happens here, on the client, over the dense and the BM25 candidates (searched at the same
        time with ``concurrent_legs``). Where every candidate needs its fields (the duplicate step reads their text,
        a visual question re-sorts by modality, a rerank reads text), or where the store reads every field of a hit
        anyway (Milvus Lite: milvus_lite/search/executor_indexed.py materialises whole rows, so asking for fewer
        fields saves nothing, and a second call measured ~9 ms of its CPU at 100k rows), the legs return the
        fields. Otherwise they return IDs and scores, and the top ``keep`` rows are read after fusion in one call
        by primary key: a server then ships k rows' text instead of every candidate's. The other fusions run
        inside Milvus, in one call that returns the fields with the hits."""
        rc = self.cfg.retrieval
        split = {} if split is None else split
        kw: dict[str, Any] = {"limit": limit, "filter_expr": expr, "filter_params": params}
        if rc.mode != "dense":
            with _timed(split, "common_terms"):
                if rc.split_period_tokens:
                    texts = [split_periods(t) for t in texts]
                texts = self._terms.prune(texts, self._generation())
        if rc.mode != "hybrid" or rc.fusion != "adaptive":
            with _timed(split, rc.mode):
                out = self.store.search_batch(vectors, texts, mode=rc.mode, fusion=rc.fusion, rrf_k=rc.rrf_k,
                                              dense_weight=rc.dense_weight, **kw)
            with _timed(split, "duplicates"):
                return [demote_duplicates(rows, rc.duplicate_threshold) for rows in out]
        keep = keep or [None] * len(texts)
        inline = self._duplicates_on() or None in keep or bool(getattr(self.store, "lite", False))
        # IDs-only legs still carry doc_id: fuse_adaptive's gate asks which documents the dense leg found.
        dense, sparse = self._legs(vectors, texts, kw, split, fields=None if inline else ["doc_id"])
        with _timed(split, "fuse"):
            out = [fuse_adaptive(d, sp) for d, sp in zip(dense, sparse)]
        if not inline:
            wanted = [rows[:n] for rows, n in zip(out, keep)]
            with _timed(split, "fetch"):
                found = self.store.fetch([r["chunk_id"] for rows in wanted for r in rows])
            # A candidate deleted between the search and the fetch is left out, as the next search would.
            out = [[dict(r, **found[r["chunk_id"]]) for r in rows if r["chunk_id"] in found] for rows in wanted]
        with _timed(split, "duplicates"):
            return [demote_duplicates(rows, rc.duplicate_threshold) for rows in out]

    def _duplicates_on(self) -> bool:
        """Whether :func:`demote_duplicates` reorders (it reads every candidate's text then)."""
        return self.cfg.retrieval.duplicate_threshold < 1.0

    def _legs(self, vectors: np.ndarray | None, texts: list[str], kw: dict[str, Any], split: dict[str, float],
              fields: list[str] | None) -> tuple[list[list[dict[str, Any]]], list[list[dict[str, Any]]]]:
        """The dense and the BM25 candidates of each question (chunk_id, score and ``fields``: None for all of
        them); BM25 skips blank texts."""
        lexical = [i for i, t in enumerate(texts) if t and t.strip()]
        t0 = time.perf_counter()

        def dense() -> list[list[dict[str, Any]]]:
            with _timed(split, "dense"):
                return self.store.search_batch(vectors, texts, mode="dense", fields=fields, **kw)

        def sparse() -> list[list[dict[str, Any]]]:
            out: list[list[dict[str, Any]]] = [[] for _ in texts]
            if lexical:
                with _timed(split, "sparse"):
                    rows = self.store.search_batch(None, [texts[i] for i in lexical], mode="sparse", fields=fields,
                                                   **kw)
                for i, r in zip(lexical, rows):
                    out[i] = r
            return out

        if self.cfg.retrieval.concurrent_legs and lexical:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bm25-leg")
            later = self._pool.submit(sparse)
            try:
                d = dense()
            finally:
                s = later.result()  # waited for even when dense failed: no search left running behind an error
        else:
            d, s = dense(), sparse()
        split["legs"] = (time.perf_counter() - t0) * 1000
        return d, s

    def _embed(self, questions: list[str]) -> list[np.ndarray]:
        """Query vectors, from a small LRU cache where the same question was asked recently."""
        size = self.cfg.retrieval.query_cache_size
        missing = list(dict.fromkeys(q for q in questions if q not in self._cache))
        if missing:
            for q, v in zip(missing, self.embedder.encode(missing)):
                self._cache[q] = v
        vecs = [self._cache[q] for q in questions]
        for q in dict.fromkeys(questions):
            self._cache.move_to_end(q)
        while len(self._cache) > size:
            self._cache.popitem(last=False)
        return vecs

    def _finish(
        self, q: Query, rows: list[dict[str, Any]], visual: bool, scorer: Reranker | None, timings: dict[str, float]
    ) -> SearchResult:
        rc = self.cfg.retrieval
        if visual:
            rows = boost_figures(rows, rc.figure_boost)
        elif scorer is not None and rows:
            t = time.perf_counter()
            scores = scorer.score(q.question, [passage_text(r) for r in rows])
            if len(scores) != len(rows):
                raise RuntimeError(f"reranker returned {len(scores)} scores for {len(rows)} passages")
            rows = [dict(r, score=float(s)) for r, s in zip(rows, scores)]
            rows.sort(key=lambda r: r["score"], reverse=True)
            timings["rerank"] = (time.perf_counter() - t) * 1000

        candidates, rows = rows, rows[: q.k]
        t = time.perf_counter()
        context = follow(self.store, rows, rc.context_below_chars, rc.context_to_chars, candidates)
        timings["context"] = (time.perf_counter() - t) * 1000
        hits = [
            Hit(
                rank=i + 1, score=float(r["score"]), chunk_id=r["chunk_id"], text=r.get("text") or "",
                breadcrumb=r.get("breadcrumb") or "", source=r.get("source") or "", doc_id=r.get("doc_id") or "",
                page_start=int(r.get("page_start") or 0), page_end=int(r.get("page_end") or 0),
                modality=r.get("modality") or "text", identity=r.get("identity") or "",
                context=context[r["chunk_id"]].text if r["chunk_id"] in context else "",
                context_chunk_ids=context[r["chunk_id"]].chunk_ids if r["chunk_id"] in context else [],
                context_page_end=context[r["chunk_id"]].page_end if r["chunk_id"] in context else 0,
            )
            for i, r in enumerate(rows)
        ]
        return SearchResult(hits=hits, timings_ms=timings)

    def invalidate(self) -> None:
        """Forget every cached answer (the store's writes do this already; for a caller that knows of others)."""
        self._results.clear()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        if self._store is not None:
            self._store.close()
