"""The per-GPU estimate: pages/s one H100 or H200 would convert for the shipped 7B/3B configs, bf16 and FP8, at
1,568 and 1,288 px and 4, 2 or 1 pages per request, from the KV-aware cost model the simulated engine runs on
(:mod:`chunker.backends.gpu_model`), printed beside a published anchor.

Each figure is the closed-form steady state of that model (``CostModel.steady_state``): a saturated engine whose
slots (``max_num_seqs``, or fewer when the KV cache is full) all decode while each step carries the prefill that
replaces finished requests. ``tests/test_gpu_model.py`` checks that the simulated engine itself, fed by chains, reaches
the same rate. Request shapes come from this project's own prompt builder (v2, a full context block) and render
sizes of an A4 page. A GPU calibration (``--calibration FILE``, from ``python -m jobs.calibrate`` / ``jobs.gpu_check``)
replaces the model: its measured rates are reported and used by the engine experiments instead.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chunker.backends import gpu_model as gm
from chunker.backends.simulated import EngineSpec
from chunker.config import ModelConfig, load_config
from chunker.convert.prompts import PROMPT_VERSION, build_request
from chunker.types import BatchContext

REPO = Path(__file__).resolve().parents[2]
CONFIGS = {"7B": REPO / "configs" / "qwen2.5-vl-7b.yaml", "3B": REPO / "configs" / "qwen2.5-vl-3b.yaml"}
# (label, pages per request, longest side in px): the shipped configs, then the throughput profile's choices.
LAYOUTS = [("4 x 1,568 px (shipped)", 4, 1568), ("4 x 1,288 px", 4, 1288), ("2 x 1,288 px (throughput)", 2, 1288),
           ("1 x 1,288 px", 1, 1288)]
PRECISIONS = {"bf16": (None, "auto"), "fp8": ("fp8", "fp8")}
MAX_NUM_SEQS = 128  # the guidance for 80-141 GB cards; the KV cache may hold fewer (the "seqs" column)
OUTPUT_TOKENS_PER_PAGE = EngineSpec().output_tokens_per_page
A4_ASPECT = 210 / 297

ANCHOR = {
    "system": "olmOCR-2 (Allen Institute for AI): a fine-tuned Qwen2.5-VL-7B",
    "pages_per_s": 4.5,
    "gpu": "H100",
    "setup": "FP8 weights, one page per request (independent pages)",
    "what": "a published figure (as quoted in issue 14), not measured by this project; its own prompt, output "
            "format and page mix",
}


def request_shape(pages: int, side: int) -> dict[str, int]:
    """Token counts of one request of ``pages`` A4 pages rendered at ``side`` px, with a full context block, as this
    project's prompt builder writes it (text at ~4 characters a token, as the simulated engine counts)."""
    width = round(side * A4_ASPECT)
    ctx = BatchContext(summary="s" * 600, tail="t" * 800, heading_path=["Document title", "Chapter", "Section"],
                       table_header="Column A | Column B | Column C")
    req = build_request(list(range(1, pages + 1)), ctx, "markdown", PROMPT_VERSION, [b""] * pages,
                        [(width, side)] * pages, 0.1, 8192)
    visual = pages * gm.visual_tokens(width, side)
    text = (len(req.system) + len(req.instructions) + len(req.user)) // 4
    return {"visual": visual, "prompt": visual + text, "cached": EngineSpec.shared_prefix_tokens(req),
            "output": OUTPUT_TOKENS_PER_PAGE * pages}


def estimate_row(model: str, cfg: ModelConfig, gpu: str, precision: str, pages: int, side: int,
                 max_num_seqs: int = MAX_NUM_SEQS) -> dict[str, Any]:
    quantization, kv = PRECISIONS[precision]
    cm = gm.cost_model(cfg.name, gpu, quantization=quantization, kv_cache_dtype=kv,
                       gpu_memory_utilization=cfg.gpu_memory_utilization)
    assert cm is not None, f"no cost model for {cfg.name}"
    shape = request_shape(pages, side)
    st = cm.steady_state(shape["prompt"], shape["cached"], shape["visual"], pages, shape["output"], max_num_seqs,
                         cfg.max_num_batched_tokens)
    return {"model": model, "gpu": gpu, "precision": precision, "pages_per_request": pages, "side_px": side,
            "prompt_tokens": shape["prompt"], "output_tokens": shape["output"], "sequences": st.sequences,
            "kv_cache_tokens": cm.kv_capacity_tokens, "step_ms": round(st.step_s * 1000, 1),
            "kv_read_gb_per_step": round(st.kv_read_gb, 1), "pages_per_s": round(st.requests_per_s * pages, 2)}


def engine_pages_per_s(spec: EngineSpec, pages: int = 4, side: int = 1568) -> float:
    """Saturated pages/s of one simulated engine on requests of ``pages`` A4 pages at ``side`` px."""
    shape = request_shape(pages, side)
    if spec.cost is None:
        return spec.pages_per_s(shape["prompt"] / pages, shape["output"] / pages)
    st = spec.cost.steady_state(shape["prompt"], shape["cached"], shape["visual"], pages, shape["output"],
                                spec.max_num_seqs, spec.max_num_batched_tokens)
    return st.requests_per_s * pages


def time_scale_for(spec: EngineSpec, base: float) -> float:
    """The benchmark's time scales were chosen for an engine of the flat defaults' rate: scale them with the
    engine's rate, so the host converts the same pages per wall second (the same CPU load) whatever it stands for."""
    return base * engine_pages_per_s(spec) / engine_pages_per_s(EngineSpec())


def assumptions() -> list[str]:
    gpus = [f"{g.name}: {g.hbm_bytes_per_s / 1e12:g} TB/s, {g.bf16_flops / 1e12:g} / {g.fp8_flops / 1e12:g} "
            f"TFLOP/s bf16 / fp8 dense, {g.memory_gib:g} GiB ({g.source})" for g in gm.GPU_CLASSES.values()]
    return gpus + [
        "model shapes: the published Qwen2.5-VL-7B/3B config.json (layers, heads, KV heads, sizes); vision tower "
        "0.67B parameters, 4 patches per visual token, 4 full-attention blocks",
        f"matmul efficiency {gm.MATMUL_EFFICIENCY:.0%} of the dense peak (prefill, vision tower); HBM efficiency "
        f"{gm.HBM_EFFICIENCY:.0%}; {gm.STEP_OVERHEAD_S * 1000:g} ms overhead per engine step; "
        f"{gm.ACTIVATION_RESERVE_GIB:g} GiB reserved before the KV cache; gpu_memory_utilization 0.90",
        "FP8: the LLM's linear layers at the FP8 rate with 1-byte weights (the vision tower stays 16-bit); FP8 KV "
        "cache: 1 byte per element",
        f"requests: A4 pages, {OUTPUT_TOKENS_PER_PAGE} output tokens per page, the v2 prompt with a full context "
        "block; system prompt and instructions from the prefix cache; max_num_seqs "
        f"{MAX_NUM_SEQS} (fewer where the KV cache cannot hold them with their answers)",
        "a saturated engine: enough chains in flight (ray.convert_concurrency ~1.25 x max_num_seqs), no preemption, "
        "no host-side limits (image preprocessing, Python overhead), every answer accepted at the first attempt",
    ]


def gpu_estimate(calibration: str | None = None, gpus: tuple[str, ...] = ("h100", "h200")) -> dict[str, Any]:
    rows, shipped = [], []
    for model, path in CONFIGS.items():
        cfg = load_config(path).converter.model
        for _, pages, side in LAYOUTS:
            for gpu in gpus:
                for precision in PRECISIONS:
                    rows.append(estimate_row(model, cfg, gpu, precision, pages, side))
        # The config file as it ships (its own max_num_seqs, sized for smaller cards), on the first GPU class.
        shipped.append(estimate_row(model, cfg, gpus[0], "bf16", 4, 1568, max_num_seqs=cfg.max_num_seqs))
    out: dict[str, Any] = {"rows": rows, "shipped": shipped, "anchor": ANCHOR, "assumptions": assumptions(),
                           "source": "estimated (cost model), not measured on a GPU"}
    if calibration:
        spec = EngineSpec.from_calibration(calibration)
        shape = request_shape(4, 1568)
        out["calibrated"] = {"file": calibration, "spec": spec.describe(), "pages_per_s_4x1568": round(
            spec.pages_per_s(shape["prompt"] / 4, spec.output_tokens_per_page), 2),
            "note": "measured on a GPU: replaces the cost model in the engine experiments"}
    return out


def markdown(sec: dict[str, Any]) -> list[str]:
    a = sec["anchor"]
    lines = ["## Per-GPU estimate (KV-aware cost model, not measured)", "",
             "Pages/s one GPU converts when saturated; every figure is an estimate from the simulated engine's cost "
             "model until a GPU run replaces it (`python -m jobs.gpu_check` on a GPU host, then `--calibration`).", "",
             f"Published anchor: **{a['system']}: ~{a['pages_per_s']} pages/s per {a['gpu']}**, {a['setup']}: "
             f"{a['what']}.", ""]
    gpus = sorted({r["gpu"] for r in sec["rows"]})
    head = " | ".join(f"{g.upper()} {p}" for g in gpus for p in PRECISIONS)
    lines += [f"| model | pages x px per request | prompt tokens | {head} |", "|" + " --- |" * (3 + 2 * len(gpus))]
    index = {(r["model"], r["pages_per_request"], r["side_px"], r["gpu"], r["precision"]): r for r in sec["rows"]}
    for model in CONFIGS:
        for label, pages, side in LAYOUTS:
            cells = []
            for g in gpus:
                for p in PRECISIONS:
                    r = index[(model, pages, side, g, p)]
                    cells.append(f"{r['pages_per_s']} ({r['sequences']} seqs)")
            prompt = index[(model, pages, side, gpus[0], "bf16")]["prompt_tokens"]
            lines.append(f"| {model} | {label} | {prompt:,} | " + " | ".join(cells) + " |")
    near = index[("7B", 1, 1288, "h100", "fp8")] if "h100" in gpus else None
    lines += ["", f"(max_num_seqs {MAX_NUM_SEQS}, the guidance for 80-141 GB cards; seqs: sequences running at once, "
              "fewer where the KV cache cannot hold them with their answers.)", ""]
    if sec.get("shipped"):
        lines += ["As the config files ship (max_num_seqs sized for smaller cards), bf16, 4 x 1,568 px: " + "; ".join(
            f"{r['model']} with {r['sequences']} sequences on an {r['gpu'].upper()}: {r['pages_per_s']} pages/s"
            for r in sec["shipped"]) + ".", ""]
    if near:
        lines += [f"The layout nearest the anchor (7B, one 1,288 px page per request, H100, FP8) is estimated at "
                  f"{near['pages_per_s']} pages/s, {near['pages_per_s'] / a['pages_per_s']:.1f}x the anchor: read "
                  "the table for what pages per request, render size, FP8 and the GPU class change, and wait for a "
                  "GPU run before trusting absolute figures.", ""]
    lines += ["Assumptions:", ""] + [f"- {x}" for x in sec["assumptions"]] + [""]
    if "calibrated" in sec:
        c = sec["calibrated"]
        lines += [f"Calibration `{c['file']}` ({c['spec']}): **{c['pages_per_s_4x1568']} pages/s** at 4 x 1,568 px, "
                  f"{c['note']}.", ""]
    return lines
