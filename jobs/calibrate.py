"""GPU calibration of the simulated engine: time a randomly initialised Qwen2.5-VL of the real shape.

    python -m jobs.calibrate [--shape 7b|3b|tiny] [--pages 4] [--side 1568] [--decode 256] [--dtype bfloat16]
                             [--decode-batch 32] [--output DIR] [--write-calibration FILE]
    python -m jobs.calibrate --device cpu --shape tiny --side 224 --pages 2 --decode 8   # CPU smoke run

Why random weights: timing depends on shapes, not on values, so a model built from the published architecture
numbers runs exactly the kernels the real one would, without downloading 16 GB. Built directly on the GPU in the
chosen dtype, a 7B model takes seconds.

What is measured (CUDA events, after warm-up, median of ``--repeats``):

1. prefill of one batch request: ``--pages`` page images of ``--side`` px (vision tower with window attention, then
   the LLM over the visual tokens plus ``--text-tokens`` of prompt text), as the converter sends a page batch;
2. greedy decode at batch 1 with a KV cache holding that prompt: one sequence's step latency;
3. greedy decode at ``--decode-batch`` sequences, each with a cache of the same length (filled with zeros: the
   step's cost depends on the cache's length, not its content): the aggregate decode rate of a full engine;
4. peak GPU memory.

Continuous-batching estimate: the same model the simulated engine uses (``EngineSpec``): a saturated engine spends
``prefill_tokens/page / prefill_tok_s + output_tokens/page / decode_tok_s(B)`` engine-seconds per page, because
prefill is compute-bound (batching does not make it cheaper) and decode at B sequences shares one step's cost.
These are transformers eager-mode figures: vLLM's decode (CUDA graphs, paged attention) is faster at small batch,
so the estimate is a floor for a vLLM engine on the same GPU; prefill transfers much better.

Imports: the standard library, torch and transformers, nothing else (no pydantic, Ray, vLLM, nor the ``chunker``
package): a fresh GPU host may have only torch. ``python -m jobs.gpu_check`` runs the whole first-GPU-hour set.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

PATCH = 14  # vision patch side in pixels
MERGE = 2  # 2x2 patches merge into one LLM token: one visual token per 28x28 px
TEMPORAL = 2  # images are repeated over 2 frames of a temporal patch
OUTPUT_TOKENS_PER_PAGE = 500  # EngineSpec's default: a dense page of Markdown

# Published Qwen2.5-VL-{7B,3B}-Instruct config.json numbers (architecture only; nothing else is taken from them).
_VISION = dict(depth=32, hidden_size=1280, intermediate_size=3420, num_heads=16, patch_size=PATCH,
               spatial_merge_size=MERGE, temporal_patch_size=TEMPORAL, window_size=112,
               fullatt_block_indexes=[7, 15, 23, 31], hidden_act="silu", in_channels=3)
SHAPES: dict[str, dict[str, Any]] = {
    "7b": dict(text=dict(vocab_size=152064, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
                         num_attention_heads=28, num_key_value_heads=4, rope_theta=1_000_000.0, mrope=[16, 24, 24],
                         tie_word_embeddings=False), vision=dict(_VISION, out_hidden_size=3584)),
    "3b": dict(text=dict(vocab_size=151936, hidden_size=2048, intermediate_size=11008, num_hidden_layers=36,
                         num_attention_heads=16, num_key_value_heads=2, rope_theta=1_000_000.0, mrope=[16, 24, 24],
                         tie_word_embeddings=True), vision=dict(_VISION, out_hidden_size=2048)),
    # A few-layer toy with the same structure (window + full attention blocks, GQA, mrope) for CPU tests.
    "tiny": dict(text=dict(vocab_size=1024, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, rope_theta=10_000.0, mrope=[2, 3, 3],
                           tie_word_embeddings=False),
                 vision=dict(_VISION, depth=2, hidden_size=32, intermediate_size=64, num_heads=2, out_hidden_size=64,
                             fullatt_block_indexes=[1])),
}
# Special token ids: the real ones for the real vocabularies; the tiny vocabulary keeps them at its top.
_SPECIAL = {"image": 151655, "video": 151656, "vision_start": 151652, "vision_end": 151653, "eos": 151645,
            "pad": 151643}


def special_ids(vocab: int) -> dict[str, int]:
    if vocab > max(_SPECIAL.values()):
        return dict(_SPECIAL)
    return {k: vocab - 1 - i for i, k in enumerate(_SPECIAL)}


def model_config(shape: str) -> Any:
    """A ``Qwen2_5_VLConfig`` of the named shape, written here (no hub access)."""
    from transformers import Qwen2_5_VLConfig

    if shape not in SHAPES:
        raise ValueError(f"unknown shape {shape!r}; known: {sorted(SHAPES)}")
    t, v = dict(SHAPES[shape]["text"]), SHAPES[shape]["vision"]
    ids = special_ids(t["vocab_size"])
    mrope, theta, tie = t.pop("mrope"), t.pop("rope_theta"), t.pop("tie_word_embeddings")
    text = dict(t, max_position_embeddings=128_000, rms_norm_eps=1e-6, hidden_act="silu", use_sliding_window=False,
                rope_parameters={"rope_type": "default", "rope_theta": theta, "mrope_section": mrope},
                eos_token_id=ids["eos"], pad_token_id=ids["pad"], bos_token_id=ids["pad"])
    return Qwen2_5_VLConfig(text_config=text, vision_config=dict(v), image_token_id=ids["image"],
                            video_token_id=ids["video"], vision_start_token_id=ids["vision_start"],
                            vision_end_token_id=ids["vision_end"], eos_token_id=ids["eos"], pad_token_id=ids["pad"],
                            bos_token_id=ids["pad"], tie_word_embeddings=tie)


def build_model(shape: str, device: str, dtype: str) -> Any:
    """Random weights, allocated directly on ``device`` in ``dtype`` (no CPU copy, no download)."""
    import torch
    from transformers import Qwen2_5_VLForConditionalGeneration

    cfg = model_config(shape)
    torch_dtype = getattr(torch, dtype)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch_dtype)  # parameters are created in the target dtype: no fp32 copy of 8B params
    try:
        with torch.device(device):
            torch.manual_seed(0)
            model = Qwen2_5_VLForConditionalGeneration._from_config(cfg, dtype=torch_dtype)
    finally:
        torch.set_default_dtype(previous)
    return model.eval()


def visual_tokens(side: int) -> int:
    """LLM tokens for one square image: one per 28x28 px after the 2x2 merge."""
    return (side // (PATCH * MERGE)) ** 2


def make_inputs(cfg: Any, pages: int, side: int, text_tokens: int, device: str, dtype: Any) -> dict[str, Any]:
    """One batch request: text, then ``pages`` images each wrapped in vision start/end, then the rest of the text.

    pixel_values are what the image processor emits: per image (side/14)^2 flattened patches of 3 x 2 x 14 x 14.
    """
    import torch

    if side % (PATCH * MERGE):
        raise ValueError(f"--side must be a multiple of {PATCH * MERGE} px (got {side})")
    grid = side // PATCH
    gen = torch.Generator().manual_seed(0)
    pixels = torch.randn(pages * grid * grid, 3 * TEMPORAL * PATCH * PATCH, generator=gen).to(device, dtype)
    thw = torch.tensor([[1, grid, grid]] * pages, device=device)
    ids = special_ids(cfg.text_config.vocab_size)
    words = torch.randint(0, min(ids.values()), (text_tokens,), generator=gen).tolist()
    half = text_tokens // 2
    seq = words[:half]
    for _ in range(pages):
        seq += [ids["vision_start"]] + [ids["image"]] * visual_tokens(side) + [ids["vision_end"]]
    seq += words[half:]
    return {"input_ids": torch.tensor([seq], device=device), "pixel_values": pixels, "image_grid_thw": thw}


def _positions(batch: int, start: int, length: int, device: Any) -> Any:
    # Plain increasing 3-D (mrope) positions: the step's cost does not depend on their values, and giving them
    # explicitly keeps the timing free of the generation helpers' bookkeeping.
    import torch

    return torch.arange(start, start + length, device=device).view(1, 1, -1).expand(3, batch, -1)


class Timer:
    """Milliseconds of GPU work with CUDA events (host-side perf_counter on CPU)."""

    def __init__(self, device: str) -> None:
        import torch

        self.cuda = device.startswith("cuda")
        self.torch = torch

    def __call__(self, fn: Callable[[], Any]) -> float:
        if not self.cuda:
            t0 = time.perf_counter()
            fn()
            return (time.perf_counter() - t0) * 1000
        start, end = (self.torch.cuda.Event(enable_timing=True) for _ in range(2))
        start.record()
        fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end)


def _decode(model: Any, cache: Any, first: Any, start: int, steps: int) -> Any:
    """Greedy decode ``steps`` tokens from ``first`` (B, 1) on a filled cache."""
    import torch

    tok = first
    for i in range(steps):
        out = model(input_ids=tok, position_ids=_positions(tok.shape[0], start + i, 1, tok.device),
                    past_key_values=cache, use_cache=True, logits_to_keep=1)
        tok = torch.argmax(out.logits[:, -1:], dim=-1)
    return tok


def _static_cache(model: Any, length: int) -> Any:
    from transformers import StaticCache

    # Preallocated: appending to a dynamic cache copies it every step, which no serving engine does.
    return StaticCache(config=model.config, max_cache_len=length)


def measure(model: Any, inputs: dict[str, Any], decode: int, decode_batch: int, repeats: int = 3) -> dict[str, Any]:
    """Prefill ms of the batch request, decode ms/token at batch 1 and at ``decode_batch``, peak memory."""
    import torch

    device = str(inputs["input_ids"].device)
    timer, n = Timer(device), inputs["input_ids"].shape[1]
    text_cfg = model.config.text_config
    with torch.inference_mode():
        def prefill(cache: Any = None) -> Any:
            return model(**inputs, position_ids=_positions(1, 0, n, inputs["input_ids"].device),
                         past_key_values=cache, use_cache=cache is not None, logits_to_keep=1)

        prefill()  # warm-up: kernels, allocator, autotuning
        prefill_ms = statistics.median(timer(prefill) for _ in range(repeats))

        warm = max(2, min(8, decode // 4))
        cache = _static_cache(model, n + warm + decode)
        first = torch.argmax(prefill(cache).logits[:, -1:], dim=-1)  # the real prompt's KV, then greedy steps
        _decode(model, cache, first, n, warm)
        one_ms = timer(lambda: _decode(model, cache, first, n + warm, decode)) / decode

        batch_ms = None
        if decode_batch > 1:
            big = _static_cache(model, n + warm + decode)
            kv, hd = text_cfg.num_key_value_heads, text_cfg.hidden_size // text_cfg.num_attention_heads
            dtype = next(model.parameters()).dtype
            ctx = torch.zeros(decode_batch, kv, n, hd, device=inputs["input_ids"].device, dtype=dtype)
            for layer in big.layers:
                layer.update(ctx, ctx)  # a cache of the prompt's length for every sequence, as after B prefills
            del ctx
            toks = first.expand(decode_batch, 1).contiguous()
            _decode(model, big, toks, n, warm)
            batch_ms = timer(lambda: _decode(model, big, toks, n + warm, decode)) / decode
            del big
    peak = torch.cuda.max_memory_allocated() / 2**30 if device.startswith("cuda") else None
    return {"prompt_tokens": n, "prefill_ms": round(prefill_ms, 2), "decode_ms_per_token_b1": round(one_ms, 3),
            "decode_batch": decode_batch, "decode_ms_per_step_batch": round(batch_ms, 3) if batch_ms else None,
            "peak_gpu_mem_gib": round(peak, 2) if peak is not None else None}


SPEC_FIELDS = ("prefill_tokens_per_s", "decode_tokens_per_s", "seq_decode_tokens_per_s", "max_num_seqs",
               "output_tokens_per_page")  # chunker.backends.simulated.EngineSpec's measured fields


def pages_per_s(prefill_per_page: float, output_per_page: float, prefill_tps: float, decode_tps: float) -> float:
    """Saturated throughput: the roofline of ``EngineSpec.pages_per_s``, written out here because this script runs
    on GPU hosts that have torch and transformers but not the project's other dependencies (pydantic, Ray)."""
    return 1.0 / (prefill_per_page / prefill_tps + output_per_page / decode_tps)


def summarise(m: dict[str, Any], pages: int, side: int, output_tokens_per_page: int) -> dict[str, Any]:
    """Per-page figures and the continuous-batching estimate, in ``EngineSpec``'s terms (no project import)."""
    prefill_tps = round(m["prompt_tokens"] / (m["prefill_ms"] / 1000), 1)
    seq_tps = round(1000 / m["decode_ms_per_token_b1"], 2)
    batch = m["decode_batch"] if m["decode_ms_per_step_batch"] else 1
    step = m["decode_ms_per_step_batch"] or m["decode_ms_per_token_b1"]
    decode_tps = round(batch * 1000 / step, 1)
    per_page_prefill = m["prompt_tokens"] / pages
    spec = dict(zip(SPEC_FIELDS, (prefill_tps, decode_tps, seq_tps, batch, output_tokens_per_page)))
    return {
        "prefill_ms_per_page": round(m["prefill_ms"] / pages, 2),
        "visual_tokens_per_page": visual_tokens(side),
        "prefill_tokens_per_s": prefill_tps,
        "decode_tokens_per_s_batch1": seq_tps,
        "decode_tokens_per_s_aggregate": decode_tps,
        "est_pages_per_s_per_gpu": round(pages_per_s(per_page_prefill, output_tokens_per_page, prefill_tps,
                                                     decode_tps), 3),
        "estimate_model": (f"saturated engine, {batch} sequences in flight: seconds/page = prefill tokens/page "
                           f"({per_page_prefill:.0f}) / prefill tok/s + {output_tokens_per_page} output tokens/page / "
                           f"aggregate decode tok/s at batch {batch} (EngineSpec.pages_per_s); transformers eager, "
                           "so a floor for vLLM on the same GPU"),
        "engine_spec": spec,
    }


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m jobs.calibrate", description=__doc__.split("\n")[0])
    p.add_argument("--shape", default="7b", choices=sorted(SHAPES))
    p.add_argument("--pages", type=int, default=4, help="page images in the batch request (intake.batch_pages)")
    p.add_argument("--side", type=int, default=1568, help="square page image side in px (multiple of 28)")
    p.add_argument("--text-tokens", type=int, default=600, help="prompt text tokens around the images")
    p.add_argument("--decode", type=int, default=256, help="tokens timed per decode measurement")
    p.add_argument("--decode-batch", type=int, default=32, help="sequences for the aggregate decode rate (1: skip)")
    p.add_argument("--output-tokens-per-page", type=int, default=OUTPUT_TOKENS_PER_PAGE)
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    p.add_argument("--device", default="cuda", help="cuda[:N]; cpu only with --shape tiny")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--output", default="output/calibrate", help="folder for calibration.json")
    p.add_argument("--write-calibration", default=None, metavar="FILE",
                   help="also write the JSON SimulatedBackend.from_calibration loads")
    return p.parse_args(argv)


def check_device(device: str, shape: str) -> str | None:
    """Why this run cannot go ahead, or None."""
    if device == "cpu":
        return None if shape == "tiny" else "--device cpu is only for --shape tiny (a real shape needs a CUDA GPU)"
    import torch

    if not device.startswith("cuda"):
        return f"unknown --device {device!r}: use cuda[:N], or cpu with --shape tiny"
    if not torch.cuda.is_available():
        return (f"calibration of the {shape} shape needs a CUDA GPU, and torch.cuda.is_available() is False here "
                f"(torch {torch.__version__}). Run it on a GPU node, or try the CPU smoke run: "
                "python -m jobs.calibrate --device cpu --shape tiny --side 224 --pages 2 --decode 8")
    return None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(list(sys.argv[1:] if argv is None else argv))
    problem = check_device(args.device, args.shape)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    import torch

    dtype = "float32" if args.device == "cpu" and args.dtype != "float32" else args.dtype  # CPU bf16 is emulated
    t0 = time.perf_counter()
    model = build_model(args.shape, args.device, dtype)
    build_s = time.perf_counter() - t0
    inputs = make_inputs(model.config, args.pages, args.side, args.text_tokens, args.device, getattr(torch, dtype))
    m = measure(model, inputs, args.decode, args.decode_batch, args.repeats)
    gpu = torch.cuda.get_device_name(torch.device(args.device)) if args.device.startswith("cuda") else "cpu"
    report = {"shape": args.shape, "dtype": dtype, "device": gpu, "pages": args.pages, "side_px": args.side,
              "text_tokens": args.text_tokens, "decode_tokens": args.decode, "build_s": round(build_s, 2),
              "params_m": round(sum(p.numel() for p in model.parameters()) / 1e6, 2),
              "torch": torch.__version__, "host": platform.node(), **m,
              **summarise(m, args.pages, args.side, args.output_tokens_per_page)}
    # The measurements are on disk before anything else can fail (nothing after this imports anything).
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    (out / "calibration.json").write_text(json.dumps(report, indent=2))
    if args.write_calibration:
        Path(args.write_calibration).parent.mkdir(parents=True, exist_ok=True)
        Path(args.write_calibration).write_text(json.dumps(report, indent=2))
    for k in ("shape", "device", "params_m", "build_s", "prompt_tokens", "prefill_ms", "prefill_ms_per_page",
              "prefill_tokens_per_s", "decode_tokens_per_s_batch1", "decode_tokens_per_s_aggregate",
              "peak_gpu_mem_gib", "est_pages_per_s_per_gpu", "estimate_model"):
        print(f"{k}: {report[k]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
