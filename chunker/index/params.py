"""Dense index parameters in Milvus' names, from the ``milvus.*`` index settings.

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


def index_search_params(cfg: MilvusConfig, index_type: str, limit: int) -> dict[str, Any]:
    """Search parameters for an index of ``index_type``: HNSW's ef and DiskANN's search_list may not be below the
    limit (Milvus refuses the search), so they are raised to it."""
    if index_type in ("HNSW", "HNSW_SQ"):
        return {"ef": max(cfg.hnsw_ef, limit)}
    if index_type.startswith("IVF_"):
        return {"nprobe": cfg.ivf_nprobe}
    if index_type == "DISKANN":
        return {"search_list": max(cfg.diskann_search_list, limit)}
    return {}
