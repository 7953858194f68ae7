"""What the vllm backend tests share: generation requests with page images, engine outputs, and a fake engine that
speaks AsyncLLM's protocol (no vllm, no GPU).

Imported by tests/test_backend_vllm.py and tests/test_vllm_requests.py (tests/ is on sys.path under pytest).
"""

from __future__ import annotations

import asyncio
import io
from types import SimpleNamespace
from typing import Any

from PIL import Image

from chunker.backends.base import GenerationRequest
from chunker.backends.vllm_backend import VllmBackend
from chunker.config import ModelConfig

# Qwen2.5-VL's published generation_config.json, as vLLM's get_diff_sampling_param reports it.
QWEN_DEFAULTS = {"repetition_penalty": 1.05, "temperature": 0.1, "top_k": 1, "top_p": 0.001, "max_tokens": 2048}


def png(color: str, size: tuple[int, int]) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, format="PNG")
    return buf.getvalue()


def make_request(**kw: Any) -> GenerationRequest:
    base = dict(
        system="SYS",
        user="Convert.",
        images=[png("red", (40, 60)), png("blue", (70, 30))],
        image_mime="image/png",
        temperature=0.2,
        max_tokens=321,
        request_id="doc:3",
    )
    base.update(kw)
    return GenerationRequest(**base)


def make_output(text: str = "# A", reason: str | None = "stop", prompt: int = 50, out: int = 7) -> SimpleNamespace:
    completion = SimpleNamespace(text=text, token_ids=list(range(out)), finish_reason=reason)
    return SimpleNamespace(outputs=[completion], prompt_token_ids=list(range(prompt)), finished=True)


class FakeEngine:
    """Speaks AsyncLLM's protocol: generate(prompt, params, request_id) is an async generator that yields a partial
    then the final output, and aborts the request when the consumer is cancelled; shutdown() is synchronous."""

    def __init__(self, final: Any = None, error: BaseException | None = None, delay: float = 0.0,
                 defaults: dict | None = None) -> None:
        self.calls: list[tuple[dict, Any, str]] = []
        self.final = final if final is not None else make_output()
        self.error = error
        self.delay = delay
        self.shut = 0
        self.live: set[str] = set()
        self.peak = 0
        self.aborted: list[str] = []
        self.model_config = SimpleNamespace(get_diff_sampling_param=lambda: dict(defaults or {}))

    async def generate(self, prompt: dict, params: Any, request_id: str):
        self.calls.append((prompt, params, request_id))
        self.live.add(request_id)
        self.peak = max(self.peak, len(self.live))
        try:
            await asyncio.sleep(self.delay)
            if self.error is not None:
                raise self.error
            yield make_output(text="# partial", reason=None)
            yield self.final
        except asyncio.CancelledError:
            self.aborted.append(request_id)
            raise
        finally:
            self.live.discard(request_id)

    def shutdown(self, timeout: float | None = None) -> None:
        self.shut += 1


def make_backend(engine: FakeEngine, cfg: ModelConfig | None = None, **kw: Any) -> VllmBackend:
    cfg = cfg or ModelConfig(name="Qwen/Qwen2.5-VL-7B-Instruct")
    return VllmBackend(cfg, engine=engine, sampling_factory=dict, **kw)
