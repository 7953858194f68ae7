"""vLLM's prefix cache, for real: the v2 prompt's instructions (before the images) are computed once per engine."""

from __future__ import annotations

from typing import Any

from engine_support import png


def _pair(version: str) -> list[Any]:
    """Requests of two documents at different points of their chains, with different page images."""
    from chunker.convert.prompts import build_request
    from chunker.types import BatchContext

    first = build_request([1, 2], BatchContext(), "markdown", version, [png((300, 420), "white")] * 2,
                          [(300, 420)] * 2, 0.1, 8, mime="image/png", request_id=f"A-{version}/s0/b0/p1-2/a1")
    second = build_request([37], BatchContext("A manual about pumps.", "the last paragraph", ["Setup"]), "markdown",
                           version, [png((420, 300), "gray")], [(420, 300)], 0.1, 8, mime="image/png",
                           request_id=f"B-{version}/s1/b3/p37/a1")
    return [first, second]


def _tokens_before_the_first_image(backend: Any, request: Any, model_dir: Any) -> int:
    from transformers import AutoTokenizer

    from chunker.backends.vllm_requests import chat_messages

    tokenizer = AutoTokenizer.from_pretrained(str(model_dir), local_files_only=True)
    prompt = backend._template(chat_messages(request))
    return len(tokenizer(prompt.split("<|vision_start|>", 1)[0], add_special_tokens=False)["input_ids"])


def test_the_instructions_come_from_the_prefix_cache_for_the_next_document(vllm_backend, run, tiny_vlm):
    first, second = _pair("v2")
    shared = _tokens_before_the_first_image(vllm_backend, second, tiny_vlm)
    assert shared == _tokens_before_the_first_image(vllm_backend, first, tiny_vlm) > 1000
    run(vllm_backend.generate(first))
    res = run(vllm_backend.generate(second))
    block = vllm_backend._engine.vllm_config.cache_config.block_size
    # Every whole block of the shared instructions was served from the cache, and nothing of the other images.
    assert shared // block * block <= res.cached_tokens <= shared, (res.cached_tokens, shared, block)
    assert res.input_tokens > res.cached_tokens

    # v1 put the images first: two documents shared only the system prompt.
    first, second = _pair("v1")
    run(vllm_backend.generate(first))
    v1 = run(vllm_backend.generate(second))
    assert v1.cached_tokens <= _tokens_before_the_first_image(vllm_backend, second, tiny_vlm) < shared // 4
