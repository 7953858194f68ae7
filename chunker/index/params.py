"""Index parameters in Milvus' names, from the ``milvus.*`` index settings, and the form both Milvus and Milvus Lite
read them in.

Memory per vector of d float32 dimensions (from the index structures, before Milvus' own overheads): FLAT 4d
bytes; HNSW 4d + ~8M bytes of links (layer 0 keeps 2M neighbour ids of 4 bytes; upper layers add little);
IVF_FLAT 4d; IVF_SQ8 d (one byte a dimension) plus the nlist centroids; DISKANN keeps only PQ codes in memory (a
fraction of 4d set by the server's DiskIndex settings) and the graph with full vectors on local disk.
"""

from __future__ import annotations

from typing import Any

from chunker.config import MilvusConfig


def index_build_params(cfg: MilvusConfig) -> dict[str, Any]:
    """Build parameters of the configured dense index (Milvus' names)."""
    if cfg.index_type == "HNSW":
        return {"M": cfg.hnsw_m, "efConstruction": cfg.hnsw_ef_construction}
    if cfg.index_type in ("IVF_FLAT", "IVF_SQ8"):
        return {"nlist": cfg.ivf_nlist}
    return {}  # FLAT and DISKANN need none; AUTOINDEX picks its own


def bm25_build_params(cfg: MilvusConfig) -> dict[str, Any]:
    """BM25 parameters of the sparse index, always given: Milvus' default k1 (1.2) is not Milvus Lite's (1.5,
    milvus_lite/index/sparse_factory.py), so leaving them out scores BM25 one way in an evaluation on Lite and
    another on the server it stands for."""
    return {"bm25_k1": cfg.bm25_k1, "bm25_b": cfg.bm25_b}


def as_index_params(params: dict[str, Any]) -> dict[str, Any]:
    """``params`` for ``IndexParams.add_index`` so that both Milvus and Milvus Lite build with them.

    pymilvus spreads a flat ``params`` dict into one key/value pair each (pymilvus/milvus_client/index.py
    ``IndexParam``); the Milvus proxy reads those, and a ``params`` key holding JSON too (internal/proxy/
    task_index.go ``parseIndexParams`` merges both), but Milvus Lite 3.2 reads only the JSON ``params`` key
    (milvus_lite/adapter/grpc/translators/index.py) and silently built with its own defaults. Nested one level,
    pymilvus sends that one JSON key, which both read."""
    return {"params": dict(params)} if params else {}


def index_search_params(cfg: MilvusConfig, index_type: str, limit: int, lite: bool = False) -> dict[str, Any]:
    """Search parameters for an index of ``index_type``: HNSW's ef and DiskANN's search_list may not be below the
    limit (Milvus refuses the search), so they are raised to it.

    On Milvus Lite (``lite``) an AUTOINDEX is an HNSW graph too (milvus_lite/index/factory.py builds FaissHnswIndex
    when faiss imports, and NumPy brute force otherwise, which ignores search parameters), searched at ef 64 unless
    told otherwise (faiss_hnsw.py): so it is given HNSW's ef. A server's AUTOINDEX picks its own and takes none."""
    if index_type in ("HNSW", "HNSW_SQ") or (lite and index_type == "AUTOINDEX"):
        return {"ef": max(cfg.hnsw_ef, limit)}
    if index_type.startswith("IVF_"):
        return {"nprobe": cfg.ivf_nprobe}
    if index_type == "DISKANN":
        return {"search_list": max(cfg.diskann_search_list, limit)}
    return {}
