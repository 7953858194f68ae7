"""Which settings shape the rows (hashed into every persisted row) and which only change how the work runs."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import BaseModel

from chunker.config.model import Config


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
    "embed.model", "embed.max_seq_length", "embed.backend", "embed.identity", "embed.compact_rows", "embed.long_passages",
    "intake.identity",
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
    "converter.model.mm_encoder_tp_mode", "converter.model.engine_start_attempts",
    "converter.model.engine_start_wait_s",
    # the simulated engine's pace: the same answers, sooner
    "converter.model.simulated_time_scale",
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
    raise KeyError(f"config field {path!r} is classified neither as content nor as runtime (chunker/config/fields.py)")


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
