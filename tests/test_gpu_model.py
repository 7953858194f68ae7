"""The KV-aware cost model, the simulated engine that runs on it, and the benchmark's per-GPU estimate."""

from __future__ import annotations

import asyncio

import pytest

from chunker.backends import gpu_model as gm
from chunker.backends.simulated import EngineSpec, SimulatedBackend
from chunker.config import ModelConfig
from chunker.convert.prompts import build_request
from chunker.types import BatchContext
from jobs.bench.gpu_estimate import gpu_estimate, markdown, request_shape


def test_the_kv_tax_of_a_four_page_request() -> None:
    h100 = gm.cost_model("Qwen/Qwen2.5-VL-7B-Instruct", "h100")
    shape = request_shape(4, 1568)
    assert 10_000 < shape["prompt"] < 11_000 and shape["visual"] == 4 * 40 * 56
    context = shape["prompt"] + shape["output"] / 2  # ~11k tokens while it decodes
    assert 0.55e9 < context * h100.kv_bytes_per_token < 0.7e9  # ~0.6 GB of bf16 KV read per decode step
    # Each decode step of each sequence pays for its whole context: a step of 64 such sequences costs far more than
    # one of 64 sequences of one short page, with the same weights read once.
    assert h100.step_seconds(64, 64 * 11_000) > 1.5 * h100.step_seconds(64, 64 * 2_600)
    # FP8 halves the weight bytes read and the KV bytes, and fits twice the tokens.
    fp8 = gm.cost_model("Qwen/Qwen2.5-VL-7B-Instruct", "h100", quantization="fp8", kv_cache_dtype="fp8")
    assert fp8.kv_bytes_per_token == h100.kv_bytes_per_token / 2
    assert fp8.weight_bytes < 0.6 * h100.weight_bytes and fp8.kv_capacity_tokens > 2 * h100.kv_capacity_tokens
    assert fp8.step_seconds(64, 64 * 11_000) < h100.step_seconds(64, 64 * 11_000)
    # 7B at bf16 on 80 GB: the KV cache, not max_num_seqs, bounds the 4-page sequences running at once.
    assert h100.sequences_that_fit(shape["prompt"] + shape["output"], 128) < 100
    assert gm.cost_model("unknown-model", "h100") is None and gm.cost_model("Qwen2.5-VL-7B", "a100") is None


def test_the_estimate_reflects_pages_per_request_render_size_fp8_and_gpu_class() -> None:
    sec = gpu_estimate()
    rows = {(r["model"], r["gpu"], r["precision"], r["pages_per_request"], r["side_px"]): r["pages_per_s"]
            for r in sec["rows"]}
    assert len(rows) == 2 * 2 * 2 * 4
    for model in ("7B", "3B"):
        for gpu in ("h100", "h200"):
            for p in ("bf16", "fp8"):
                shipped, small, two, one = (rows[(model, gpu, p, n, s)] for n, s in
                                            ((4, 1568), (4, 1288), (2, 1288), (1, 1288)))
                assert shipped < small < two <= one  # smaller renders, fewer pages per request: less KV per step
            for layout in ((4, 1568), (2, 1288)):
                assert rows[(model, gpu, "fp8", *layout)] > rows[(model, gpu, "bf16", *layout)]
                assert rows[(model, "h200", "bf16", *layout)] >= rows[(model, "h100", "bf16", *layout)]
        assert rows[("3B", "h100", "bf16", 4, 1568)] > rows[("7B", "h100", "bf16", 4, 1568)]
    md = "\n".join(markdown(sec))
    assert "olmOCR-2" in md and "published figure" in md and "not measured" in md
    assert "3.35 TB/s" in md and "4.8 TB/s" in md and "matmul efficiency" in md


def test_a_calibration_overrides_the_cost_model(tmp_path) -> None:
    import json

    cal = tmp_path / "engine.json"
    cal.write_text(json.dumps({"engine_spec": {"prefill_tokens_per_s": 30000.0, "decode_tokens_per_s": 6000.0,
                                               "seq_decode_tokens_per_s": 80.0, "max_num_seqs": 64,
                                               "output_tokens_per_page": 500}}))
    spec = EngineSpec.from_calibration(cal)
    assert spec.cost is None and spec.describe().startswith("flat rates")  # measured rates, not the model
    with pytest.raises(ValueError, match="unknown engine_spec fields"):
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps({"engine_spec": {"cost": {}}}))
        EngineSpec.from_calibration(bad)
    sec = gpu_estimate(calibration=str(cal))
    assert sec["calibrated"]["pages_per_s_4x1568"] > 0 and "replaces the cost model" in sec["calibrated"]["note"]
    model = EngineSpec.for_model(ModelConfig(max_num_seqs=16), "h200")
    assert model.cost is not None and model.cost.gpu is gm.H200 and model.max_num_seqs == 16
    assert EngineSpec.for_model(ModelConfig(name="tiny-model")).cost is None  # unknown shape: flat rates


def run_on_virtual_time(coro):  # noqa: ANN001, ANN201
    """Run ``coro`` on an event loop whose clock jumps to the next timer instead of sleeping, so the simulated engine
    (which advances by the loop's elapsed time) runs as if the host were infinitely fast: no host load in the result.

    The loop waits in its selector with the timeout until its next timer (CPython's BaseEventLoop._run_once); the
    selector here never blocks and moves the clock by that timeout instead.
    """
    loop = asyncio.new_event_loop()
    now = [0.0]
    select = loop._selector.select  # type: ignore[attr-defined]

    def jump(timeout: float | None = None) -> list:
        events = select(0)
        if not events and timeout:
            now[0] += timeout
        return events

    loop.time = lambda: now[0]  # type: ignore[method-assign]
    loop._selector.select = jump  # type: ignore[attr-defined]
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


def _drive(spec: EngineSpec, pages: int, side: int, chains: int, warm_s: float, end_s: float) -> float:
    """Closed-loop chains (each sends its next request when the last is back) against the simulated engine: the
    pages/s it sustains between ``warm_s`` and ``end_s`` simulated seconds."""
    width = round(side * 210 / 297)
    ctx = BatchContext("s" * 600, "t" * 800, ["Document title", "Chapter", "Section"], "Column A | Column B | Column C")

    async def go() -> float:
        be = SimulatedBackend(ModelConfig(), spec=spec)
        loop = asyncio.get_running_loop()
        done: list[float] = []

        async def chain(c: int) -> None:
            i = 0
            while loop.time() < end_s:
                first = i * pages + 1
                req = build_request(list(range(first, first + pages)), ctx, "markdown", "v2", [b""] * pages,
                                    [(width, side)] * pages, 0.1, 8192, request_id=f"c{c}/s0/b{i}")
                await be.generate(req)
                done.append(loop.time())
                i += 1

        try:
            await asyncio.gather(*(chain(c) for c in range(chains)))
        finally:
            await be.close()
        return sum(1 for t in done if warm_s <= t <= end_s) * pages / (end_s - warm_s)

    return run_on_virtual_time(go())


@pytest.mark.parametrize("pages,side", [(4, 1568), (1, 1288)])
def test_the_simulated_engine_reaches_the_closed_form_rate(pages: int, side: int) -> None:
    spec = EngineSpec.for_model(ModelConfig(max_num_seqs=16), "h100")
    shape = request_shape(pages, side)
    steady = spec.cost.steady_state(shape["prompt"], shape["cached"], shape["visual"], pages, shape["output"], 16)
    expected = steady.requests_per_s * pages
    per_request = 1 / steady.requests_per_s * 16  # seconds one request spends in a full engine
    measured = _drive(spec, pages, side, chains=20, warm_s=3 * per_request, end_s=15 * per_request)
    assert measured == _drive(spec, pages, side, chains=20, warm_s=3 * per_request, end_s=15 * per_request)
    # The answers vary in length (+-20 %, and their markup and trailer add tokens) and chains refill the engine in
    # waves: close to the closed form, never above it.
    assert 0.8 * expected < measured < 1.02 * expected, (measured, expected)
