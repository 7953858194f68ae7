"""Settings and helpers shared by the engine tier's tests and its subprocess scripts (no vllm import here)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

# The shape of Qwen2.5-VL's published generation config: near-greedy (top_k 1, top_p 0.001) with a repetition
# penalty. vLLM does not apply it to an explicit SamplingParams, so the backend must read it and send it along.
GENERATION_DEFAULTS = {"do_sample": True, "temperature": 0.1, "top_k": 1, "top_p": 0.001, "repetition_penalty": 1.07}
MAX_SIDE_PX = 448  # renders of 448 px keep a page at <= 256 visual tokens: fast on two cores
MAX_IMAGES = 4
MAX_NUM_SEQS = 8


def tiny_model_config(path: Path | str, **overrides: Any) -> Any:
    """``ModelConfig`` of the tiny model on the CPU engine: float32, a small KV share, a short context."""
    from chunker.config import ModelConfig

    fields: dict[str, Any] = dict(
        name="tiny-qwen2.5-vl", path=str(path), dtype="float32", device="cpu", gpu_memory_utilization=0.1,
        max_model_len=4096, max_num_seqs=MAX_NUM_SEQS, max_output_tokens=64,
    )
    fields.update(overrides)
    return ModelConfig(**fields)


def png(size: tuple[int, int], color: str = "white") -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, format="PNG")
    return buf.getvalue()
