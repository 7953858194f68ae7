"""A request in flight when the vLLM engine dies ends with EngineDead at once, even when vLLM never wakes it.

vLLM normally hands in-flight requests an EngineDeadError when its core dies; inside a Ray actor a request sent as
the core died waited for its batch timeout instead (16 minutes in the engine tier's killed run). The backend checks
``AsyncLLM.errored`` while it waits. The engine tier shows the real case (tests/engine/test_vllm_ingest.py).
"""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any

import pytest

from chunker.backends import vllm_backend
from chunker.backends.base import EngineDead, GenerationRequest
from chunker.backends.vllm_backend import VllmBackend
from chunker.config import ModelConfig


class SilentEngine:
    """AsyncLLM's protocol; a request never hears back after the core "dies" (``errored`` turns True), as the
    request did whose socket vLLM closed from its monitor thread."""

    def __init__(self, answer_after_s: float | None = None) -> None:
        self.answer_after_s = answer_after_s
        self.errored = False
        self.aborted: list[str] = []
        self.model_config = SimpleNamespace(get_diff_sampling_param=dict)

    async def generate(self, prompt: dict, params: Any, request_id: str):
        try:
            if self.answer_after_s is None:
                await asyncio.Event().wait()  # nothing will ever set it
            await asyncio.sleep(self.answer_after_s)
            completion = SimpleNamespace(text="# A", token_ids=[1, 2], finish_reason="stop")
            yield SimpleNamespace(outputs=[completion], prompt_token_ids=[1, 2, 3], finished=True)
        except asyncio.CancelledError:
            self.aborted.append(request_id)
            raise

    def shutdown(self, timeout: float | None = None) -> None:
        pass


def _backend(engine: SilentEngine) -> VllmBackend:
    return VllmBackend(ModelConfig(name="m"), engine=engine, sampling_factory=dict)


def _request() -> GenerationRequest:
    return GenerationRequest(system="S", user="Convert.", max_tokens=8, request_id="doc/s0/b0")


@pytest.fixture(autouse=True)
def quick_poll(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vllm_backend, "DEATH_POLL_S", 0.05)


def test_a_request_the_dead_engine_never_answers_ends_with_engine_dead():
    engine = SilentEngine()
    backend = _backend(engine)

    async def go() -> float:
        task = asyncio.ensure_future(backend.generate(_request()))
        await asyncio.sleep(0.2)
        assert not task.done(), "the request waits while the engine lives"
        engine.errored = True  # the core died; vLLM's monitor thread flags it
        t0 = time.monotonic()
        with pytest.raises(EngineDead, match="in flight"):
            await asyncio.wait_for(task, 5.0)  # without the check: a TimeoutError, the request never ends
        return time.monotonic() - t0

    assert asyncio.run(go()) < 1.0
    assert len(engine.aborted) == 1 and engine.aborted[0].startswith("doc/s0/b0#"), "the request was let go"


def test_a_slow_answer_from_a_live_engine_still_arrives():
    engine = SilentEngine(answer_after_s=0.3)  # several polls long
    res = asyncio.run(_backend(engine).generate(_request()))
    assert res.text == "# A" and not engine.aborted


def test_cancelling_the_caller_still_aborts_the_request():
    engine = SilentEngine()
    backend = _backend(engine)

    async def go() -> None:
        task = asyncio.ensure_future(backend.generate(_request()))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert len(engine.aborted) == 1, "the engine saw the abort before the caller went on"

    asyncio.run(go())
