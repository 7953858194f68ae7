"""Settings of the index side: embedding, the Milvus store, query-time retrieval."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from chunker.config.base import _Section


class EmbedConfig(_Section):
    model: str = Field("all-MiniLM-L6-v2", description="sentence-transformers model: a path, or all-MiniLM-L6-v2 (bundled).")
    batch_size: int = Field(64, ge=1, description="Passages per encode call.")
    device: str = Field("cpu", description="torch device for the embedder.")
    max_seq_length: int = Field(256, ge=16, description="Token cap per passage.")
    num_threads: int = Field(
        0, ge=0, description="CPU threads for embedding on the CPU (torch threads, or onnxruntime intra-op threads); "
        "0 = every CPU the process may use: its cores, capped by its container's CPU quota (a pod's, not the host's "
        "cores; Ray pins an actor with a fractional CPU to one thread otherwise)."
    )
    identity: bool = Field(
        True, description="Embed each chunk with its document's identity line (title/issuer, kind, period) before "
        "its text, so the dense leg knows which company and period a table row belongs to; not where the text "
        "already opens with it (a one-title document's breadcrumb root), where twice would drown the chunk's own "
        "words. The identity is "
        "BM25-indexed and returned with every hit either way (QUALITY.md: what embedding it did on the real sets)."
    )
    compact_rows: bool = Field(
        False, description="Embed a run of table rows with its column paths written once (on its first row), not "
        "once per figure as the stored row sentences do, so a table chunk's last rows fit under max_seq_length "
        "(chunker/rowtext.py; the stored text, BM25's text and hits are unchanged). Off: financebench-dev won "
        "9 / lost 4 questions with it, the generated set's quarterly reports lost 10 / won 1, since the repeated "
        "period words are what tell one quarter's filing from the next (QUALITY.md)."
    )
    long_passages: Literal["truncate", "windows"] = Field(
        "truncate", description="A passage past max_seq_length word pieces: 'truncate' embeds its first "
        "max_seq_length (the model's own behaviour); 'windows' embeds it in windows of at most that many, cut at line "
        "breaks where it can, and averages them by their piece counts, so a long table chunk's last rows count "
        "(chunker/index/windows.py)."
    )
    backend: Literal["auto", "torch", "onnx", "onnx-int8"] = Field(
        "auto", description="What runs the model: torch (sentence-transformers, any device); onnx (onnxruntime, fp32, "
        "CPU only); onnx-int8 (onnxruntime, dynamically quantised weights, CPU only); auto = onnx-int8 when device is "
        "cpu, torch otherwise, falling back to torch with a logged line when onnx/onnxruntime or the export fail."
    )
    onnx_cache_dir: str = Field(
        "~/.cache/vision-chunker/onnx", description="Where the ONNX exports of embedding models are kept, one folder "
        "per model content hash; exported once, written atomically, rebuilt when damaged. Put it on storage every "
        "node can see to export once per cluster."
    )
    onnx_batch_size: int = Field(
        1, ge=1, description="Passages per onnxruntime call (backends onnx and onnx-int8; batch_size is torch's). One "
        "at a time was the fastest here: MiniLM int8 on CloudWay chunks ran ~2-3x more passages per CPU-second than "
        "in batches of 64 (padding, and int8 activations quantised over the whole batch); each vector is then also "
        "independent of its neighbours."
    )

    @model_validator(mode="after")
    def _onnx_runs_on_cpu(self) -> "EmbedConfig":
        if self.backend in ("onnx", "onnx-int8") and self.device != "cpu":
            raise ValueError(f"embed.backend={self.backend} runs on the CPU only; set embed.device=cpu or "
                             "embed.backend=torch (or auto)")
        return self


# Dense index types offered, and the ones Milvus Lite accepts but cannot build (FACTS: Lite 3.2 on faiss).
INDEX_TYPES = ("AUTOINDEX", "FLAT", "HNSW", "IVF_FLAT", "IVF_SQ8", "DISKANN")
SERVER_ONLY_INDEX_TYPES = ("DISKANN",)


class MilvusConfig(_Section):
    uri: str = Field("./output/milvus.db", description="Milvus Lite path, or http(s)://host:port of a server.")
    token_env: str = Field("MILVUS_TOKEN", description="Environment variable holding the server token (if any).")
    collection: str = Field("chunks", description="Collection name.")
    index_type: Literal["AUTOINDEX", "FLAT", "HNSW", "IVF_FLAT", "IVF_SQ8", "DISKANN"] = Field(
        "AUTOINDEX", description="Dense index built when the collection is created: AUTOINDEX (the server picks; "
        "HNSW on Lite), FLAT (exact, no index memory), HNSW (graph in memory: fast, ~dim*4 + M*8 bytes a vector), "
        "IVF_FLAT / IVF_SQ8 (clustered; SQ8 keeps 1 byte a dimension), DISKANN (server only: graph on local "
        "NVMe, compressed vectors in memory). An existing collection keeps the index it was built with."
    )
    hnsw_m: int = Field(16, ge=2, le=2048, description="HNSW: graph degree M (each unit adds ~8 bytes of links a vector).")
    hnsw_ef_construction: int = Field(200, ge=1, description="HNSW: candidate list while building (efConstruction).")
    hnsw_ef: int = Field(
        256, ge=1, description="HNSW (and AUTOINDEX on Lite, which is HNSW there): candidate list per search (ef); "
        "raised to the request's limit when smaller, because Milvus refuses ef below the limit. The fusion reads "
        "every candidate of a leg, the last ones too, so they must not depend on how the graph happened to be "
        "built: at ef 64 two builds of the same vectors (financebench-dev, 13,366 chunks) gave different top-20 "
        "dense candidates for 15 of 75 questions, at 256 for 1 (QUALITY.md)."
    )
    ivf_nlist: int = Field(1024, ge=1, le=65536, description="IVF_FLAT / IVF_SQ8: clusters built (nlist).")
    ivf_nprobe: int = Field(16, ge=1, le=65536, description="IVF_FLAT / IVF_SQ8: clusters searched per query (nprobe).")
    diskann_search_list: int = Field(
        100, ge=1, description="DISKANN: candidate list per search (search_list); raised to the limit when smaller."
    )
    metric: Literal["COSINE", "IP", "L2"] = Field("COSINE", description="Dense metric.")
    analyzer: Literal["english", "standard", "chinese", "multilingual"] = Field(
        "english", description="Analyzer of the BM25 text field."
    )
    bm25_k1: float = Field(
        1.5, ge=1.2, le=2.0, description="BM25 term-frequency saturation of the sparse index (Milvus' range). Given "
        "to the index explicitly because Milvus (1.2) and Milvus Lite (1.5) default differently; 1.5 is what every "
        "evaluation in QUALITY.md measured, and 1.2 lost page@5 on the filings (QUALITY.md). An existing collection "
        "keeps the value it was built with."
    )
    bm25_b: float = Field(
        0.75, ge=0.0, le=1.0, description="BM25 length normalisation of the sparse index (0: none, 1: full; both "
        "Milvus' and Milvus Lite's default). An existing collection keeps the value it was built with."
    )
    call_timeout_s: float = Field(
        10.0, gt=0, description="Deadline of one read call (search, query, count, collection checks), retries "
        "included: past it the call fails (a 503 from the query service) instead of waiting on a server that does not "
        "answer."
    )
    write_timeout_s: float = Field(
        600.0, gt=0, description="Deadline of one write or admin call (upsert, delete, flush, create, load), "
        "retries included."
    )
    upsert_batch: int = Field(500, ge=1, description="Rows per upsert call.")
    load_mode: Literal["auto", "upsert"] = Field(
        "auto", description="auto: on a Milvus server, commits of at least bulk_threshold rows go through "
        "BulkWriter files + bulk_import (needs the bulk_* settings); upsert: always batched upserts (no object "
        "store needed, slower for millions of rows). Milvus Lite always upserts."
    )
    bulk_threshold: int = Field(
        50_000, ge=1, description="Pending rows at which a server load switches from upserts to BulkWriter files + "
        "bulk_import (Milvus Lite always upserts); also the rows per import job."
    )
    bulk_uri: str | None = Field(
        None, description="Where BulkWriter Parquet files go for a server load: s3://bucket/prefix, where bucket is "
        "the one the Milvus server itself reads (minio.bucketName in its milvus.yaml), because bulk_import names "
        "files relative to that bucket. Required when load_mode is auto and milvus.uri is a server."
    )
    bulk_endpoint: str | None = Field(
        None, description="http(s)://host:port of the object store behind bulk_uri (the Milvus server's MinIO or "
        "S3, e.g. http://milvus-minio:9000 or https://s3.us-east-1.amazonaws.com); never taken from "
        "AWS_ENDPOINT_URL, which is the corpus' store."
    )
    bulk_region: str | None = Field(None, description="Region of the bulk bucket (S3); none: the client's default.")
    bulk_access_key_env: str = Field(
        "MILVUS_BULK_ACCESS_KEY", description="Environment variable holding the access key of the bulk bucket."
    )
    bulk_secret_key_env: str = Field(
        "MILVUS_BULK_SECRET_KEY", description="Environment variable holding the secret key of the bulk bucket."
    )
    fresh_load: bool = Field(
        False, description="The collection starts empty for this run: bulk imports skip deleting the batch's IDs "
        "first (4M deletes at scale), except IDs of documents this run has already written. Checked at the first "
        "commit: a collection that is not empty (a resumed run) keeps the deletes, so re-runs stay idempotent."
    )
    bulk_poll_s: float = Field(5.0, gt=0, description="Seconds between get_import_progress polls.")
    bulk_timeout_s: float = Field(7200.0, gt=0, description="Longest one bulk import job may take.")
    commit_interval_s: float = Field(
        60.0, gt=0, description="A finished document waits at most about this long for its chunks to be committed "
        "(and its ledger entry written). Commits run beside the pipeline, one at a time: one starts when none is "
        "running and upsert_batch chunks (Milvus Lite) or bulk_threshold chunks (a server) are pending, or this "
        "interval has passed; it takes everything pending then. Rows arriving during a long import make the next "
        "commit larger, so imports grow with the rate instead of stalling the driver."
    )
    commit_max_pending_rows: int | None = Field(
        None, ge=1, description="Chunks the driver may hold while a commit runs before it waits for that commit "
        "(memory: ~2 KB a chunk with its 384-d vector). None: 4 x the commit size (upsert_batch on Milvus Lite, "
        "bulk_threshold on a server)."
    )

    @model_validator(mode="after")
    def _index_fits_the_target(self) -> "MilvusConfig":
        if self.ivf_nprobe > self.ivf_nlist:
            raise ValueError(f"milvus.ivf_nprobe ({self.ivf_nprobe}) must not exceed milvus.ivf_nlist ({self.ivf_nlist})")
        if "://" not in self.uri and self.index_type in SERVER_ONLY_INDEX_TYPES:
            raise ValueError(f"milvus.index_type {self.index_type} does not build on Milvus Lite ({self.uri}); use "
                             f"HNSW, IVF_FLAT, IVF_SQ8, FLAT or AUTOINDEX, or a Milvus server")
        if self.bulk_endpoint and not self.bulk_endpoint.startswith(("http://", "https://")):
            raise ValueError(f"milvus.bulk_endpoint {self.bulk_endpoint!r} must start with http:// or https://")
        return self


class RetrievalConfig(_Section):
    mode: Literal["dense", "sparse", "hybrid"] = Field("hybrid", description="Search legs used.")
    fusion: Literal["adaptive", "rrf", "weighted"] = Field(
        "adaptive", description="How hybrid legs are fused: adaptive (each leg's scores rescaled over its candidates "
        "and weighted per query by how well it separates them; on the client), rrf or weighted (inside Milvus)."
    )
    rrf_k: int = Field(60, ge=1, description="Reciprocal-rank-fusion constant.")
    dense_weight: float = Field(0.5, ge=0, le=1, description="Weight of the dense leg (weighted fusion).")
    candidates: int = Field(20, ge=1, le=1000, description="Top-N fetched per leg before rerank.")
    duplicate_threshold: float = Field(
        1.0, ge=0, le=1, description="A hit whose body shares at least this share of its words (Jaccard) with a "
        "better-ranked hit, and no figure it lacks, moves below the distinct hits (a catalogue repeating a "
        "specification sheet); 1 turns it off, the default: on the real sets it did not pay (QUALITY.md), 0.9 "
        "is where it helps a corpus of copies."
    )
    rerank: bool = Field(False, description="Rerank text/table questions with the cross-encoder.")
    reranker_model: str | None = Field(None, description="CrossEncoder model path (none bundled offline).")
    visual_keywords: list[str] = Field(
        default_factory=lambda: ["diagram", "figure", "chart", "flowchart", "graph", "image", "picture", "plot", "illustration", "photo"],
        description="Words that mark a question as visual.",
    )
    figure_boost: float = Field(1.35, ge=1, description="Score multiplier for figure chunks on visual questions.")
    query_cache_size: int = Field(
        256, ge=0, description="Query embeddings kept in a per-process LRU cache keyed by the question (0: off)."
    )
    result_cache_size: int = Field(
        512, ge=0, description="Finished answers kept per process (LRU), keyed by the question (whitespace "
        "normalised), its filters, k, rerank and these retrieval settings: a repeated question is answered without "
        "embedding or searching. A write through this process's store empties it; 0 turns it off."
    )
    result_cache_ttl_s: float = Field(
        30.0, gt=0, description="Seconds a cached answer is served: how stale an answer may be after another "
        "process (an ingest job) writes into the collection, since only this process's own writes are seen at once."
    )
    common_term_share: float = Field(
        0.97, gt=0, le=1, description="Words found in at least this share of the collection's chunks (from a "
        "sample) are left out of the BM25 query: their weight is next to nothing (idf <= 0.03 at 0.97) and their "
        "posting lists are the BM25 search's biggest cost on Milvus Lite. At 0.9 CloudWay's mrr@10 moved by one "
        "question (0.915 -> 0.911); at 0.97 no word of the real sets goes (QUALITY.md). 1 turns it off."
    )
    split_period_tokens: bool = Field(
        True, description="In the BM25 query, a year glued to its period prefix (\"FY2022\", \"Q22023\") is split "
        "into two words, so the year matches the filings' \"2022\" (the analyzer makes one token of it, found in no "
        "chunk). The dense leg embeds the question as asked (chunker/index/period_terms.py; QUALITY.md)."
    )
    context_below_chars: int = Field(
        250, ge=0, description="A hit shorter than this (a table's intro line, a row or two cut off by a page or size "
        "break) comes with the chunks that follow it in its document and section, in order, as its `context`, until "
        "the two hold context_to_chars: the ranking is the short chunk's, the reader gets what it leads into. Never "
        "across a heading. 0 turns it off (QUALITY.md: +0.045 num@5 on financebench-dev, CloudWay unchanged)."
    )
    context_to_chars: int = Field(
        600, ge=0, description="How much a short hit and its context hold together, at least (whole chunks are "
        "added, so one may go past it)."
    )
    concurrent_legs: bool = Field(
        True, description="Adaptive hybrid: send the dense and the BM25 search at the same time (two threads) "
        "instead of one after the other; a Milvus server runs them in parallel, Milvus Lite mostly in turn."
    )
