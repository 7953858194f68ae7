"""Backend registry, the scripted backend, the light-import guarantee and the per-model-size GPU configs."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from chunker.backends.base import EngineDead, GenerationRequest, GenerationResult
from chunker.backends.registry import known_backends, make_backend
from chunker.backends.scripted import ScriptedBackend
from chunker.config import ConverterConfig, load_config

REPO = Path(__file__).resolve().parents[1]


def test_importing_backends_stays_light():
    code = (
        "import sys, json\n"
        "import chunker.backends.registry, chunker.backends.scripted, chunker.backends.openai_backend\n"
        "import chunker.backends.vllm_backend, chunker.backends.transformers_backend, chunker.backends.weights\n"
        "print(json.dumps(sorted(m for m in ('torch', 'vllm', 'transformers', 'ray') if m in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_unknown_backend_lists_known_ones():
    with pytest.raises(ValueError) as info:
        make_backend(ConverterConfig(backend="pdf-text"))
    msg = str(info.value)
    assert all(name in msg for name in ("vllm", "openai", "transformers", "scripted"))
    assert known_backends() == ["openai", "scripted", "simulated", "transformers", "vllm"]


def test_registry_builds_openai_and_scripted_without_heavy_imports():
    backend = make_backend(ConverterConfig(backend="openai"))
    assert backend.name == "openai"
    asyncio.run(backend.close())
    scripted = make_backend(ConverterConfig(backend="scripted"))
    result = asyncio.run(scripted.generate(GenerationRequest(system="", user="u", images=[b"x", b"y"])))
    assert result.text.startswith("# ") and result.finish_reason == "stop"


def _req(i: int = 0) -> GenerationRequest:
    return GenerationRequest(system="s", user=f"batch {i}")


def test_scripted_list_answers_in_order_and_records_requests():
    backend = ScriptedBackend(["first", GenerationResult("cut", finish_reason="length"), EngineDead("gone")])

    async def go():
        a = await backend.generate(_req(0))
        b = await backend.generate(_req(1))
        with pytest.raises(EngineDead):
            await backend.generate(_req(2))
        with pytest.raises(AssertionError, match="script holds 3"):
            await backend.generate(_req(3))
        return a, b

    a, b = asyncio.run(go())
    assert (a.text, a.finish_reason, a.output_tokens > 0) == ("first", "stop", True)
    assert (b.text, b.finish_reason) == ("cut", "length")
    assert backend.calls == 4 and [r.user for r in backend.requests] == ["batch 0", "batch 1", "batch 2", "batch 3"]


def test_scripted_async_function_and_latency_run_concurrently():
    async def script(request: GenerationRequest, index: int) -> str:
        await asyncio.sleep(0)
        return f"{index}:{request.user}"

    backend = ScriptedBackend(script, latency=lambda req, i: 0.1)

    async def go():
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        results = await asyncio.gather(*(backend.generate(_req(i)) for i in range(5)))
        return results, loop.time() - t0

    results, elapsed = asyncio.run(go())
    assert sorted(r.text for r in results) == [f"{i}:batch {i}" for i in range(5)]
    assert elapsed < 0.4  # five 0.1 s latencies overlap instead of adding up


@pytest.mark.parametrize("size,tp", [("3b", 1), ("7b", 1), ("32b", 2), ("72b", 4)])
def test_gpu_configs_validate(size: str, tp: int):
    cfg = load_config(REPO / "configs" / f"qwen2.5-vl-{size}.yaml")
    model = cfg.converter.model
    assert cfg.converter.backend == "vllm"
    assert model.name == f"Qwen/Qwen2.5-VL-{size.upper()}-Instruct"
    assert model.dtype == "bfloat16" and model.tensor_parallel_size == tp
    assert cfg.ray.convert_num_gpus == tp
    # Every GPU is conversion's; the embedder runs on CPU (tests/test_cluster_fit.py checks the demand fits a node).
    assert cfg.embed.device == "cpu" and cfg.ray.embed_num_gpus == 0 and cfg.ray.convert_cpus() >= 4
    assert cfg.ray.convert_concurrency >= model.max_num_seqs
    # The longest prompt (all pages at the render cap) plus the output budget fits the context.
    vision_tokens = (cfg.render.max_side_px // 28) ** 2
    assert cfg.intake.batch_pages * vision_tokens + model.max_output_tokens + 4096 <= model.max_model_len


def test_weights_found_in_hf_cache_without_network(tmp_path):
    from chunker.backends.weights import cached_snapshot

    snap = tmp_path / "models--Org--Tiny" / "snapshots" / ("a" * 40)
    snap.mkdir(parents=True)
    (tmp_path / "models--Org--Tiny" / "refs").mkdir()
    (tmp_path / "models--Org--Tiny" / "refs" / "main").write_text("a" * 40)
    (snap / "config.json").write_text("{}")
    assert cached_snapshot("Org/Tiny", cache_dir=str(tmp_path)) is None  # config alone is not a model
    (snap / "model.safetensors").write_bytes(b"")
    assert cached_snapshot("Org/Tiny", cache_dir=str(tmp_path)) == snap
    assert cached_snapshot("Org/Other", cache_dir=str(tmp_path)) is None


def test_model_dir_resolution_order(tmp_path):
    from chunker.backends.base import BackendUnavailable
    from chunker.backends.weights import resolve_model_dir
    from chunker.config import ModelConfig

    (tmp_path / "config.json").write_text("{}")
    assert resolve_model_dir(ModelConfig(path=str(tmp_path))) == str(tmp_path)
    assert resolve_model_dir(ModelConfig(name=str(tmp_path))) == str(tmp_path)
    assert resolve_model_dir(ModelConfig(name="Org/Never-Cached-xyz", allow_download=True)) == "Org/Never-Cached-xyz"
    with pytest.raises(BackendUnavailable, match="hf download Org/Never-Cached-xyz --local-dir DIR"):
        resolve_model_dir(ModelConfig(name="Org/Never-Cached-xyz"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(BackendUnavailable, match="no config.json"):
        resolve_model_dir(ModelConfig(path=str(tmp_path / "empty")))


def test_the_simulated_engine_takes_its_pace_from_the_config_and_answers_the_same_sooner():
    """converter.model.simulated_time_scale compresses the simulated engine's time: the same answer, a fraction of
    the wall time (the cluster tests run it at 0.05; a dry run keeps 1, the calibrated GPU's pace)."""
    import time

    def answer(scale: float) -> tuple[str, float]:
        cfg = ConverterConfig(backend="simulated", model={"simulated_time_scale": scale, "max_output_tokens": 64})
        backend = make_backend(cfg, batch_pages=1, max_side_px=448)
        assert backend.time_scale == scale
        req = GenerationRequest(system="s", user="u", images=[b"x"], max_tokens=64, request_id="r1")
        t0 = time.monotonic()
        result = asyncio.run(backend.generate(req))
        took = time.monotonic() - t0
        asyncio.run(backend.close())
        return result.text, took

    assert ConverterConfig().model.simulated_time_scale == 1.0
    slow_text, slow = answer(1.0)
    fast_text, fast = answer(0.05)
    assert fast_text == slow_text and fast < slow / 4, (fast, slow)
    with pytest.raises(ValueError, match="simulated_time_scale"):
        ConverterConfig(model={"simulated_time_scale": 0})
