"""VlmConverter's retry and fallback ladder, its batch deadline, and what one batch hands the next."""

from __future__ import annotations

import asyncio

import pytest

from chunker.backends.base import BackendUnavailable, EngineDead, GenerationRequest, GenerationResult
from chunker.backends.errors import BackendRequestError
from chunker.config import ConverterConfig
from chunker.contract import parse_batches
from chunker.convert.vlm import VlmConverter
from chunker.types import BatchContext, ConvertedBatch, SegmentJob
from vlm_pages import FakeImages, TextFallback, document_status, page_answer, pages_of, trailer  # tests/ on sys.path


# ---- the ladder ---------------------------------------------------------------------------------------------------


class Scripted:
    """Answers from a list (str, GenerationResult or exception), one per call; keeps every request."""

    name = "scripted-list"

    def __init__(self, answers: list, repeat_last: bool = False) -> None:
        self.answers = list(answers)
        self.repeat_last = repeat_last
        self.requests: list[GenerationRequest] = []

    async def generate(self, req: GenerationRequest) -> GenerationResult:
        self.requests.append(req)
        await asyncio.sleep(0)
        i = len(self.requests) - 1
        ans = self.answers[min(i, len(self.answers) - 1)] if self.repeat_last else self.answers[i]
        if callable(ans):
            ans = ans(req)
        if isinstance(ans, BaseException):
            raise ans
        return ans if isinstance(ans, GenerationResult) else GenerationResult(ans, 10, 5, "stop", "m")

    async def close(self) -> None:
        pass


def one_job(pages: int = 4, batch_pages: int = 4) -> SegmentJob:
    return SegmentJob("d", "file:///d.pdf", "d.pdf", pages, 0, 1, 1, pages, 1, batch_pages)


def run(conv: VlmConverter, job: SegmentJob) -> list[ConvertedBatch]:
    return asyncio.run(conv.convert(job, FakeImages("d")))


def good(req: GenerationRequest) -> str:
    return page_answer(*pages_of(req))


def test_a_batch_cut_off_by_the_cap_goes_one_page_at_a_time_with_the_page_cap() -> None:
    # Another temperature with the same cap never makes a long answer shorter: split at once, each page capped.
    eng = Scripted([GenerationResult(good_text := page_answer("d", [1, 2])[:40], 10, 8192, "length", "m"), good, good])
    cfg = ConverterConfig(model={"max_output_tokens_per_page": 1500})
    [b] = run(VlmConverter(cfg, eng, TextFallback()), one_job(2))
    assert good_text and b.attempts == 3 and not b.fallback and "truncated" in b.error
    assert "output cap reached" in b.error
    assert [pages_of(r)[1] for r in eng.requests] == [[1, 2], [1], [2]]
    assert [r.temperature for r in eng.requests] == [0.1, 0.1, 0.1]
    assert [r.max_tokens for r in eng.requests] == [8192, 1500, 1500]
    assert b.input_tokens == 30 and b.finish_reason == "stop" and b.model == "m"
    assert "Text of d page 2." in b.markdown


def test_a_repetition_loop_splits_like_the_cap_and_says_so() -> None:
    loop = GenerationResult("row row row row", 10, 900, "length", "m", finish_detail="repetition")
    eng = Scripted([loop, good, good, good, good])
    [b] = run(VlmConverter(ConverterConfig(), eng, TextFallback()), one_job(4))
    assert [pages_of(r)[1] for r in eng.requests] == [[1, 2, 3, 4], [1], [2], [3], [4]]
    assert "repetition loop" in b.error and not b.fallback
    # The page cap defaults below the batch cap, and never exceeds it.
    assert [r.max_tokens for r in eng.requests] == [8192] + [4096] * 4
    eng = Scripted([loop, good, good])
    run(VlmConverter(ConverterConfig(model={"max_output_tokens": 64}), eng, TextFallback()), one_job(2))
    assert [r.max_tokens for r in eng.requests] == [64, 64, 64]


def test_a_single_page_cut_off_by_the_cap_climbs_its_ladder() -> None:
    # Nothing smaller to split into: another temperature may still break a loop, then the text layer.
    eng = Scripted([GenerationResult("x", 10, 8192, "length", "m"), good])
    [b] = run(VlmConverter(ConverterConfig(), eng, TextFallback()), one_job(1))
    assert [r.temperature for r in eng.requests] == [0.1, 0.3] and not b.fallback and b.attempts == 2


def test_malformed_three_times_then_pages_one_by_one() -> None:
    eng = Scripted(["no trailer here"] * 3 + [good] * 4)
    [b] = run(VlmConverter(ConverterConfig(), eng, TextFallback()), one_job(4))
    assert b.attempts == 7 and not b.fallback and b.error.count("missing context trailer") == 3
    single = eng.requests[3:]
    assert [pages_of(r)[1] for r in single] == [[1], [2], [3], [4]]
    # Contexts chain from page to page.
    for p, r in zip([1, 2, 3], single[1:]):
        assert f"d read up to page {p}" in r.user
    assert [ln for ln in b.markdown.splitlines() if ln.startswith("<!-- page")] == [f"<!-- page {p} -->" for p in range(1, 5)]
    assert BatchContext.from_json(b.context_out).summary == "d read up to page 4"


def test_always_garbage_falls_back_per_page_and_document_is_partial() -> None:
    eng = Scripted(["<!-- page 99 -->\ngarbage"], repeat_last=True)
    fb = TextFallback()
    [b] = run(VlmConverter(ConverterConfig(), eng, fb), one_job(4))
    assert b.fallback and b.fallback_pages == [1, 2, 3, 4] and b.finish_reason == "fallback"
    assert b.attempts == 3 + 4 * 2  # ladder on the batch, then a two-rung ladder per page
    assert fb.calls == [[1], [2], [3], [4]]
    assert "Fallback text of page 3." in b.markdown and "outside the batch" in b.error
    status, reason = document_status([b], 0.25)
    assert status == "partial" and "4 of 4 pages" in reason and "1-4" in reason


def test_without_split_the_whole_batch_falls_back_at_once() -> None:
    eng = Scripted([""], repeat_last=True)
    fb = TextFallback()
    [b] = run(VlmConverter(ConverterConfig(split_pages_on_failure=False), eng, fb), one_job(3))
    assert b.attempts == 3 and fb.calls == [[1, 2, 3]] and b.fallback_pages == [1, 2, 3]
    assert "empty output" in b.error


def test_some_pages_fall_back_within_the_allowed_share() -> None:
    # Batch 1 (pages 1-4) fails as a batch; page 3 alone keeps failing; batch 2 (pages 5-8) is fine.
    def answer(req: GenerationRequest) -> str:
        _, pages = pages_of(req)
        return "junk" if len(pages) == 4 and pages[0] == 1 or pages == [3] else good(req)

    eng = Scripted([answer], repeat_last=True)
    batches = run(VlmConverter(ConverterConfig(), eng, TextFallback()), one_job(12))
    assert [b.fallback_pages for b in batches] == [[3], [], []]
    status, reason = document_status(batches, 0.25)
    assert status == "ok" and "1 of 12 pages" in reason and "pages 3" in reason
    assert document_status(batches, 0.05)[0] == "partial"
    # The page after the fallback still gets the summary from page 2 (the fallback writes none).
    page4 = [r for r in eng.requests if pages_of(r)[1] == [4]][0]
    assert "d read up to page 2" in page4.user


def test_failed_fallback_makes_the_document_partial() -> None:
    eng = Scripted([""], repeat_last=True)
    [b] = run(VlmConverter(ConverterConfig(), eng, TextFallback(fail=True)), one_job(1))
    assert b.fallback_pages == [1] and "fallback failed" in b.error and "<!-- page 1 -->" in b.markdown
    assert document_status([b], 1.0)[0] == "partial"


def test_retryable_backend_errors_climb_the_ladder() -> None:
    eng = Scripted([TimeoutError("slow"), good])
    [b] = run(VlmConverter(ConverterConfig(), eng, TextFallback()), one_job(2))
    assert b.attempts == 2 and "TimeoutError" in b.error and not b.fallback


def test_non_retryable_request_error_skips_to_single_pages() -> None:
    eng = Scripted([BackendRequestError("prompt too long", status=400, retryable=False), good, good])
    [b] = run(VlmConverter(ConverterConfig(), eng, TextFallback()), one_job(2))
    assert b.attempts == 3 and [pages_of(r)[1] for r in eng.requests[1:]] == [[1], [2]] and not b.fallback


@pytest.mark.parametrize("exc", [EngineDead("CUDA error"), BackendUnavailable("no vllm")])
def test_fatal_backend_errors_propagate(exc: Exception) -> None:
    eng = Scripted(["junk", exc], repeat_last=False)
    with pytest.raises(type(exc)):
        run(VlmConverter(ConverterConfig(), eng, TextFallback()), one_job(4))


def test_needs_images() -> None:
    conv = VlmConverter(ConverterConfig(), Scripted([]), TextFallback())
    assert conv.needs_images()
    with pytest.raises(ValueError, match="needs rendered pages"):
        asyncio.run(conv.convert(one_job(1), None))


def test_chunks_mode_through_the_converter_continues_lists_and_tables_across_batches() -> None:
    head = "[CONTINUES]{0}[/CONTINUES][HEAD]Guide > Setup > {1}[/HEAD]\n"
    row = "| Plan | Price |\n| --- | --- |\n| {0} | {1} |\n\n"
    b1 = ("<!-- page 1 -->\n" + head.format("False", "Install") + "1. Unpack.\n2. Plug in.\n\n"
          + head.format("False", "Plans") + row.format("Basic", "$10") + trailer("setup guide"))
    b2 = ("<!-- page 2 -->\n" + head.format("False", "Plans") + row.format("Pro", "$20")
          + head.format("True", "Install (continued)") + "3. Switch on.\n\n" + trailer("setup guide, plans"))
    eng = Scripted([b1, b2])
    batches = run(VlmConverter(ConverterConfig(mode="chunks"), eng, TextFallback()), one_job(2, batch_pages=1))
    ctx1 = BatchContext.from_json(batches[0].context_out)
    assert ctx1.table_header == "Plan | Price" and ctx1.heading_path == ["Guide", "Setup", "Plans"]
    assert "Open table, column headers: Plan | Price" in eng.requests[1].user
    assert "<!-- table continued -->" in batches[1].markdown
    els = parse_batches("d", batches)
    rows = [e for e in els if e.kind == "table_row"]
    assert [r.text for r in rows] == ["Plan: Basic; Price: $10.", "Plan: Pro; Price: $20."]
    assert rows[0].group == rows[1].group
    assert all(b.error == "" and b.attempts == 1 for b in batches)


# ---- the batch deadline -------------------------------------------------------------------------------------------


class Hangs:
    """Answers well, except that requests for the pages in ``stuck`` never come back (until cancelled)."""

    name = "hangs"

    def __init__(self, stuck: set[int]) -> None:
        self.stuck = stuck
        self.requests: list[GenerationRequest] = []
        self.cancelled: list[list[int]] = []

    async def generate(self, req: GenerationRequest) -> GenerationResult:
        self.requests.append(req)
        _, pages = pages_of(req)
        if self.stuck & set(pages):
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                self.cancelled.append(pages)  # the engine hears of it (vLLM aborts the request)
                raise
        return GenerationResult(good(req), 10, 5, "stop", "m")

    async def close(self) -> None:
        pass


def test_a_batch_out_of_time_falls_back_alone_and_the_chain_goes_on() -> None:
    eng = Hangs(stuck={3})
    fb = TextFallback()
    cfg = ConverterConfig(page_timeout_s=0.05)
    batches = run(VlmConverter(cfg, eng, fb), one_job(8, batch_pages=2))
    # Batch p3-4 hung: its own pages come from the text layer, flagged; p1-2 and p5-8 are the model's.
    assert [b.fallback_pages for b in batches] == [[], [3, 4], [], []]
    assert fb.calls == [[3, 4]] and eng.cancelled == [[3, 4]]
    assert "pages 3-4: no usable model answer within 0.1 s" in batches[1].error
    assert "converter.page_timeout_s x 2 pages" in batches[1].error
    assert batches[1].finish_reason == "fallback" and not batches[2].fallback
    # The chain carries on from the fallback's context: the summary of p1-2 still reaches p5-6.
    p5 = [r for r in eng.requests if pages_of(r)[1] == [5, 6]][0]
    assert "d read up to page 2" in p5.user and "Fallback text of page 4." in p5.user
    status, reason = document_status(batches, 0.25)
    assert status == "ok" and "2 of 8 pages" in reason


def test_pages_converted_before_the_deadline_are_kept() -> None:
    # The batch is split (a malformed answer), page 1 converts, page 2 hangs: only pages 2-4 fall back.
    class Slow(Scripted):
        async def generate(self, req: GenerationRequest) -> GenerationResult:
            if len(self.requests) >= 2:
                self.requests.append(req)
                await asyncio.sleep(3600)
            return await super().generate(req)

    eng = Slow(["no trailer", good])
    fb = TextFallback()
    [b] = run(VlmConverter(ConverterConfig(retry_temperatures=[], page_timeout_s=0.02), eng, fb), one_job(4))
    assert b.fallback_pages == [2, 3, 4] and fb.calls == [[2, 3, 4]]
    assert "Text of d page 1." in b.markdown and "Fallback text of page 2." in b.markdown
    assert [ln for ln in b.markdown.splitlines() if ln.startswith("<!-- page")] == [f"<!-- page {p} -->" for p in range(1, 5)]


def test_markdown_mode_hands_on_the_open_headings_with_their_levels() -> None:
    """The next batch (and a segment after its overlap) is told the headings open at the end at the levels the
    model wrote them: "### Install" under "# Guide" is level 3, so the next page's "### Plans" is its sibling, not
    its child (read as levels 1, 2, ... the prompt said "Guide > Install > Plans")."""
    b1 = "<!-- page 1 -->\n# Guide\n\n### Install\n\nUnpack it.\n" + trailer("guide")
    b2 = "<!-- page 2 -->\n### Plans\n\nBasic costs $10.\n" + trailer("guide, plans")
    eng = Scripted([b1, b2])
    batches = run(VlmConverter(ConverterConfig(), eng, TextFallback()), one_job(2, batch_pages=1))
    ctx1, ctx2 = (BatchContext.from_json(b.context_out) for b in batches)
    assert (ctx1.heading_path, ctx1.heading_levels) == (["Guide", "Install"], [1, 3])
    assert (ctx2.heading_path, ctx2.heading_levels) == (["Guide", "Plans"], [1, 3])
    assert "Heading path: Guide > Install" in eng.requests[1].user
