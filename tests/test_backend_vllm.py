"""The vllm backend's request construction and output mapping, against a fake engine (no vllm, no GPU)."""

from __future__ import annotations

import asyncio
import io
from types import SimpleNamespace
from typing import Any

import pytest
from PIL import Image

from chunker.backends.base import BackendUnavailable, EngineDead, GenerationRequest
from chunker.backends.errors import BackendRequestError
from chunker.backends.vllm_backend import (
    VllmBackend,
    build_engine_args,
    build_sampling_kwargs,
    build_vllm_inputs,
    chat_messages,
    is_engine_dead,
    max_pixels_for,
    qwen_chat_prompt,
    result_from_output,
)
from chunker.config import ModelConfig


def _png(color: str, size: tuple[int, int]) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, format="PNG")
    return buf.getvalue()


def _request(**kw: Any) -> GenerationRequest:
    base = dict(
        system="SYS",
        user="Convert.",
        images=[_png("red", (40, 60)), _png("blue", (70, 30))],
        image_mime="image/png",
        temperature=0.2,
        max_tokens=321,
        request_id="doc:3",
    )
    base.update(kw)
    return GenerationRequest(**base)


def _output(text: str = "# A", reason: str | None = "stop", prompt: int = 50, out: int = 7) -> SimpleNamespace:
    completion = SimpleNamespace(text=text, token_ids=list(range(out)), finish_reason=reason)
    return SimpleNamespace(outputs=[completion], prompt_token_ids=list(range(prompt)), finished=True)


class FakeEngine:
    """Records generate() calls; yields a partial then the final output, as vLLM's async generator does."""

    def __init__(self, final: Any = None, error: BaseException | None = None) -> None:
        self.calls: list[tuple[dict, Any, str]] = []
        self.final = final if final is not None else _output()
        self.error = error
        self.shut = False

    async def generate(self, prompt: dict, params: Any, request_id: str):
        self.calls.append((prompt, params, request_id))
        await asyncio.sleep(0)
        if self.error is not None:
            raise self.error
        yield _output(text="# partial", reason=None)
        yield self.final

    def shutdown(self) -> None:
        self.shut = True


def _backend(engine: FakeEngine, **kw: Any) -> VllmBackend:
    return VllmBackend(ModelConfig(name="Qwen/Qwen2.5-VL-7B-Instruct"), engine=engine, sampling_factory=dict, **kw)


def test_prompt_has_one_vision_block_per_page_and_images_in_order():
    req = _request()
    inputs = build_vllm_inputs(req, qwen_chat_prompt)
    prompt = inputs["prompt"]
    assert prompt.startswith("<|im_start|>system\nSYS<|im_end|>\n<|im_start|>user\n")
    assert prompt.count("<|vision_start|><|image_pad|><|vision_end|>") == 2
    assert prompt.endswith("Convert.<|im_end|>\n<|im_start|>assistant\n")
    images = inputs["multi_modal_data"]["image"]
    assert [im.size for im in images] == [(40, 60), (70, 30)]
    assert [im.getpixel((0, 0)) for im in images] == [(255, 0, 0), (0, 0, 255)]
    assert all(im.mode == "RGB" for im in images)


def test_text_only_request_has_no_multimodal_data():
    inputs = build_vllm_inputs(_request(images=[]), qwen_chat_prompt)
    assert "multi_modal_data" not in inputs and "<|image_pad|>" not in inputs["prompt"]


def test_real_tokenizer_chat_template_matches_qwen_format(tmp_path):
    # The tiny model's tokenizer carries a Qwen2-VL-style template: the model's own template path gives the
    # same prompt as the written-out fallback.
    pytest.importorskip("transformers")
    from chunker.backends.vllm_backend import hf_chat_template
    from tiny_qwen import build_tokenizer_only

    folder = build_tokenizer_only(tmp_path / "tok")
    render = hf_chat_template(str(folder), local_only=True)
    messages = chat_messages(_request())
    assert render(messages) == qwen_chat_prompt(messages)


def test_sampling_kwargs():
    assert build_sampling_kwargs(_request()) == {"temperature": 0.2, "max_tokens": 321}
    schema = {"type": "object"}
    assert build_sampling_kwargs(_request(json_schema=schema))["structured_outputs"] == {"json": schema}


def test_max_pixels_never_shrinks_a_render():
    assert max_pixels_for(1568) == 1568 * 1568  # 1568 = 56 x 28
    assert max_pixels_for(1000) == 1008 * 1008
    assert max_pixels_for(1000) % (28 * 28) == 0


def test_engine_args_from_config():
    cfg = ModelConfig(name="Qwen/Qwen2.5-VL-32B-Instruct", tensor_parallel_size=2, max_model_len=24576,
                      gpu_memory_utilization=0.85, max_num_seqs=32)
    args = build_engine_args(cfg, "/models/q32", max_images=4, max_pixels=max_pixels_for(1568))
    assert args["model"] == "/models/q32"
    assert args["tensor_parallel_size"] == 2 and args["max_model_len"] == 24576
    assert args["gpu_memory_utilization"] == 0.85 and args["max_num_seqs"] == 32
    assert args["limit_mm_per_prompt"] == {"image": 4, "video": 0}
    assert args["mm_processor_kwargs"] == {"max_pixels": 1568 * 1568}
    assert args["dtype"] == "bfloat16"
    assert args["distributed_executor_backend"] == "mp"
    single = build_engine_args(ModelConfig(), "/m", max_images=2, max_pixels=1)
    assert "distributed_executor_backend" not in single


def test_result_mapping():
    r = result_from_output(_output("# T", "length", prompt=900, out=8192), "m")
    assert (r.text, r.input_tokens, r.output_tokens, r.finish_reason, r.model) == ("# T", 900, 8192, "length", "m")
    assert result_from_output(_output(reason="abort"), "m").finish_reason == "error"
    with pytest.raises(BackendRequestError):
        result_from_output(SimpleNamespace(outputs=[], prompt_token_ids=[]), "m")


def test_generate_through_fake_engine():
    engine = FakeEngine(final=_output("# Done", "stop", prompt=123, out=9))
    backend = _backend(engine)
    result = asyncio.run(backend.generate(_request()))
    assert (result.text, result.input_tokens, result.output_tokens, result.finish_reason) == ("# Done", 123, 9, "stop")
    prompt, params, rid = engine.calls[0]
    assert params == {"temperature": 0.2, "max_tokens": 321}
    assert len(prompt["multi_modal_data"]["image"]) == 2
    assert rid.startswith("doc:3#")
    asyncio.run(backend.close())
    assert engine.shut


def test_request_ids_are_unique_across_retries():
    engine = FakeEngine()
    backend = _backend(engine)

    async def twice():
        await backend.generate(_request())
        await backend.generate(_request())

    asyncio.run(twice())
    assert engine.calls[0][2] != engine.calls[1][2]


def test_too_many_images_is_not_retryable():
    backend = _backend(FakeEngine(), max_images=1)
    with pytest.raises(BackendRequestError) as info:
        asyncio.run(backend.generate(_request()))
    assert not info.value.retryable


def test_undecodable_image_fails_the_request():
    with pytest.raises(BackendRequestError, match="cannot be decoded"):
        asyncio.run(_backend(FakeEngine()).generate(_request(images=[b"not an image"])))


class EngineDeadError(Exception):  # same name as vLLM's: matched by name
    pass


class OutOfMemoryError(RuntimeError):
    pass


@pytest.mark.parametrize("error", [EngineDeadError("core died"), OutOfMemoryError("x"), RuntimeError("CUDA out of memory. Tried")])
def test_dead_engine_errors_raise_engine_dead(error):
    with pytest.raises(EngineDead):
        asyncio.run(_backend(FakeEngine(error=error)).generate(_request()))


def test_other_engine_errors_are_retryable():
    with pytest.raises(BackendRequestError) as info:
        asyncio.run(_backend(FakeEngine(error=ValueError("bad prompt"))).generate(_request()))
    assert info.value.retryable and not is_engine_dead(info.value)


def test_missing_weights_fail_clearly_without_network(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(BackendUnavailable, match="allow_download"):
        VllmBackend(ModelConfig(name="Qwen/Qwen2.5-VL-7B-Instruct-not-cached"))


def test_missing_vllm_or_gpu_fails_clearly(tmp_path):
    try:
        import vllm  # noqa: F401
        import torch

        if torch.cuda.is_available():
            pytest.skip("vllm and a GPU are present")
    except ImportError:
        pass
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(BackendUnavailable, match="pip install|CUDA GPU"):
        VllmBackend(ModelConfig(path=str(tmp_path)))


def _gpu_available() -> bool:
    try:
        import torch
        import vllm  # noqa: F401
    except ImportError:
        return False
    return torch.cuda.is_available()


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu_available(), reason="needs vllm and a CUDA GPU")
def test_real_engine_generates(tmp_path):
    """On a GPU box: set VLLM_TEST_MODEL to a local Qwen2.5-VL directory (nothing is downloaded)."""
    import os

    path = os.environ.get("VLLM_TEST_MODEL")
    if not path:
        pytest.skip("VLLM_TEST_MODEL not set")
    cfg = ModelConfig(path=path, max_model_len=8192, gpu_memory_utilization=0.5, max_num_seqs=4)
    backend = VllmBackend(cfg, max_images=2, max_side_px=448)

    async def go():
        try:
            return await backend.generate(_request(max_tokens=64))
        finally:
            await backend.close()

    result = asyncio.run(go())
    assert isinstance(result.text, str) and result.input_tokens > 0 and result.output_tokens > 0
    assert result.finish_reason in {"stop", "length"}
