"""Milvus I/O for chunks: one collection schema, idempotent upserts and deletes; the searches come from a mixin.

The same class talks to a Milvus Lite directory (``*.db`` path, the embedded default) and to a Milvus server
(``http(s)://host:port``). This module owns the connection, opening (or creating) the collection and checking its
schema, the writes, and counts; :mod:`chunker.index.store_search` holds the searches (dense / BM25 / hybrid, rows by
key) that :class:`ChunkStore` inherits, and :mod:`chunker.index.outage` turns a store that is gone, locked or silent
into typed errors. BM25 runs inside Milvus: a ``Function`` turns ``search_text`` into the sparse vector at insert
time and the query text at search time, so no tokeniser lives on the client.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import numpy as np

from chunker.config import SERVER_ONLY_INDEX_TYPES, MilvusConfig
# StoreUnavailable and is_outage are re-exported: callers import them from here.
from chunker.errors import SchemaMismatch, StoreError, StoreUnavailable  # noqa: F401
from chunker.index.collection import (
    PROP_SCHEMA_VERSION, SCHEMA_VERSION, VARCHAR_SIZES, chunk_row,
    clip_utf8, create_collection, ensure_indexes,
)
from chunker.index.filters import filter_kwargs
from chunker.index.outage import answering, connect_error, is_outage  # noqa: F401
from chunker.index.store_search import ChunkSearch, SearchMode  # noqa: F401 - SearchMode: re-exported
from chunker.types import Chunk

CONNECT_TIMEOUT_S = 10.0
DELETE_TERMS = 1000  # values per delete expression; long "in" lists make slow plans on the server

def is_server_uri(uri: str) -> bool:
    return "://" in uri


class ChunkStore(ChunkSearch):
    """One chunk collection in Milvus Lite or a Milvus server (searches: :class:`ChunkSearch`)."""

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
                # A connection of its own, closed with the store: pymilvus 3 shares one channel per URI and keeps it
                # open after the last client closes, pinging every 10 s (pymilvus/client/connection_manager.py,
                # grpc_handler.py). A server stricter on idle pings (`milvus-lite server`) answers with a GOAWAY, and
                # the next store opened on that URI (a job counting rows after its drivers) failed to reconnect.
                self.client = MilvusClient(uri=cfg.uri, token=token, timeout=min(CONNECT_TIMEOUT_S, cfg.call_timeout_s),
                                           dedicated=True)
            else:
                path = Path(cfg.uri).expanduser()
                if path.suffix != ".db":
                    raise StoreError(f"milvus.uri {cfg.uri!r}: a Milvus Lite path must end in .db (or use http://host:port)")
                path.parent.mkdir(parents=True, exist_ok=True)
                self.client = MilvusClient(uri=str(path))
        except MilvusException as exc:
            raise connect_error(cfg, self.server, exc) from None
        # Lite 3.2 answers "milvus_lite-<version>", also behind `milvus-lite server`; it lacks filter templating
        # and the ICU tokenizer, so those are decided per connection, not per URI.
        with answering(self.cfg, "get_server_version"):
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

    # ----------------------------------------------------------------- schema

    def _rebuild_hint(self) -> str:
        return (
            f"rebuild it: re-ingest with a fresh milvus.uri (or milvus.collection), drop collection "
            f"{self.collection!r}, or re-load the persisted chunks with `python -m jobs.rechunk ...`"
        )

    def _open_collection(self) -> None:
        name = self.collection
        with answering(self.cfg, "opening the collection"):
            self._open_or_create(name)

    def _open_or_create(self, name: str) -> None:
        rt, wt = self.cfg.call_timeout_s, self.cfg.write_timeout_s
        created = False
        if not self.client.has_collection(name, timeout=rt):
            created = create_collection(self.client, self.collection, self.cfg, self.dim, self.lite)
        if not created:  # ours from an earlier run, or another process' made a moment ago: it must be this shape
            self._check_existing(name)
        # Every opener builds what is missing before loading (see ensure_indexes): shards starting together on a
        # fresh Milvus each find the collection in whatever state the first one left it.
        ensure_indexes(self.client, self.collection, self.cfg, self.lite)
        if not created:
            self.index_type = self._built_index_type()
        # Loading a large collection onto query nodes is slow: the write deadline, not the read one.
        self.client.load_collection(name, timeout=wt)

    def _check_existing(self, name: str) -> None:
        rt = self.cfg.call_timeout_s
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
            with answering(self.cfg, "upsert"):
                for i in range(0, len(rows), step):
                    self.client.upsert(self.collection, rows[i : i + step], timeout=self.cfg.write_timeout_s)
        finally:
            self.mark_changed()  # after the write, partial ones too: a search begun before it is not cached as new
        return len(rows)

    def _delete_where(self, expr: str, params: dict[str, Any]) -> int:
        """Delete by expression; the rows deleted where the store says (Lite lists them, servers count them)."""
        try:
            with answering(self.cfg, "delete"):
                res = self.client.delete(self.collection, timeout=self.cfg.write_timeout_s,
                                         **filter_kwargs(expr, params, self.lite))
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
        with answering(self.cfg, "flush"):
            self.client.flush(self.collection, timeout=self.cfg.write_timeout_s)

    # ------------------------------------------------------------------- reads

    def _count(self, filter_kw: dict[str, Any]) -> int:
        with answering(self.cfg, "count"):
            res = self.client.query(
                self.collection, output_fields=["count(*)"], consistency_level="Strong",
                timeout=self.cfg.call_timeout_s, **({"filter": ""} | filter_kw)
            )
        return int(res[0]["count(*)"]) if res else 0

    def ready(self) -> bool:
        """One cheap metadata call within the read deadline: does the collection still exist?"""
        with answering(self.cfg, "has_collection"):
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
        with answering(self.cfg, "query"):
            rows = self.client.query(self.collection, filter=flt, output_fields=["search_text"],
                                     limit=min(16384, max(1, n if not k else max_rows * 4)),
                                     timeout=self.cfg.call_timeout_s)
        return [str(r.get("search_text") or "") for r in rows]


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