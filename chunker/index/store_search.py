"""The search half of :class:`chunker.index.store.ChunkStore`: dense / BM25 / hybrid legs, rows by key, hit rows.

:class:`ChunkSearch` is a mixin: ``ChunkStore`` owns the connection, the collection and the writes, and inherits
these reads, so callers keep calling ``store.search(...)``. It needs the attributes a ``ChunkStore`` sets up
(annotated below). BM25 runs inside Milvus: a ``Function`` turns the query text into the sparse vector, so no
tokeniser lives on the client. pymilvus is imported inside the methods.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from chunker.config import MilvusConfig
from chunker.index.collection import ROW_FIELDS
from chunker.index.filters import filter_kwargs
from chunker.index.outage import answering
from chunker.index.params import index_search_params

SearchMode = Literal["dense", "sparse", "hybrid"]


class ChunkSearch:
    """Searches and key lookups on one chunk collection (mixed into :class:`chunker.index.store.ChunkStore`)."""

    cfg: MilvusConfig
    client: Any  # pymilvus.MilvusClient
    collection: str
    lite: bool
    index_type: str  # the collection's own dense index (search parameters must fit it)

    def search(
        self,
        dense: np.ndarray | None,
        text: str | None,
        mode: SearchMode = "hybrid",
        limit: int = 10,
        filter_expr: str = "",
        filter_params: dict[str, Any] | None = None,
        fusion: Literal["rrf", "weighted"] = "rrf",
        rrf_k: int = 60,
        dense_weight: float = 0.5,
    ) -> list[dict[str, Any]]:
        """Rows with a ``score`` (higher is better), best first.

        A hybrid search with blank text (nothing for BM25 to match) degrades to dense; sparse needs text.
        """
        vectors = None if dense is None else np.asarray(dense, dtype=np.float32).reshape(1, -1)
        return self.search_batch(vectors, None if text is None else [text], mode=mode, limit=limit,
                                 filter_expr=filter_expr, filter_params=filter_params, fusion=fusion, rrf_k=rrf_k,
                                 dense_weight=dense_weight)[0]

    def search_batch(
        self,
        dense: np.ndarray | None,
        texts: list[str | None] | None,
        mode: SearchMode = "hybrid",
        limit: int = 10,
        filter_expr: str = "",
        filter_params: dict[str, Any] | None = None,
        fusion: Literal["rrf", "weighted"] = "rrf",
        rrf_k: int = 60,
        dense_weight: float = 0.5,
        fields: list[str] | None = None,
    ) -> list[list[dict[str, Any]]]:
        """:meth:`search` for n queries that share a mode, limit and filter, in one Milvus call per leg.

        ``dense`` is (n, dim) or None, ``texts`` n strings or None. One call instead of n matters on Milvus Lite:
        every search call walks all rows in Python to mask deleted and superseded versions, whatever the index,
        while the index lookup itself takes ~1 ms per query.

        ``fields``: the row fields each hit carries (default: all of ``ROW_FIELDS``); ``[]`` gives ``chunk_id`` and
        ``score`` only, for a caller that fuses candidates first and fetches the winners' fields with
        :meth:`fetch`.
        """
        n = len(dense) if dense is not None else len(texts or [])
        if dense is not None and texts is not None and len(texts) != n:
            raise ValueError(f"{n} query vectors but {len(texts)} query texts")
        if n == 0:
            return []
        has_text = [bool(t and t.strip()) for t in (texts or [None] * n)]
        if mode in ("dense", "hybrid") and dense is None:
            raise ValueError(f"{mode} search needs a query vector")
        if mode == "sparse" and not all(has_text):
            raise ValueError("sparse search needs query text")
        if mode == "hybrid" and not all(has_text):
            # Blank text leaves BM25 nothing to match: those queries go dense, the rest stay hybrid.
            out: list[list[dict[str, Any]]] = [[] for _ in range(n)]
            kw = {"limit": limit, "filter_expr": filter_expr, "filter_params": filter_params, "fusion": fusion,
                  "rrf_k": rrf_k, "dense_weight": dense_weight, "fields": fields}
            for sub_mode, idx in (("dense", [i for i in range(n) if not has_text[i]]),
                                  ("hybrid", [i for i in range(n) if has_text[i]])):
                if idx:
                    sub_texts = [texts[i] for i in idx] if texts is not None else None
                    for i, rows in zip(idx, self.search_batch(dense[idx], sub_texts, mode=sub_mode, **kw)):
                        out[i] = rows
            return out
        from pymilvus import AnnSearchRequest, RRFRanker, WeightedRanker

        fkw = filter_kwargs(filter_expr, filter_params, self.lite)
        dense_req = None if dense is None else np.asarray(dense, dtype=np.float32).reshape(n, -1).tolist()
        # The deadline also bounds pymilvus' retry loop (decorators.retry_on_rpc_failure). Without one, a server that
        # accepts connections but never answers held a search for 70 s (until gRPC keepalive dropped the connection;
        # measured against a SIGSTOPped milvus-lite server).
        fields = list(ROW_FIELDS) if fields is None else list(dict.fromkeys(["chunk_id", *fields]))
        # An empty output_fields means "every field" to Milvus Lite (vectors included) but "the key only" to a
        # server: naming the key means the key alone to both.
        common = {"limit": int(limit), "output_fields": fields, "timeout": self.cfg.call_timeout_s}
        if mode == "dense":
            with answering(self.cfg, "search"):
                res = self.client.search(self.collection, data=dense_req, anns_field="dense",
                                         search_params=self._dense_search_params(int(limit)), **common, **fkw)
            # L2 is a distance: negate so that every mode reports "higher is better".
            sign = -1.0 if self.cfg.metric == "L2" else 1.0
            return [[self._row(h, sign * float(h["distance"]), fields) for h in hits] for hits in res]
        if mode == "sparse":
            with answering(self.cfg, "search"):
                res = self.client.search(self.collection, data=list(texts or []), anns_field="sparse",
                                         search_params={"metric_type": "BM25"}, **common, **fkw)
            # BM25 scores are >= 0; Lite reports them negated (as distances), a server as is.
            return [[self._row(h, abs(float(h["distance"])), fields) for h in hits] for hits in res]
        req_kw: dict[str, Any] = {}
        if fkw:
            req_kw["expr"] = fkw["filter"]
            if "filter_params" in fkw:
                req_kw["expr_params"] = fkw["filter_params"]
        reqs = [
            AnnSearchRequest(data=dense_req, anns_field="dense", param=self._dense_search_params(int(limit)),
                             limit=int(limit), **req_kw),
            AnnSearchRequest(data=list(texts or []), anns_field="sparse", param={"metric_type": "BM25"},
                             limit=int(limit), **req_kw),
        ]
        ranker = RRFRanker(int(rrf_k)) if fusion == "rrf" else WeightedRanker(float(dense_weight), 1.0 - float(dense_weight))
        with answering(self.cfg, "hybrid_search"):
            res = self.client.hybrid_search(self.collection, reqs, ranker, **common)
        return [[self._row(h, float(h["distance"]), fields) for h in hits] for hits in res]

    def _dense_search_params(self, limit: int) -> dict[str, Any]:
        # On Lite the HNSW lookup is ~1 ms of a search, ef 256 included; on a server ef / nprobe / search_list
        # trade recall for latency. FLAT takes none, nor does a server's AUTOINDEX (Lite's is HNSW: see params).
        params = index_search_params(self.cfg, self.index_type, limit, self.lite)
        return {"metric_type": self.cfg.metric, **({"params": params} if params else {})}

    def fetch(self, chunk_ids: list[str], fields: list[str] | None = None) -> dict[str, dict[str, Any]]:
        """The rows of ``chunk_ids`` by primary key, in one call: chunk_id -> row (``fields``, default all of
        ``ROW_FIELDS``). An ID no longer stored (deleted since it was found) is absent from the answer.

        A key lookup, not a scan: Milvus Lite answers an ``in`` list on the primary key with point reads
        (milvus_lite/adapter/grpc/servicer.py, ``Query``), a server from its primary-key index."""
        ids = list(dict.fromkeys(chunk_ids))
        if not ids:
            return {}
        wanted = list(ROW_FIELDS) if fields is None else list(dict.fromkeys(["chunk_id", *fields]))
        with answering(self.cfg, "get"):
            res = self.client.get(self.collection, ids=ids, output_fields=wanted, timeout=self.cfg.call_timeout_s)
        out = {}
        for entity in res:
            row = self._fields(entity, wanted)
            out[row["chunk_id"]] = row
        return out

    def query_rows(self, expr: str, params: dict[str, Any] | None, fields: list[str], limit: int) -> list[dict[str, Any]]:
        """Rows matching a filter expression (at most ``limit``), with ``fields`` and ``chunk_id``; no order."""
        wanted = list(dict.fromkeys(["chunk_id", *fields]))
        with answering(self.cfg, "query"):
            res = self.client.query(self.collection, output_fields=wanted, limit=limit,
                                    timeout=self.cfg.call_timeout_s, **filter_kwargs(expr, params, self.lite))
        return [self._fields(entity, wanted) for entity in res]

    @staticmethod
    def _fields(entity: dict[str, Any], fields: list[str]) -> dict[str, Any]:
        row = {k: entity.get(k) for k in fields}
        if "element_ids" in row:
            row["element_ids"] = list(row["element_ids"] or [])
        return row

    @classmethod
    def _row(cls, hit: dict[str, Any], score: float, fields: list[str]) -> dict[str, Any]:
        row = cls._fields(hit.get("entity") or {}, fields)
        # pymilvus 3 names a hit's key by the key field ("chunk_id"); older clients said "id".
        row["chunk_id"] = (hit.get("entity") or {}).get("chunk_id") or hit.get("chunk_id") or hit.get("id")
        row["score"] = score
        return row
