"""The transformers backend end to end on a tiny random Qwen2.5-VL built offline (see tests/tiny_qwen.py)."""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

import pytest
from PIL import Image

from chunker.backends.base import BackendUnavailable, GenerationRequest
from chunker.backends.errors import BackendRequestError
from chunker.backends.registry import make_backend
from chunker.config import ConverterConfig, ModelConfig

pytest.importorskip("torch")
pytest.importorskip("transformers")

from tiny_qwen import build_tiny_qwen  # noqa: E402  (tests/ is on sys.path under pytest)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_qwen(tmp_path_factory.mktemp("tiny-qwen"))


def _jpeg(color: str, size: tuple[int, int]) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, format="JPEG")
    return buf.getvalue()


def _request(**kw) -> GenerationRequest:
    base = dict(
        system="You convert pages to Markdown.",
        user="Convert the pages.",
        images=[_jpeg("white", (96, 128)), _jpeg("gray", (128, 80))],
        temperature=0.0,
        max_tokens=12,
        request_id="doc:0",
    )
    base.update(kw)
    return GenerationRequest(**base)


@pytest.fixture(scope="module")
def backend(tiny_dir: Path):
    cfg = ConverterConfig(
        backend="transformers",
        model=ModelConfig(path=str(tiny_dir), dtype="float32", device="cpu"),
    )
    b = make_backend(cfg, batch_pages=2, max_side_px=448)
    yield b
    asyncio.run(b.close())


def test_generates_with_two_images(backend):
    result = asyncio.run(backend.generate(_request()))
    assert isinstance(result.text, str)
    assert result.input_tokens > 20  # the prompt with both images expanded into patch tokens
    assert 0 < result.output_tokens <= 12
    assert result.finish_reason in {"stop", "length"}


def test_greedy_is_deterministic_and_hits_the_length_cap(backend):
    a = asyncio.run(backend.generate(_request(max_tokens=5)))
    b = asyncio.run(backend.generate(_request(max_tokens=5)))
    assert a.text == b.text
    # Random weights almost never emit <|im_end|> within 5 tokens: the cap is what stops them.
    if a.output_tokens == 5:
        assert a.finish_reason == "length"


def test_sampling_and_concurrent_calls_are_serialised(backend):
    async def many():
        return await asyncio.gather(*(backend.generate(_request(temperature=0.7, max_tokens=4)) for _ in range(3)))

    results = asyncio.run(many())
    assert len(results) == 3 and all(r.output_tokens > 0 for r in results)


def test_image_count_above_batch_pages_is_rejected(backend):
    with pytest.raises(BackendRequestError):
        asyncio.run(backend.generate(_request(images=[_jpeg("red", (64, 64))] * 3)))


def test_missing_directory_fails_clearly(tmp_path):
    with pytest.raises(BackendUnavailable, match="not a directory"):
        make_backend(ConverterConfig(backend="transformers", model=ModelConfig(path=str(tmp_path / "nope"), device="cpu")))
