"""What one page batch costs a GPU: a roofline model of Qwen2.5-VL on vLLM that charges the KV tax.

Used by the simulated engine (:mod:`chunker.backends.simulated`) and the benchmark's per-GPU estimate
(:mod:`jobs.bench.gpu_estimate`). Nothing here was measured on a GPU: the hardware figures are the vendors' datasheet
numbers, the model shapes the published architectures, and the efficiencies are the assumptions named below. A
calibration measured on a GPU (``python -m jobs.calibrate``, loaded by ``EngineSpec.from_calibration``) replaces the
whole model with measured rates.

One vLLM V1 engine step runs every decoding sequence one token further and fills the rest of its token budget
(``max_num_batched_tokens``) with prefill chunks of waiting requests. It costs

    overhead
    + max(weight bytes / bandwidth, 2 x LLM params x (decode + prefill tokens) / matmul FLOP/s)  # linear layers
    + KV bytes of the whole context of every decoding sequence / bandwidth                       # the KV tax
    + (vision encoder + prefill attention FLOPs of the chunk) / bf16 FLOP/s

Every output token attends over its request's whole context, images included: a request of 4 pages at 1,568 px is
~11k tokens, so each of its decode steps reads ~0.63 GB of bf16 KV for that one sequence, against 14 GB of weights
shared by all. More pages per request, larger renders and longer answers make every step of every sequence dearer;
FP8 weights halve the weight bytes and double the matmul rate (Hopper FP8 tensor cores), an FP8 KV cache halves the
KV bytes and doubles the sequences that fit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

GIB = 2**30


@dataclass(frozen=True)
class GpuClass:
    """Datasheet figures of one GPU (dense tensor-core rates: no 2:4 sparsity)."""

    name: str
    memory_gib: float
    hbm_bytes_per_s: float
    bf16_flops: float
    fp8_flops: float
    source: str


H100 = GpuClass(
    "H100 SXM5 80 GB", 80.0, 3.35e12, 989e12, 1979e12,
    "NVIDIA H100 Tensor Core GPU datasheet, SXM5: 80 GB HBM3 at 3.35 TB/s; 989 TFLOPS BF16 and 1,979 TFLOPS FP8 "
    "dense (the sheet's 1,979 / 3,958 are with sparsity)",
)
H200 = GpuClass(
    "H200 SXM 141 GB", 141.0, 4.8e12, 989e12, 1979e12,
    "NVIDIA H200 Tensor Core GPU datasheet, SXM: 141 GB HBM3e at 4.8 TB/s; the H100 SXM5's Hopper compute",
)
GPU_CLASSES: dict[str, GpuClass] = {"h100": H100, "h200": H200}

# Assumptions (not measured: a GPU calibration replaces them).
MATMUL_EFFICIENCY = 0.40  # share of the dense tensor-core peak that prefill GEMMs and the vision encoder reach
HBM_EFFICIENCY = 0.80  # share of the datasheet bandwidth that weight and KV reads reach in decode steps
STEP_OVERHEAD_S = 0.004  # per engine step: scheduling, sampling, kernel launches (CUDA graphs), detokenising
ACTIVATION_RESERVE_GIB = 4.0  # taken before the KV cache: activations at the token budget, encoder cache, graphs
VISION_PATCHES_PER_TOKEN = 4  # Qwen2.5-VL: 14 px patches, 2x2 merged into one LLM token (28 x 28 px)


@dataclass(frozen=True)
class ModelShape:
    """The published architecture numbers of a Qwen2.5-VL size (config.json), from which the costs follow."""

    name: str
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    vocab: int
    tied_embeddings: bool
    vision_params: float  # the vision tower and its merger (Qwen2.5-VL's ViT: depth 32, hidden 1280)
    vision_hidden: int = 1280
    vision_full_attention_blocks: int = 4  # the other 28 blocks attend within 112 px windows: negligible FLOPs

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def layer_params(self) -> float:
        """Weights of the decoder layers (attention q/k/v/o and the gated MLP)."""
        kv = self.kv_heads * self.head_dim
        attention = 2 * self.hidden * self.hidden + 2 * self.hidden * kv
        return self.layers * (attention + 3 * self.hidden * self.intermediate)

    @property
    def decode_params(self) -> float:
        """Weights one decode step reads: the layers and the output projection (an embedding row is a lookup)."""
        return self.layer_params + self.vocab * self.hidden

    @property
    def resident_params(self) -> float:
        """Every weight in GPU memory: decoder, embeddings (once when tied), vision tower."""
        embeddings = self.vocab * self.hidden * (1 if self.tied_embeddings else 2)
        return self.layer_params + embeddings + self.vision_params

    def kv_bytes_per_token(self, element_bytes: float) -> float:
        return 2 * self.layers * self.kv_heads * self.head_dim * element_bytes


# Qwen2.5-VL-{7B,3B}-Instruct config.json (the same numbers jobs/calibrate.py builds its random models from).
SHAPES: dict[str, ModelShape] = {
    "7b": ModelShape("Qwen2.5-VL-7B", hidden=3584, intermediate=18944, layers=28, heads=28, kv_heads=4, vocab=152064,
                     tied_embeddings=False, vision_params=0.67e9),
    "3b": ModelShape("Qwen2.5-VL-3B", hidden=2048, intermediate=11008, layers=36, heads=16, kv_heads=2, vocab=151936,
                     tied_embeddings=True, vision_params=0.67e9),
}


def shape_for(model_name: str) -> ModelShape | None:
    """The shape a model name denotes (``Qwen/Qwen2.5-VL-7B-Instruct`` -> 7b), or None when it is not known here."""
    name = model_name.lower()
    for key, shape in SHAPES.items():
        if f"-{key}" in name:
            return shape
    return None


@dataclass(frozen=True)
class CostModel:
    """Step costs of one model on one GPU at one precision (see the module docstring)."""

    gpu: GpuClass
    shape: ModelShape
    fp8_weights: bool = False
    fp8_kv: bool = False
    gpu_memory_utilization: float = 0.90

    @property
    def weight_bytes(self) -> float:
        # FP8 (W8A8) covers the linear layers; norms and embeddings stay 16-bit (small), the vision tower is counted
        # at 16 bits too (conservative: vLLM may quantise it as well).
        llm = self.shape.resident_params - self.shape.vision_params
        return llm * (1 if self.fp8_weights else 2) + self.shape.vision_params * 2

    @property
    def kv_bytes_per_token(self) -> float:
        return self.shape.kv_bytes_per_token(1 if self.fp8_kv else 2)

    @property
    def kv_capacity_tokens(self) -> int:
        """Tokens the KV cache holds: vLLM's share of GPU memory, less weights and the activation reserve."""
        free = self.gpu.memory_gib * GIB * self.gpu_memory_utilization - self.weight_bytes - ACTIVATION_RESERVE_GIB * GIB
        return max(0, int(free // self.kv_bytes_per_token))

    @property
    def _matmul_flops(self) -> float:
        return (self.gpu.fp8_flops if self.fp8_weights else self.gpu.bf16_flops) * MATMUL_EFFICIENCY

    @property
    def _bf16_flops(self) -> float:
        return self.gpu.bf16_flops * MATMUL_EFFICIENCY

    def _bandwidth(self) -> float:
        return self.gpu.hbm_bytes_per_s * HBM_EFFICIENCY

    def prefill_extra_flops(self, prompt_tokens: int, visual_tokens: int, images: int) -> float:
        """Prefill FLOPs beyond the linear layers, for the whole prompt: the vision tower on its patches (linear
        layers and the full-attention blocks over each image) and the LLM's causal attention over the prompt."""
        s = self.shape
        patches = VISION_PATCHES_PER_TOKEN * visual_tokens
        vit = 2 * s.vision_params * patches
        if images:
            per_image = patches / images
            vit += images * s.vision_full_attention_blocks * 4 * per_image**2 * s.vision_hidden
        attention = 2 * s.layers * s.hidden * prompt_tokens**2
        return vit + attention

    def step_seconds(self, decoding: int, context_tokens: float, prefill_tokens: float = 0.0,
                     prefill_extra_flops: float = 0.0) -> float:
        """One engine step: ``decoding`` sequences with ``context_tokens`` of KV between them, plus a prefill chunk
        of ``prefill_tokens`` whose vision/attention FLOPs are ``prefill_extra_flops``."""
        if decoding <= 0 and prefill_tokens <= 0:
            return 0.0
        bw = self._bandwidth()
        linear = max(self.shape.decode_params * (1 if self.fp8_weights else 2) / bw,
                     2 * self.shape.decode_params * (decoding + prefill_tokens) / self._matmul_flops)
        kv = context_tokens * self.kv_bytes_per_token / bw
        return STEP_OVERHEAD_S + linear + kv + prefill_extra_flops / self._bf16_flops

    def sequences_that_fit(self, tokens_per_sequence: float, max_num_seqs: int) -> int:
        """Sequences of this size the engine keeps running: its slot count, or fewer when the KV cache is full."""
        return max(1, min(max_num_seqs, int(self.kv_capacity_tokens // max(1.0, tokens_per_sequence))))

    def steady_state(self, prompt_tokens: float, cached_tokens: float, visual_tokens: float, images: int,
                     output_tokens: float, max_num_seqs: int, max_num_batched_tokens: int = 16384) -> "SteadyState":
        """A saturated engine converting identical requests: every slot busy (as many as the KV cache holds).

        vLLM V1 puts a waiting prompt into the next step whole (chunked only past ``max_num_batched_tokens``), so a
        request costs its decode share, ``output x decode step / n``, plus what its prefill adds to the steps that
        carry it (compute-bound: it is not hidden under the weight reads). Requests then finish at
        ``1 / (prefill increment + output x step / n)`` per second. A decoding sequence holds its prompt and, on
        average, half its answer.
        """
        n = self.sequences_that_fit(prompt_tokens + output_tokens, max_num_seqs)
        fresh = max(0.0, prompt_tokens - cached_tokens)
        context = n * (prompt_tokens + output_tokens / 2)
        decode_step = self.step_seconds(n, context)
        extra = self.prefill_extra_flops(int(prompt_tokens), int(visual_tokens), images)
        chunks = max(1, math.ceil(fresh / max(1, max_num_batched_tokens - n)))
        with_prefill = self.step_seconds(n, context, fresh / chunks, extra / chunks)
        prefill_s = chunks * (with_prefill - decode_step)
        per_request = prefill_s + output_tokens * decode_step / n
        return SteadyState(sequences=n, step_s=decode_step, requests_per_s=1.0 / per_request, prefill_s=prefill_s,
                           kv_read_gb=context * self.kv_bytes_per_token / 1e9)


@dataclass(frozen=True)
class SteadyState:
    sequences: int  # running at once (slots, or what the KV cache holds)
    step_s: float  # one decode step (no prefill in it)
    requests_per_s: float
    prefill_s: float  # what one request's prefill adds to the steps that carry it
    kv_read_gb: float  # KV bytes all decoding sequences read per decode step


def visual_tokens(width: int, height: int, patch_px: int = 28) -> int:
    """Qwen2.5-VL's LLM tokens for one image: one per 28 x 28 px (its processor rounds sides to 28 px)."""
    return max(1, round(width / patch_px)) * max(1, round(height / patch_px))


def cost_model(model_name: str, gpu: str, *, quantization: str | None = None, kv_cache_dtype: str = "auto",
               gpu_memory_utilization: float = 0.90) -> CostModel | None:
    """The cost model of a named model on a GPU class at the precision a ModelConfig asks; None when unknown."""
    shape = shape_for(model_name)
    if shape is None or gpu not in GPU_CLASSES:
        return None
    return CostModel(GPU_CLASSES[gpu], shape, fp8_weights=(quantization or "").lower().startswith("fp8"),
                     fp8_kv=kv_cache_dtype.lower().startswith("fp8"), gpu_memory_utilization=gpu_memory_utilization)
