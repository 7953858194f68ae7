"""Milvus I/O for chunks: one collection schema, idempotent upserts, dense / BM25 / hybrid search.

The same class talks to a Milvus Lite directory (``*.db`` path, the embedded default) and to a Milvus server
(``http(s)://host:port``). BM25 runs inside Milvus: a ``Function`` turns ``search_text`` into the sparse vector
at insert time and the query text at search time, so no tokeniser lives on the client.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import numpy as np

from chunker.config import SERVER_ONLY_INDEX_TYPES, MilvusConfig
from chunker.errors import SchemaMismatch, StoreError, StoreUnavailable
from chunker.index.collection import (
    PROP_SCHEMA_VERSION, ROW_FIELDS, SCHEMA_VERSION, VARCHAR_SIZES, chunk_row,
    clip_utf8, create_collection, ensure_scalar_indexes,
)
from chunker.index.filters import render_filter
from chunker.index.params import index_search_params
from chunker.types import Chunk

CONNECT_TIMEOUT_S = 10.0
DELETE_TERMS = 1000  # values per delete expression; long "in" lists make slow plans on the server
SearchMode = Literal["dense", "sparse", "hybrid"]

def is_server_uri(uri: str) -> bool:
    return "://" in uri


def _lite_dir_locked(path: Path) -> bool:
    """True when another process holds Milvus Lite's LOCK file in ``path`` (False where it cannot tell)."""
    try:
        import fcntl

        fd = os.open(path / "LOCK", os.O_RDWR)
    except (ImportError, OSError):
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


def is_outage(exc: BaseException) -> bool:
    """True for errors of an unreachable store rather than of a wrong request or a defect: what serving answers
    with 503 and retries later. A server that died after we connected surfaces as a plain ``MilvusException`` with
    code ``CONNECT_FAILED`` (measured with pymilvus 3.0), so the code is checked too."""
    from pymilvus.client.types import Status
    from pymilvus.exceptions import (ConnectError, ConnectionNotExistException, MilvusException,
                                     MilvusUnavailableException)

    if isinstance(exc, (StoreUnavailable, ConnectionError, TimeoutError, ConnectError, ConnectionNotExistException,
                        MilvusUnavailableException)):
        return True
    return isinstance(exc, MilvusException) and getattr(exc, "code", None) == Status.CONNECT_FAILED


class ChunkStore:
    """One chunk collection in Milvus Lite or a Milvus server."""

    def __init__(self, cfg: MilvusConfig, dim: int, collection: str | None = None) -> None:
        from pymilvus import MilvusClient
        from pymilvus.exceptions import MilvusException

        self.cfg = cfg
        self.dim = int(dim)
        self.collection = collection or cfg.collection
        self.server = is_server_uri(cfg.uri)
        try:
            if self.server:
                # The one secret this module needs; named by config so deployments pick their own variable.
                token = os.environ.get(cfg.token_env, "")
                self.client = MilvusClient(uri=cfg.uri, token=token, timeout=min(CONNECT_TIMEOUT_S, cfg.call_timeout_s))
            else:
                path = Path(cfg.uri).expanduser()
                if path.suffix != ".db":
                    raise StoreError(f"milvus.uri {cfg.uri!r}: a Milvus Lite path must end in .db (or use http://host:port)")
                path.parent.mkdir(parents=True, exist_ok=True)
                self.client = MilvusClient(uri=str(path))
        except MilvusException as exc:
            raise self._connect_error(exc) from None
        # Lite 3.2 answers "milvus_lite-<version>", also behind `milvus-lite server`; it lacks filter templating
        # and the ICU tokenizer, so those are decided per connection, not per URI.
        with self._answering("get_server_version"):
            self.version = str(self.client.get_server_version(timeout=cfg.call_timeout_s))
        self.lite = "lite" in self.version.lower()
        if self.lite and cfg.index_type in SERVER_ONLY_INDEX_TYPES:
            raise StoreError(f"milvus.index_type {cfg.index_type} does not build on Milvus Lite ({cfg.uri} runs "
                             f"{self.version}); use HNSW, IVF_FLAT, IVF_SQ8, FLAT or AUTOINDEX, or a Milvus server")
        self.index_type = cfg.index_type  # the existing collection's own, once opened
        # Bumped by every write through this object: a reader's result cache keyed by it never serves an answer
        # from before a write made here (writers in other processes are bounded by the cache's TTL instead).
        self.generation = 0
        self._open_collection()

    def _connect_error(self, exc: Exception) -> StoreError:
        uri = self.cfg.uri
        if not self.server and _lite_dir_locked(Path(uri).expanduser()):
            return StoreUnavailable(
                f"Milvus Lite data directory {uri!r} is locked by another process (Lite allows one process per "
                f"directory). Serve it to several processes with `milvus-lite server --data-dir {uri} "
                f"--host 127.0.0.1 --port N` and set milvus.uri=http://127.0.0.1:N"
            )
        if self.server:
            return StoreUnavailable(
                f"cannot reach Milvus at {uri} ({exc}); start the server, check milvus.uri, or set "
                f"${self.cfg.token_env} if it needs a token"
            )
        return StoreUnavailable(f"cannot open Milvus Lite at {uri!r}: {exc}")

    @contextmanager
    def _answering(self, call: str) -> Iterator[None]:
        """Turns 'the server did not answer in time / is gone' into :class:`StoreUnavailable` (typed, by status
        code): pymilvus raises a bare grpc error for a missed deadline and a MilvusException for a lost peer."""
        import grpc
        from pymilvus.client.types import Status
        from pymilvus.exceptions import MilvusException

        gone = (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE)
        try:
            yield
        except grpc.RpcError as exc:
            code = exc.code() if callable(getattr(exc, "code", None)) else None
            if code not in gone:
                raise
            raise StoreUnavailable(f"Milvus at {self.cfg.uri} did not answer {call} ({code.name}; deadlines: "
                                   f"milvus.call_timeout_s={self.cfg.call_timeout_s:g} s for reads, "
                                   f"milvus.write_timeout_s={self.cfg.write_timeout_s:g} s for writes)") from None
        except MilvusException as exc:
            if exc.code != Status.CONNECT_FAILED and exc.code not in gone:
                raise
            raise StoreUnavailable(f"Milvus at {self.cfg.uri} is unreachable ({call}): {exc.message}") from None

    # ----------------------------------------------------------------- schema

    def _rebuild_hint(self) -> str:
        return (
            f"rebuild it: re-ingest with a fresh milvus.uri (or milvus.collection), drop collection "
            f"{self.collection!r}, or re-load the persisted chunks with `python -m jobs.rechunk ...`"
        )

    def _open_collection(self) -> None:
        name = self.collection
        with self._answering("opening the collection"):
            self._open_or_create(name)

    def _open_or_create(self, name: str) -> None:
        rt, wt = self.cfg.call_timeout_s, self.cfg.write_timeout_s
        if self.client.has_collection(name, timeout=rt):
            desc = self.client.describe_collection(name, timeout=rt)
            props = desc.get("properties") or {}
            version = props.get(PROP_SCHEMA_VERSION)
            if version != str(SCHEMA_VERSION):
                raise SchemaMismatch(
                    f"collection {name!r} at {self.cfg.uri} has schema version {version or 'unknown'}, this code "
                    f"writes version {SCHEMA_VERSION}; {self._rebuild_hint()}"
                )
            dims = [int(f["params"]["dim"]) for f in desc["fields"] if f["name"] == "dense"]
            if dims != [self.dim]:
                raise SchemaMismatch(
                    f"collection {name!r} holds {dims[0] if dims else '?'}-dim vectors but the embedder makes "
                    f"{self.dim}-dim ones; {self._rebuild_hint()}"
                )
            self.index_type = self._built_index_type()
        else:
            create_collection(self.client, self.collection, self.cfg, self.dim, self.lite)
        # Loading a large collection onto query nodes is slow: the write deadline, not the read one.
        self.client.load_collection(name, timeout=wt)
        ensure_scalar_indexes(self.client, self.collection, self.cfg)

    def _built_index_type(self) -> str:
        """The dense index the collection was built with (search parameters must fit it, not today's config)."""
        try:
            built = str(self.client.describe_index(self.collection, "dense", timeout=self.cfg.call_timeout_s)
                        .get("index_type") or self.cfg.index_type)
        except Exception:  # noqa: BLE001 - an index named otherwise (built by hand): the config is the best guess
            return self.cfg.index_type
        if built != self.cfg.index_type:
            logging.getLogger("chunker.index.store").warning(
                "collection %s has a %s index; milvus.index_type=%s applies only to new collections",
                self.collection, built, self.cfg.index_type)
        return built

    # ------------------------------------------------------------------ writes

    def mark_changed(self) -> None:
        """Say the collection changed, after the change (every write here calls it; a writer that loads rows another
        way, such as a bulk import, calls it too), so cached search results of this process are not served again."""
        self.generation += 1

    def upsert(self, chunks: list[Chunk], vectors: np.ndarray) -> int:
        """Insert or replace chunks by chunk_id; returns the rows written."""
        vectors = np.asarray(vectors, dtype=np.float32)
        if len(chunks) != len(vectors):
            raise ValueError(f"{len(chunks)} chunks but {len(vectors)} vectors")
        if len(chunks) and vectors.shape[1] != self.dim:
            raise ValueError(f"vectors have dim {vectors.shape[1]}, the collection {self.dim}")
        # Duplicate IDs in one call: the last wins, as it would across calls.
        rows = list({c.chunk_id: chunk_row(c, v) for c, v in zip(chunks, vectors)}.values())
        step = self.cfg.upsert_batch
        try:
            with self._answering("upsert"):
                for i in range(0, len(rows), step):
                    self.client.upsert(self.collection, rows[i : i + step], timeout=self.cfg.write_timeout_s)
        finally:
            self.mark_changed()  # after the write, partial ones too: a search begun before it is not cached as new
        return len(rows)

    def _filter(self, expr: str, params: dict[str, Any] | None) -> dict[str, Any]:
        """Keyword arguments carrying a filter: templated on servers, rendered to literals on Lite."""
        if not expr:
            return {}
        if params and not self.lite:
            return {"filter": expr, "filter_params": dict(params)}
        return {"filter": render_filter(expr, params or {})}

    def _delete_where(self, expr: str, params: dict[str, Any]) -> int:
        """Delete by expression; the rows deleted where the store says (Lite lists them, servers count them)."""
        try:
            with self._answering("delete"):
                res = self.client.delete(self.collection, timeout=self.cfg.write_timeout_s, **self._filter(expr, params))
        finally:
            self.mark_changed()
        if isinstance(res, dict):
            return int(res.get("delete_count") or res.get("deleted_count") or 0)
        return len(res or [])

    def delete_other_versions(self, source_uri: str, keep_doc_id: str) -> int:
        """Remove chunks from ``source_uri`` (the absolute URI) that belong to another version than ``keep_doc_id``."""
        return self.delete_stale([(source_uri, keep_doc_id, None)])

    def delete_doc(self, doc_id: str) -> int:
        return self._delete_where("doc_id == {doc_id}", {"doc_id": doc_id})

    def delete_doc_except(self, doc_id: str, keep: set[str]) -> int:
        """Remove a document's chunks that a new plan no longer has (settings changed between runs)."""
        if not keep:
            return self.delete_doc(doc_id)
        return self._delete_where("doc_id == {doc_id} and chunk_id not in {keep}",
                                  {"doc_id": doc_id, "keep": sorted(keep)})

    def delete_stale(self, docs: list[tuple[str, str, list[str] | None]]) -> int:
        """For each just-committed document ``(source_uri, doc_id, chunk_ids)``: delete the rows of the same absolute
        source URI that are not among its new chunks (other versions of the file, and chunks a new plan no longer
        has); with ``chunk_ids`` None, the rows of that URI that belong to another version than ``doc_id``. One
        expression per group of documents (``DELETE_TERMS`` values at most, a bigger document alone), no count
        queries: the writer's cost per document is a share of one call.

        Scoped by source URI, never by ``doc_id`` alone: the same bytes at two paths are two documents (a chunk ID
        hashes the copy's URI in, chunker.plan.deterministic.chunk_id), so committing one copy never deletes the
        other's rows. Grouping is exact for the same reason: a kept ID of one URI is never a row of another.
        """
        deleted = 0
        group: list[tuple[str, str, list[str] | None]] = []
        terms = 0
        for doc in docs:
            size = 2 + len(doc[2] or [])
            if group and terms + size > DELETE_TERMS:
                deleted += self._delete_group(group)
                group, terms = [], 0
            group.append(doc)
            terms += size
        if group:
            deleted += self._delete_group(group)
        return deleted

    def _delete_group(self, group: list[tuple[str, str, list[str] | None]]) -> int:
        def uris(docs: list[tuple[str, str, list[str] | None]]) -> list[str]:
            return sorted({clip_utf8(u, VARCHAR_SIZES["source_uri"]) for u, _, _ in docs})

        parts: list[str] = []
        params: dict[str, Any] = {}
        planned = [d for d in group if d[2] is not None]
        versions = [d for d in group if d[2] is None]
        if planned:
            parts.append("(source_uri in {uris} and chunk_id not in {keep})")
            params["uris"] = uris(planned)
            params["keep"] = sorted({c for _, _, keep in planned for c in keep or []}) or [""]
        if versions:
            parts.append("(source_uri in {version_uris} and doc_id not in {ids})")
            params["version_uris"] = uris(versions)
            params["ids"] = sorted({d for _, d, _ in versions})
        return self._delete_where(" or ".join(parts), params)

    def flush(self) -> None:
        with self._answering("flush"):
            self.client.flush(self.collection, timeout=self.cfg.write_timeout_s)

    # ------------------------------------------------------------------- reads

    def _count(self, filter_kw: dict[str, Any]) -> int:
        with self._answering("count"):
            res = self.client.query(
                self.collection, output_fields=["count(*)"], consistency_level="Strong",
                timeout=self.cfg.call_timeout_s, **({"filter": ""} | filter_kw)
            )
        return int(res[0]["count(*)"]) if res else 0

    def ready(self) -> bool:
        """One cheap metadata call within the read deadline: does the collection still exist?"""
        with self._answering("has_collection"):
            return bool(self.client.has_collection(self.collection, timeout=self.cfg.call_timeout_s))

    def count(self) -> int:
        """Exact number of rows (flushes first)."""
        self.flush()
        return self._count({})

    def chunk_ids(self) -> set[str]:
        out: set[str] = set()
        # Lite cannot hand out an MVCC timestamp, so pymilvus warns on every iterator; the fallback it uses
        # (a client-side timestamp) is right for us, so that one warning is silenced for the call.
        # The in-process Lite server also logs the refused timestamp call as an ERROR with a traceback.
        logs = [logging.getLogger("pymilvus.client.iterator.query_iterator"), logging.getLogger("grpc._server")]
        levels = [log.level for log in logs]
        if self.lite:
            for log in logs:
                log.setLevel(logging.CRITICAL)
        try:
            it = self.client.query_iterator(self.collection, batch_size=1000, filter="", output_fields=["chunk_id"])
            try:
                while batch := it.next():
                    out.update(r["chunk_id"] for r in batch)
            finally:
                it.close()
        finally:
            for log, level in zip(logs, levels):
                log.setLevel(level)
        return out

    def sample_search_texts(self, max_rows: int) -> list[str]:
        """The BM25 text of about ``max_rows`` rows spread over the collection (all rows of a smaller one): those
        whose chunk ID ends in as many "0"s as it takes. Chunk IDs are hex hashes, so that is every 16th, 256th ...
        row whatever the document; a suffix filter, since Lite has no random sampling (one scan: ~0.7 s at 100k)."""
        n = self._count({})
        if n == 0:
            return []
        k = 0
        while n / 16 ** k > max_rows:
            k += 1
        flt = f'chunk_id like "%{"0" * k}"' if k else ""
        with self._answering("query"):
            rows = self.client.query(self.collection, filter=flt, output_fields=["search_text"],
                                     limit=min(16384, max(1, n if not k else max_rows * 4)),
                                     timeout=self.cfg.call_timeout_s)
        return [str(r.get("search_text") or "") for r in rows]

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

        fkw = self._filter(filter_expr, filter_params)
        dense_req = None if dense is None else np.asarray(dense, dtype=np.float32).reshape(n, -1).tolist()
        # The deadline also bounds pymilvus' retry loop (decorators.retry_on_rpc_failure). Without one, a server that
        # accepts connections but never answers held a search for 70 s (until gRPC keepalive dropped the connection;
        # measured against a SIGSTOPped milvus-lite server).
        fields = list(ROW_FIELDS) if fields is None else list(dict.fromkeys(["chunk_id", *fields]))
        # An empty output_fields means "every field" to Milvus Lite (vectors included) but "the key only" to a
        # server: naming the key means the key alone to both.
        common = {"limit": int(limit), "output_fields": fields, "timeout": self.cfg.call_timeout_s}
        if mode == "dense":
            with self._answering("search"):
                res = self.client.search(self.collection, data=dense_req, anns_field="dense",
                                         search_params=self._dense_search_params(int(limit)), **common, **fkw)
            # L2 is a distance: negate so that every mode reports "higher is better".
            sign = -1.0 if self.cfg.metric == "L2" else 1.0
            return [[self._row(h, sign * float(h["distance"]), fields) for h in hits] for hits in res]
        if mode == "sparse":
            with self._answering("search"):
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
        with self._answering("hybrid_search"):
            res = self.client.hybrid_search(self.collection, reqs, ranker, **common)
        return [[self._row(h, float(h["distance"]), fields) for h in hits] for hits in res]

    def _dense_search_params(self, limit: int) -> dict[str, Any]:
        # On Lite the HNSW lookup is ~1 ms of a search (ef buys little there); on a server ef / nprobe /
        # search_list trade recall for latency. AUTOINDEX and FLAT take none.
        params = index_search_params(self.cfg, self.index_type, limit)
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
        with self._answering("get"):
            res = self.client.get(self.collection, ids=ids, output_fields=wanted, timeout=self.cfg.call_timeout_s)
        out = {}
        for entity in res:
            row = self._fields(entity, wanted)
            out[row["chunk_id"]] = row
        return out

    def query_rows(self, expr: str, params: dict[str, Any] | None, fields: list[str], limit: int) -> list[dict[str, Any]]:
        """Rows matching a filter expression (at most ``limit``), with ``fields`` and ``chunk_id``; no order."""
        wanted = list(dict.fromkeys(["chunk_id", *fields]))
        with self._answering("query"):
            res = self.client.query(self.collection, output_fields=wanted, limit=limit,
                                    timeout=self.cfg.call_timeout_s, **self._filter(expr, params))
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

    def drop(self) -> None:
        """Drop the whole collection (a rebuild starts from nothing)."""
        try:
            self.client.drop_collection(self.collection, timeout=self.cfg.write_timeout_s)
        finally:
            self.mark_changed()

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> "ChunkStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
