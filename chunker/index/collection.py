"""The chunk collection's shape in Milvus: its fields, analyzers and indexes, and the row each chunk becomes.

Kept apart from :mod:`chunker.index.store` (connections, writes, searches) so the schema reads in one place: a
change here is a change of ``SCHEMA_VERSION``, and an existing collection of another version is refused.
"""

from __future__ import annotations

import logging
import re
from pathlib import PurePath
from typing import Any

import numpy as np

from chunker.config import MilvusConfig
from chunker.errors import StoreError
from chunker.index.params import as_index_params, bm25_build_params, index_build_params
from chunker.index.period_terms import split_periods
from chunker.types import Chunk, safe_text

SCHEMA_VERSION = 2  # 2: the document identity field
PROP_SCHEMA_VERSION = "chunker.schema_version"
PROP_DIM = "chunker.dim"
PROP_ANALYZER = "chunker.analyzer"
MAX_VARCHAR = 65535  # Milvus' cap on VARCHAR max_length (bytes)
ROW_FIELDS = [
    "chunk_id", "doc_id", "source", "source_uri", "breadcrumb", "text", "identity",
    "page_start", "page_end", "modality", "planner", "config_hash", "element_ids",
]
# Scalar indexes on the fields the writer deletes by: without them every delete expression scans every row.
# INVERTED builds on VARCHAR on servers and on Milvus Lite 3.2 (measured), also on a collection already loaded.
SCALAR_INDEXED = ("doc_id", "source_uri")
VARCHAR_SIZES = {"doc_id": 128, "source": 2048, "source_uri": 4096, "breadcrumb": 4096, "text": MAX_VARCHAR,
                 "identity": 2048}

# A short explicit stop list rather than Milvus' "_english_" alias: Milvus Lite reads stop words literally,
# so only an explicit list behaves the same on Lite and on a server.
_ENGLISH_STOP_WORDS = (
    "a an and are as at be but by for if in into is it no not of on or such that the their then there these they "
    "this to was will with what which how does do who when where why"
).split()


def analyzer_params(analyzer: str, lite: bool) -> dict[str, Any]:
    """Milvus analyzer params for the configured analyzer name.

    Written as custom analyzers (tokenizer + filters) because Milvus Lite only reads that form; a server
    treats them exactly like its built-in analyzers of the same name.
    """
    if analyzer == "english":
        return {
            "tokenizer": "standard",
            "filter": ["lowercase", {"type": "stemmer", "language": "english"},
                       {"type": "stop", "stop_words": _ENGLISH_STOP_WORDS}],
        }
    if analyzer == "standard":
        return {"tokenizer": "standard", "filter": ["lowercase"]}
    if analyzer == "chinese":
        return {"tokenizer": "jieba", "filter": ["cnalphanumonly"]}
    if analyzer == "multilingual":
        # Lite has no ICU tokenizer; its standard tokenizer is a Unicode \w+ splitter, the closest it offers.
        if lite:
            return {"tokenizer": "standard", "filter": ["lowercase"]}
        return {"tokenizer": "icu", "filter": ["lowercase"]}
    raise StoreError(f"unknown analyzer {analyzer!r}; known: english, standard, chinese, multilingual")


def clip_utf8(text: str, max_bytes: int = MAX_VARCHAR) -> str:
    # VARCHAR limits count bytes; cut on a character boundary so the row is still valid UTF-8.
    text = safe_text(text)
    raw = text.encode("utf-8")
    if len(raw) <= max_bytes:
        return text
    return raw[:max_bytes].decode("utf-8", errors="ignore")


# A number followed by a word in one token of a file name: "2023Q2", "10Q", "8K".
_NUMBER_THEN_WORD = re.compile(r"(?<=\d)(?=[A-Za-z])")


def source_words(source: str) -> str:
    """A document's file name as words ("filings/BWH_QR_2024-06-30.pdf" -> "BWH QR 2024 06 30").

    A name token that glues a number to the word after it, or a period prefix to its year, is kept and also
    written apart: "AMCOR_2023Q2_10Q.pdf" -> "AMCOR 2023Q2 2023 Q2 10Q 10 Q". Why: the analyzer keeps "2023Q2" and
    "10Q" whole, while a question says "Q2 of FY2023" (split to "Q2 ... FY 2023" for BM25) or "10-Q" ("10", "q"),
    so the name, often the only place a filing's quarter is written, matched nothing of it. The glued token stays
    for a question that writes it so; a code that starts with letters ("A350", "HX100") is left whole."""
    if not source:
        return ""
    out = []
    for word in re.sub(r"[\s_.\-]+", " ", PurePath(source).stem).split():
        out.append(word)
        parts = split_periods(_NUMBER_THEN_WORD.sub(" ", word)).split()
        if len(parts) > 1:
            out.extend(parts)
    return " ".join(out)


def search_text(chunk: Chunk) -> str:
    """What BM25 indexes: the document's file name and identity line, then the chunk text with its breadcrumb
    counted once (the planner already starts the text with it; twice would let a word of the heading chain outweigh
    the same word in the body). Name and identity are document-level context the chunk text often lacks: the issuer
    and period of a filing, the model of a specification sheet, live on a cover page and in the name, not in a
    table's rows."""
    crumb = chunk.breadcrumb.strip()
    body = chunk.text if not crumb or chunk.text.startswith(crumb) else f"{crumb}\n{chunk.text}"
    head = "\n".join(p for p in (source_words(chunk.source), chunk.identity.strip()) if p)
    return f"{head}\n{body}" if head else body


def chunk_row(chunk: Chunk, vector: np.ndarray) -> dict[str, Any]:
    """The Milvus row of one chunk (the sparse vector is filled by the BM25 function)."""
    return {
        "chunk_id": chunk.chunk_id, "doc_id": chunk.doc_id,
        "source": clip_utf8(chunk.source, VARCHAR_SIZES["source"]),
        "source_uri": clip_utf8(chunk.source_uri, VARCHAR_SIZES["source_uri"]),
        "breadcrumb": clip_utf8(chunk.breadcrumb, VARCHAR_SIZES["breadcrumb"]),
        "text": clip_utf8(chunk.text),
        "identity": clip_utf8(chunk.identity, VARCHAR_SIZES["identity"]),
        "search_text": clip_utf8(search_text(chunk)),
        "dense": np.asarray(vector, dtype=np.float32).tolist(),
        "page_start": int(chunk.page_start), "page_end": int(chunk.page_end),
        "modality": chunk.modality, "planner": chunk.planner, "config_hash": chunk.config_hash,
        "element_ids": list(chunk.element_ids),
    }


def create_collection(client: Any, collection: str, cfg: MilvusConfig, dim: int, lite: bool) -> bool:
    """Create the collection (schema and properties, no index: :func:`ensure_indexes` builds those). Returns False
    when another process created it first: shards or drivers starting together on a fresh Milvus all try, and a
    server accepts an identical second create while Milvus Lite refuses it; either way the collection is there."""
    from pymilvus import DataType, Function, FunctionType
    from pymilvus.exceptions import MilvusException

    c = client
    schema = c.create_schema(auto_id=False, enable_dynamic_field=False, description="chunker chunks")
    schema.add_field("chunk_id", DataType.VARCHAR, is_primary=True, max_length=256)
    for name, size in VARCHAR_SIZES.items():
        schema.add_field(name, DataType.VARCHAR, max_length=size)
    schema.add_field(
        "search_text", DataType.VARCHAR, max_length=MAX_VARCHAR, enable_analyzer=True,
        analyzer_params=analyzer_params(cfg.analyzer, lite),
    )
    schema.add_field("sparse", DataType.SPARSE_FLOAT_VECTOR)
    schema.add_field("dense", DataType.FLOAT_VECTOR, dim=dim)
    schema.add_field("page_start", DataType.INT64)
    schema.add_field("page_end", DataType.INT64)
    for name in ("modality", "planner", "config_hash"):
        schema.add_field(name, DataType.VARCHAR, max_length=64)
    schema.add_field("element_ids", DataType.JSON)
    schema.add_function(Function(
        name="search_text_bm25", function_type=FunctionType.BM25,
        input_field_names=["search_text"], output_field_names=["sparse"],
    ))
    properties = {
        PROP_SCHEMA_VERSION: str(SCHEMA_VERSION), PROP_DIM: str(dim), PROP_ANALYZER: cfg.analyzer,
    }
    try:
        # No index_params: pymilvus would then create, index and load in three calls, and a second process that
        # sees the collection between the first two loads it without its vector index, which a server refuses
        # ("there is no vector index on field"). Every opener builds the missing indexes itself before loading.
        c.create_collection(collection, schema=schema, properties=properties, timeout=cfg.write_timeout_s)
    except ImportError as exc:  # Lite builds the jieba tokenizer at creation
        raise StoreError(f"analyzer {cfg.analyzer!r} needs an extra package: {exc} (pip install jieba)") from None
    except MilvusException:
        # Decided by what the server holds now, not by the message: another opener's create came first.
        if not c.has_collection(collection, timeout=cfg.call_timeout_s):
            raise
        return False
    return True


def _index_params(client: Any, cfg: MilvusConfig) -> dict[str, Any]:
    """Each indexed field's own index (one ``create_index`` call each, so one that exists does not stop the rest)."""
    out = {}
    for name, kind in (("dense", "dense"), ("sparse", "sparse"), *((f, "scalar") for f in SCALAR_INDEXED)):
        params = client.prepare_index_params()
        if kind == "dense":
            params.add_index(name, index_type=cfg.index_type, metric_type=cfg.metric,
                             params=as_index_params(index_build_params(cfg)))
        elif kind == "sparse":
            params.add_index(name, index_type="SPARSE_INVERTED_INDEX", metric_type="BM25",
                             params=as_index_params(bm25_build_params(cfg)))
        else:
            params.add_index(name, index_type="INVERTED")
        out[name] = params
    return out


def ensure_indexes(client: Any, collection: str, cfg: MilvusConfig, lite: bool) -> None:
    """Build every index the collection lacks, field by field, before it is loaded. Several processes may do this at
    once: an index another one built in the meantime is taken as built (decided by listing the field's indexes
    again, not by the error's text). The vector indexes must exist; a scalar index a store refuses only makes deletes
    scan (logged), as for collections made before those indexes existed."""
    from pymilvus.exceptions import MilvusException

    def has(field: str) -> bool:
        return bool(client.list_indexes(collection, field_name=field, timeout=cfg.call_timeout_s))

    for field, params in _index_params(client, cfg).items():
        if has(field):
            continue
        try:
            # pymilvus waits for each index with AllocTimestamp + a 0.5 s poll, and Lite does not implement
            # AllocTimestamp (an ERROR traceback per index from its in-process server, ~0.5 s each): Lite builds
            # indexes itself as segments seal, so there they are created without waiting.
            client.create_index(collection, params, timeout=cfg.write_timeout_s, sync=not lite)
        except MilvusException as exc:
            if has(field):
                continue  # another opener built it between our look and our call
            if field in SCALAR_INDEXED:
                logging.getLogger("chunker.index.store").warning(
                    "collection %r: scalar index on %s not built (%s); deletes by document scan every row",
                    collection, field, exc)
                continue
            raise
