"""Prompts, the context trailer and the output checks."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chunker.convert.trailer import check_output, split_trailer, strip_fence
from chunker.convert.prompts import PROMPT_VERSION, PROMPTS, build_request, clip_summary, get_prompts, render_context
from chunker.types import BatchContext

GOOD_TRAILER = '<context>{"summary": "A manual.", "heading_path": ["Guide", "Setup"], "open_table": ""}</context>'


def test_current_version_is_registered_and_unknown_version_names_the_known_ones() -> None:
    assert PROMPT_VERSION in PROMPTS
    with pytest.raises(KeyError, match="known: v1"):
        get_prompts("v999")


@pytest.mark.parametrize("mode", ["markdown", "chunks"])
def test_request_carries_real_page_numbers_images_and_parameters(mode: str) -> None:
    req = build_request([7, 8, 9], BatchContext(), mode, "v1", [b"a", b"b", b"c"], [(10, 20)] * 3, 0.3, 512,
                        mime="image/png", request_id="r1")
    assert "7, 8, 9" in req.user
    assert "<!-- page N -->" in req.user
    assert "<context>" in req.user and "open_table" in req.user
    assert "first pages you see" in req.user  # no context yet
    assert req.images == [b"a", b"b", b"c"] and req.image_sizes == [(10, 20)] * 3
    assert (req.temperature, req.max_tokens, req.image_mime, req.request_id) == (0.3, 512, "image/png", "r1")
    assert "$" not in req.user.replace("$10", "")  # every template slot filled


def test_mode_specific_rules() -> None:
    md = build_request([1], BatchContext(), "markdown", "v1", [b""], [(1, 1)], 0.1, 16).user
    ch = build_request([1], BatchContext(), "chunks", "v1", [b""], [(1, 1)], 0.1, 16).user
    assert "<!-- table -->" in md and "<!-- table continued -->" in md and "[CONTINUES]" not in md
    assert "[CONTINUES]" in ch and "[HEAD]" in ch and "Partial" in ch
    with pytest.raises(ValueError, match="images for"):
        build_request([1, 2], BatchContext(), "markdown", "v1", [b""], [(1, 1)], 0.1, 16)


def test_context_block_is_bounded_and_complete() -> None:
    ctx = BatchContext(summary="word " * 500, tail="line\n" * 1000 + "LAST LINE", heading_path=["A", "B", "C"],
                       table_header="Plan | Price")
    block = render_context(ctx, tail_chars=200, summary_chars=100)
    assert "A > B > C" in block and "Plan | Price" in block and "LAST LINE" in block
    assert len(block) < 200 + 100 + 300
    summary_line = next(ln for ln in block.splitlines() if ln.startswith("Summary so far: "))
    assert len(summary_line) - len("Summary so far: ") <= 100


@given(st.text(max_size=400), st.integers(min_value=0, max_value=200))
def test_clip_summary_never_exceeds_limit(text: str, limit: int) -> None:
    assert len(clip_summary(text, limit)) <= limit


def test_trailer_good_and_body_split() -> None:
    s = split_trailer("<!-- page 1 -->\n# Guide\n\nHello.\n" + GOOD_TRAILER)
    assert s.trailer is not None and s.problem == ""
    assert s.trailer.summary == "A manual." and s.trailer.heading_path == ["Guide", "Setup"]
    assert s.body.endswith("Hello.")


@pytest.mark.parametrize(
    "tail, ok",
    [
        (GOOD_TRAILER + "\nI hope this helps!", True),  # prose after the closing tag
        ('<context>{"summary": "x", "heading_path": ["a"],}</context>', True),  # trailing comma
        ('<context>{"summary": "x", "heading_path": "A > B"}', True),  # no closing tag, path as one string
        ('<context>\n```json\n{"summary": "x"}\n```\n</context>', True),  # fenced JSON
        ('<context>{"summary": "x", "heading_path": ["a"]} trailing junk }</context>', True),
        ('<context>{"summary": "cut off', False),  # truncated JSON
        ("<context>summary: plain words</context>", False),
        ('<context>["not", "an", "object"]</context>', False),
        ("", False),  # missing entirely
    ],
)
def test_trailer_is_parsed_leniently_but_honestly(tail: str, ok: bool) -> None:
    s = split_trailer("Some text.\n" + tail)
    assert (s.trailer is not None) is ok
    if not ok:
        assert "trailer" in s.problem


def test_trailer_path_string_is_split_and_last_context_wins() -> None:
    quoted = '<context>{"summary": "quoted in the page"}</context>'
    s = split_trailer(f"Text {quoted}\n" + '<context>{"summary": "real", "heading_path": "A > B"}</context>')
    assert s.trailer is not None and s.trailer.summary == "real" and s.trailer.heading_path == ["A", "B"]


def test_fence_around_whole_answer_is_removed() -> None:
    assert strip_fence("```markdown\n# T\n\ntext\n```") == "# T\n\ntext"
    assert strip_fence("no fence") == "no fence"


def test_check_output_problems() -> None:
    good = "<!-- page 3 -->\nText.\n" + GOOD_TRAILER
    assert check_output(good, "stop", "markdown", [3, 4]) == []
    assert any("truncated" in p for p in check_output(good, "length", "markdown", [3]))
    assert check_output("  \n", "stop", "markdown", [3]) == ["empty output"]
    assert any("trailer" in p for p in check_output("<!-- page 3 -->\nText.", "stop", "markdown", [3]))
    assert any("outside the batch" in p for p in check_output("<!-- page 9 -->\nT\n" + GOOD_TRAILER, "stop", "markdown", [3]))
    assert any("out of order" in p for p in
               check_output("<!-- page 4 -->\nT\n<!-- page 3 -->\nU\n" + GOOD_TRAILER, "stop", "markdown", [3, 4]))
    assert any("no content" in p for p in check_output(GOOD_TRAILER, "stop", "markdown", [3]))
    # chunks mode needs its markers; markdown text alone is not a chunk answer
    assert any("chunk markers" in p for p in check_output(good, "stop", "chunks", [3]))
    chunk = "[CONTINUES]False[/CONTINUES][HEAD]A > B > C[/HEAD]\nText.\n" + GOOD_TRAILER
    assert check_output(chunk, "stop", "chunks", [3]) == []


def test_trailer_json_round_trip_of_unicode() -> None:
    payload = {"summary": "Guide d'installation – 日本語", "heading_path": ["Überblick"], "open_table": "Größe | 値"}
    s = split_trailer("x\n<context>" + json.dumps(payload, ensure_ascii=False) + "</context>")
    assert s.trailer is not None and s.trailer.open_table == "Größe | 値" and s.trailer.heading_path == ["Überblick"]
