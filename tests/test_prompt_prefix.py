"""The fixed instructions come before the page images, so every request of a run shares one token prefix that
vLLM's prefix cache keeps (instead of recomputing ~1k tokens per request)."""

from __future__ import annotations

import pytest

from chunker.backends.openai_backend import build_payload
from chunker.backends.vllm_requests import chat_messages, qwen_chat_prompt
from chunker.convert.prompts import PROMPT_VERSION, PROMPTS, build_request
from chunker.types import BatchContext

VISION_BLOCK = "<|vision_start|><|image_pad|><|vision_end|>"


def _two_requests(version: str, mode: str = "markdown") -> tuple:
    """Requests of two different documents at different points of their chains: different pages, image counts
    and contexts, as two chains of one run interleave on the engine."""
    a = build_request([1, 2, 3, 4], BatchContext(), mode, version, [b"a"] * 4, [(1109, 1568)] * 4, 0.1, 8192,
                      request_id="docA/s0/b0/p1-4/a1")
    b = build_request([37, 38], BatchContext("A contract about pumps.", "the last paragraph", ["Terms", "Fees"],
                                             "Item | Price"), mode, version, [b"b"] * 2, [(1568, 1109)] * 2, 0.3,
                      4096, request_id="docB/s1/b3/p37-38/a2")
    return a, b


def _ids(tokenizer, request) -> list[int]:
    text = tokenizer.apply_chat_template(chat_messages(request), tokenize=False, add_generation_prompt=True)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def _common(x: list[int], y: list[int]) -> int:
    n = 0
    while n < min(len(x), len(y)) and x[n] == y[n]:
        n += 1
    return n


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    pytest.importorskip("transformers")
    from transformers import AutoTokenizer

    from tiny_qwen import build_tokenizer_only

    return AutoTokenizer.from_pretrained(str(build_tokenizer_only(tmp_path_factory.mktemp("tok"))),
                                         local_files_only=True)


@pytest.mark.parametrize("mode", ["markdown", "chunks"])
def test_requests_of_different_documents_share_the_instructions_as_a_token_prefix(tokenizer, mode) -> None:
    assert PROMPT_VERSION == "v2"
    a, b = _two_requests(PROMPT_VERSION, mode)
    ids_a, ids_b = _ids(tokenizer, a), _ids(tokenizer, b)
    shared = _common(ids_a, ids_b)
    vision_start = tokenizer.convert_tokens_to_ids("<|vision_start|>")
    first_image = ids_a.index(vision_start)
    # The first differing token comes after the instructions: the whole text before the first image is shared
    # (the image block itself is keyed by the image's hash in vLLM's cache, so that is where sharing must end).
    assert shared >= first_image == ids_b.index(vision_start)
    prefix = tokenizer.apply_chat_template(chat_messages(a), tokenize=False, add_generation_prompt=True)
    assert prefix.index(VISION_BLOCK) > prefix.index(a.instructions[-200:])  # instructions, then the pages
    assert shared >= 1500, shared  # ~2,500 here: the tiny byte-level vocabulary spends ~1.4 characters a token (Qwen ~4)
    assert shared / len(ids_a) > 0.6  # most of the text of a request is the shared instructions
    # Everything particular to a request comes after its images.
    tail_a = tokenizer.decode(ids_a[ids_a.index(tokenizer.convert_tokens_to_ids("<|vision_end|>")):])
    assert "document pages 1, 2, 3, 4, in that order" in tail_a and "first pages you see" in tail_a
    assert "1, 2, 3, 4" not in a.instructions and "pumps" not in b.instructions
    assert a.instructions == b.instructions


def test_v1_put_the_pages_first_and_shared_only_the_system_prompt(tokenizer) -> None:
    # What this layout replaces: with the images first, two requests part right after the system turn.
    a, b = _two_requests("v1")
    shared = _common(_ids(tokenizer, a), _ids(tokenizer, b))
    v2_shared = _common(*(_ids(tokenizer, r) for r in _two_requests("v2")))
    assert shared < 0.1 * v2_shared and not a.instructions


def test_v2_rewords_only_what_pointed_below_and_leaves_no_slot_open() -> None:
    v1, v2 = PROMPTS["v1"], PROMPTS["v2"]
    for text in (v2.markdown, v2.chunks):
        assert "$pages" not in text and " below" not in text and "after the pages" in text
        assert "the line right after the images says which document pages they are" in text
    assert v2.system == v1.system and v2.ending == v1.ending
    req = build_request([7], BatchContext(), "markdown", "v2", [b"x"], [(1, 1)], 0.1, 16)
    assert "$" not in req.instructions + req.user
    assert req.user.startswith("The attached images are document pages 7, in that order.")
    assert "<context>" in req.instructions and "end with the <context> line" in req.user


def test_every_chat_builder_writes_instructions_images_then_the_rest() -> None:
    a, _ = _two_requests("v2")
    prompt = qwen_chat_prompt(chat_messages(a))
    head, tail = prompt.split(VISION_BLOCK, 1)
    assert head.startswith("<|im_start|>system\n" + a.system + "<|im_end|>\n<|im_start|>user\n" + a.instructions)
    assert prompt.count(VISION_BLOCK) == 4 and tail.rstrip().endswith("<|im_start|>assistant")
    parts = build_payload(a, "m")["messages"][1]["content"]
    assert [p["type"] for p in parts] == ["text"] + ["image_url"] * 4 + ["text"]
    assert parts[0]["text"] == a.instructions and parts[-1]["text"] == a.user
    # A request without instructions (v1, the LLM planner) keeps its old shape: images, then its text.
    v1, _ = _two_requests("v1")
    assert [p["type"] for p in build_payload(v1, "m")["messages"][1]["content"]] == ["image_url"] * 4 + ["text"]


def test_the_engine_reports_the_tokens_its_prefix_cache_served() -> None:
    from types import SimpleNamespace

    from chunker.backends.vllm_requests import result_from_output

    done = SimpleNamespace(text="# A", token_ids=[1, 2], finish_reason="stop")
    out = SimpleNamespace(outputs=[done], prompt_token_ids=list(range(900)), num_cached_tokens=896)
    assert result_from_output(out, "m").cached_tokens == 896
    out.num_cached_tokens = None  # an engine without the number
    assert result_from_output(out, "m").cached_tokens == 0
