"""Query-time retrieval: one code path for the query job, the Ray Serve endpoint and the evaluation job.

question -> embed (the ingest embedder) -> Milvus top-N per leg (dense / BM25) -> fused (see :func:`fuse_adaptive`)
  -> near-duplicate chunks after the first moved down (see :func:`demote_duplicates`) ->
  visual question: boost figure chunks, no cross-encoder (it reads text only, figures are described briefly)
  otherwise: optional cross-encoder rerank on (question, breadcrumb + text) -> top k
"""

from __future__ import annotations

import os
import re
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from chunker.errors import SetupError
from chunker.config import Config
from chunker.index.embed import Embedder
from chunker.index.filters import QueryFilters, build_filter
from chunker.index.store import ChunkStore


class RerankerUnavailable(SetupError):
    """Reranking was asked for but no cross-encoder can be loaded."""


@runtime_checkable
class Reranker(Protocol):
    """Scores passages against a question; higher is more relevant."""

    def score(self, question: str, passages: list[str]) -> list[float]: ...


class CrossEncoderReranker:
    """A sentence-transformers CrossEncoder loaded from a local folder (weights are never downloaded)."""

    def __init__(self, model_path: str, device: str = "cpu", batch_size: int = 32) -> None:
        if not os.path.isdir(model_path):
            raise RerankerUnavailable(
                f"retrieval.reranker_model {model_path!r} is not a local folder; download a CrossEncoder "
                "(e.g. cross-encoder/ms-marco-MiniLM-L-6-v2) and point retrieval.reranker_model at it"
            )
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import CrossEncoder

        self.model = CrossEncoder(model_path, device=device)
        self.batch_size = batch_size

    def score(self, question: str, passages: list[str]) -> list[float]:
        if not passages:
            return []
        scores = self.model.predict(
            [(question, p) for p in passages], batch_size=self.batch_size, show_progress_bar=False
        )
        return [float(s) for s in scores]


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
    timings_ms: dict[str, float] = field(default_factory=dict)  # embed, search, rerank
    batch_size: int = 1  # questions embedded (and searched, per filter group) together with this one


def is_visual_question(question: str, keywords: list[str]) -> bool:
    """True when any keyword occurs as a whole word (plurals too: "charts", "graphs"), case-insensitive."""
    words = [re.escape(k.strip()) for k in keywords if k.strip()]
    if not words:
        return False
    return re.search(r"\b(?:" + "|".join(words) + r")(?:s|es)?\b", question, re.IGNORECASE) is not None


# A leg whose N best candidates all score within this share of its best one cannot rank them: its say in the fused
# order shrinks in proportion (a flat BM25 list over ten near-identical filings, or dense cosines over a family of
# near-identical spec sheets). A property of the ranking itself, read per query.
FLAT_SPREAD = 0.1
_WORDS = re.compile(r"[a-z0-9]+")


def leg_weight(scores: list[float], flat: float = FLAT_SPREAD) -> float:
    """How well a leg separates its own candidates: its score spread relative to its best score, capped at 1 from
    ``flat`` upward (scores best first, higher is better)."""
    if len(scores) < 2 or scores[0] <= 0:
        return 1.0 if scores else 0.0
    return min(1.0, max(0.0, (scores[0] - scores[-1]) / scores[0]) / flat)


# BM25 evidence for a chunk of a document the dense leg did not find among its candidates counts this much.
OUTSIDE_DENSE = 0.5


def fuse_adaptive(dense: list[dict[str, Any]], sparse: list[dict[str, Any]], flat: float = FLAT_SPREAD,
                  outside: float = OUTSIDE_DENSE) -> list[dict[str, Any]]:
    """Dense and BM25 candidates (each best first) as one list, best first, ``score`` = the fused score.

    Each leg's scores are rescaled to [0, 1] over its own candidates (best 1, last 0), weighted by
    :func:`leg_weight`, and summed per chunk (a chunk one leg missed gets 0 from it). Unlike reciprocal-rank fusion,
    a near tie in one leg stays a near tie, so the leg that does separate the candidates decides: BM25 between
    near-identical documents that differ in one code or date, dense between paraphrases that share no rare word.

    BM25 is precise and brittle: among the documents the dense leg finds plausible it is the best tie-breaker
    there is (the right quarter's statement by its date, the right sheet by its code), but a rare question word
    matched in a document the dense leg never considered ("quick" in another company's filing) is how it fails
    on corpora of similar documents. Its score for a chunk of a document outside the dense leg's candidates
    counts ``outside`` times (QUALITY.md: on the real filings this kept hybrid at or above the better leg).
    """
    fused: dict[str, float] = {}
    rows: dict[str, dict[str, Any]] = {}
    plausible = {r.get("doc_id") for r in dense}
    for leg in (dense, sparse):
        if not leg:
            continue
        scores = [float(r["score"]) for r in leg]
        w = leg_weight(scores, flat)
        hi, lo = scores[0], scores[-1]
        for r, sc in zip(leg, scores):
            z = (sc - lo) / (hi - lo) if hi > lo else 1.0
            if leg is sparse and dense and r.get("doc_id") not in plausible:
                z *= outside
            fused[r["chunk_id"]] = fused.get(r["chunk_id"], 0.0) + w * z
            rows.setdefault(r["chunk_id"], r)
    order = sorted(fused, key=lambda c: -fused[c])  # stable: dense order breaks exact ties
    return [dict(rows[c], score=fused[c]) for c in order]


_FIGURES = re.compile(r"\d[\d,]*(?:\.\d+)?")


def demote_duplicates(rows: list[dict[str, Any]], threshold: float) -> list[dict[str, Any]]:
    """Rows whose body (text after the breadcrumb) shares at least ``threshold`` of its words (Jaccard) with a
    better-ranked row, and no figure that row lacks, move below every distinct row, in order: a catalogue
    repeating a specification sheet fills the top k with one text twice, and the reader gains nothing from the
    copy. The same wording with other figures (a company's statement of another quarter) is another fact and
    keeps its place. ``threshold`` >= 1 turns it off."""
    if threshold >= 1.0:
        return rows
    seen: list[tuple[set[str], set[str]]] = []
    distinct, copies = [], []
    for r in rows:
        body = (r.get("text") or "").split("\n\n", 1)[-1]
        words = set(_WORDS.findall(body.lower()))
        figs = {f.replace(",", "") for f in _FIGURES.findall(body)}
        if words and any(len(words & w) >= threshold * len(words | w) and figs <= f for w, f in seen):
            copies.append(r)
        else:
            distinct.append(r)
            seen.append((words, figs))
    return distinct + copies


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
        """Answer several questions at once: one embedding call, one store call per distinct filter.

        The result list matches ``queries``; a question that cannot be answered (empty, bad k, bad filter,
        rerank unavailable, store error) holds its exception, so one bad request never fails its neighbours.
        ``timings_ms`` of a result are those of the shared steps it took part in (the batch's embed, its
        filter group's search) plus its own rerank.
        """
        rc = self.cfg.retrieval
        out: list[SearchResult | Exception | None] = [None] * len(queries)
        plans: list[tuple[int, bool, Any, str, dict[str, Any] | None]] = []  # (i, visual, scorer, expr, params)
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
                plans.append((i, visual, scorer, expr, params))
            except Exception as exc:  # noqa: BLE001 - the request's own error, returned in its slot
                out[i] = exc
        if not plans:
            return out  # type: ignore[return-value]

        vectors: dict[int, np.ndarray] = {}
        embed_ms = 0.0
        if rc.mode in ("dense", "hybrid"):  # BM25 alone needs no vector (and no model load)
            t = time.perf_counter()
            try:
                vecs = self._embed([queries[i].question for i, *_ in plans])
            except Exception as exc:  # noqa: BLE001 - every question of the batch shares the failure
                for i, *_ in plans:
                    out[i] = exc
                return out  # type: ignore[return-value]
            embed_ms = (time.perf_counter() - t) * 1000
            vectors = {i: v for (i, *_), v in zip(plans, vecs)}

        groups: dict[str, list[tuple[int, bool, Any, str, dict[str, Any] | None]]] = {}
        for plan in plans:
            groups.setdefault(repr((plan[3], sorted((plan[4] or {}).items()))), []).append(plan)
        for group in groups.values():
            idx = [p[0] for p in group]
            expr, params = group[0][3], group[0][4]
            t = time.perf_counter()
            try:
                rows_per_q = self._search(
                    np.stack([vectors[i] for i in idx]) if vectors else None,
                    [queries[i].question for i in idx], limit=max(rc.candidates, max(queries[i].k for i in idx)),
                    expr=expr, params=params,
                )
            except Exception as exc:  # noqa: BLE001 - the group's questions share the failure
                for i in idx:
                    out[i] = exc
                continue
            search_ms = (time.perf_counter() - t) * 1000
            for (i, visual, scorer, _, _), rows in zip(group, rows_per_q):
                timings = {"embed": embed_ms, "search": search_ms, "rerank": 0.0}
                try:
                    out[i] = self._finish(queries[i], rows, visual, scorer, timings)
                    out[i].batch_size = len(plans)  # type: ignore[union-attr]
                except Exception as exc:  # noqa: BLE001 - e.g. a reranker that misbehaves on this question
                    out[i] = exc
        return out  # type: ignore[return-value]

    def _search(self, vectors: np.ndarray | None, texts: list[str], limit: int, expr: str,
                params: dict[str, Any] | None) -> list[list[dict[str, Any]]]:
        """Candidates per question: one store call per leg. Adaptive fusion happens here, on the client; the other
        fusions run inside Milvus."""
        rc = self.cfg.retrieval
        kw: dict[str, Any] = {"limit": limit, "filter_expr": expr, "filter_params": params}
        if rc.mode != "hybrid" or rc.fusion != "adaptive":
            out = self.store.search_batch(vectors, texts, mode=rc.mode, fusion=rc.fusion, rrf_k=rc.rrf_k,
                                          dense_weight=rc.dense_weight, **kw)
        else:
            dense = self.store.search_batch(vectors, texts, mode="dense", **kw)
            lexical = [i for i, t in enumerate(texts) if t and t.strip()]
            sparse: list[list[dict[str, Any]]] = [[] for _ in texts]
            if lexical:
                for i, rows in zip(lexical, self.store.search_batch(None, [texts[i] for i in lexical],
                                                                    mode="sparse", **kw)):
                    sparse[i] = rows
            out = [fuse_adaptive(d, sp) for d, sp in zip(dense, sparse)]
        return [demote_duplicates(rows, rc.duplicate_threshold) for rows in out]

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

        hits = [
            Hit(
                rank=i + 1, score=float(r["score"]), chunk_id=r["chunk_id"], text=r.get("text") or "",
                breadcrumb=r.get("breadcrumb") or "", source=r.get("source") or "", doc_id=r.get("doc_id") or "",
                page_start=int(r.get("page_start") or 0), page_end=int(r.get("page_end") or 0),
                modality=r.get("modality") or "text", identity=r.get("identity") or "",
            )
            for i, r in enumerate(rows[: q.k])
        ]
        return SearchResult(hits=hits, timings_ms=timings)

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
