"""The vision-language converter: one segment's page batches through a multimodal model, strictly in order.

Batch i+1 is sent only once batch i is back, with the small explicit context batch i produced (summary, tail, heading
path, open table), so any actor can run any link of any chain and one actor can keep many chains in flight.

Per batch, a bounded ladder:

1. the whole batch, once per temperature of the ladder (``model.temperature`` first, then ``retry_temperatures``),
   while the answer is empty, malformed, lacks its trailer, or the request failed;
2. if ``split_pages_on_failure`` and the batch has several pages: one page at a time, each with a short ladder (the
   first and the last temperature) and its own output cap (``model.max_output_tokens_per_page``), contexts chained
   from page to page. A batch whose answer ran into the output cap (finish ``length``, or vLLM's repetition
   detection, which the backend reports as ``length``) goes here at once: a retry at another temperature with the
   same cap never makes a long answer shorter;
3. a page that still fails comes from the fallback (the PDF text layer), flagged and counted on the batch row.

The model gets ``converter.page_timeout_s`` per page of the batch for all of that (every attempt, single pages
included); past it, the batch's pages not yet converted come from the fallback, flagged, and the chain goes on with
its context. The segment-level timeout (``ray.document_timeout_s``) is only a last resort behind it.

``BackendUnavailable`` and ``EngineDead`` are never caught: the actor must die so that Ray restarts it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Protocol

from chunker.backends.base import BackendUnavailable, EngineDead, GenerationResult, ModelBackend
from chunker.backends.errors import BackendRequestError
from chunker.config import ConverterConfig
from chunker.convert.base import PageImages, batch_done
from chunker.convert.chunk_format import ChunkRecord, merge_chunks, parse_chunks, render_markdown
from chunker.convert.trailer import check_output, split_trailer
from chunker.contract import PAGE_MARKER, open_headings, page_marker, parse_markdown, seed_path
from chunker.convert.prompts import build_request, clip_summary
from chunker.types import BatchContext, ConvertedBatch, SegmentJob, page_ranges



class _OutOfTime(Exception):
    """The batch's model time (``converter.page_timeout_s`` x its pages) ran out."""


class PageFallback(Protocol):
    """What a page falls back to when the model keeps failing (the pdf-text converter)."""

    def markdown_for_pages(self, source_uri: str, pages: list[int]) -> str: ...


@dataclass
class _Tally:
    """Everything spent and everything that went wrong while converting one batch."""

    attempts: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    finish_reason: str = ""
    model: str = ""
    errors: list[str] = field(default_factory=list)
    fallback_pages: list[int] = field(default_factory=list)
    lost_pages: list[int] = field(default_factory=list)  # the fallback could not read them either
    capped_at: float | None = None  # the temperature whose answer ran into the cap (the ladder stopped there)

    def account(self, res: GenerationResult) -> None:
        # Every attempt's tokens count: they were paid for, accepted or not.
        self.input_tokens += res.input_tokens
        self.output_tokens += res.output_tokens
        self.model = res.model or self.model


def ensure_page_marker(markdown: str, page: int) -> str:
    """Make the piece start with a page marker, so its first lines are not attributed to the previous page."""
    for line in markdown.splitlines():
        if line.strip():
            if PAGE_MARKER.match(line):
                return markdown.strip() + "\n"
            break
    return page_marker(page) + "\n" + markdown.strip() + "\n"


def _tail(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[-limit:]


def _heading_path_after(markdown: str, page: int, ctx: BatchContext) -> tuple[list[str], list[int]]:
    """Headings in force at the end of ``markdown`` and their levels, read from the headings it actually contains
    (a segment's first batch reads its overlap's open headings at these levels)."""
    path = open_headings(parse_markdown("_", [(markdown, page)]), seed_path(ctx.heading_path, ctx.heading_levels))
    return [h for _, h in path], [lv for lv, _ in path]


# One batch's rendered pages: encoded images and (width, height), keyed by page number.
Rendered = tuple[dict[int, bytes], dict[int, tuple[int, int]]]


class VlmConverter:
    """Converter protocol implementation over any :class:`ModelBackend`."""

    name = "vlm"

    def __init__(self, cfg: ConverterConfig, backend: ModelBackend, fallback: PageFallback, config_hash: str = "") -> None:
        self.cfg = cfg
        self.backend = backend
        self.fallback = fallback
        self.config_hash = config_hash
        temps: list[float] = []
        for t in [cfg.model.temperature, *cfg.retry_temperatures]:
            if t not in temps:
                temps.append(t)
        self.ladder = temps
        self.page_ladder = [temps[0]] if len(temps) == 1 else [temps[0], temps[-1]]

    def needs_images(self) -> bool:
        return True

    async def convert(self, job: SegmentJob, images: PageImages | None) -> list[ConvertedBatch]:
        if images is None:
            raise ValueError("VlmConverter needs rendered pages (needs_images() is True)")
        ctx = BatchContext()
        out: list[ConvertedBatch] = []
        ranges = job.batches()

        def render(i: int) -> asyncio.Task[Rendered]:
            # Rendering is CPU work: off the event loop, so the actor's other chains keep moving meanwhile.
            return asyncio.ensure_future(asyncio.to_thread(_render_batch, images, list(range(ranges[i][0],
                                                                                             ranges[i][1] + 1))))

        pending = render(0)
        try:
            for bi, (a, b) in enumerate(ranges):
                rendered = await pending
                # The next batch renders while this one is with the model: its pages are ready when it is its turn.
                pending = render(bi + 1) if bi + 1 < len(ranges) else None
                batch, ctx = await self._batch(job, bi, a, b, ctx, images, rendered)
                out.append(batch)
                batch_done(batch)
        finally:
            if pending is not None and not pending.done():
                pending.cancel()
        return out

    async def _batch(
        self, job: SegmentJob, bi: int, a: int, b: int, ctx: BatchContext, images: PageImages, rendered: Rendered
    ) -> tuple[ConvertedBatch, BatchContext]:
        pages = list(range(a, b + 1))
        # Rendered once per batch: retries and single-page splits reuse the same images.
        imgs, sizes = rendered
        tally = _Tally()
        split = len(pages) > 1 and self.cfg.split_pages_on_failure
        budget = self.cfg.page_timeout_s * len(pages) if self.cfg.page_timeout_s else None
        deadline = asyncio.get_running_loop().time() + budget if budget else None
        cap = self.cfg.model.max_output_tokens
        page_cap = min(self.cfg.model.max_output_tokens_per_page, cap)
        pieces: list[str] = []
        done: list[int] = []  # pages whose Markdown is in pieces, in order
        ctx_out = ctx
        try:
            # A one-page batch at the cap stops climbing, as a longer one goes to single pages: another temperature
            # with the same cap never makes a long answer shorter. It gets one more try, at the next temperature (a
            # repetition loop may break there) and the page cap, then the fallback; not the whole ladder at the cap.
            one_page = len(pages) == 1
            whole = await self._ladder(job, bi, pages, ctx, self.ladder, imgs, sizes, images.mime, tally,
                                       max_tokens=cap, deadline=deadline, split_on_length=split or one_page)
            rung = self.ladder.index(tally.capped_at) if tally.capped_at in self.ladder else len(self.ladder)
            later = self.ladder[rung + 1:rung + 2]
            if whole is None and one_page and later:
                whole = await self._ladder(job, bi, pages, ctx, later, imgs, sizes, images.mime, tally,
                                           max_tokens=page_cap, deadline=deadline)
            if whole is not None:
                pieces, ctx_out, done = [whole[0]], whole[1], pages
            elif split:
                for p in pages:
                    one = await self._ladder(job, bi, [p], ctx_out, self.page_ladder, imgs, sizes, images.mime, tally,
                                             max_tokens=page_cap, deadline=deadline)
                    if one is None:
                        one = await self._fallback(job, [p], ctx_out, tally)
                    pieces.append(one[0])
                    ctx_out = one[1]
                    done.append(p)
            else:
                markdown, ctx_out = await self._fallback(job, pages, ctx, tally)
                pieces, done = [markdown], pages
        except _OutOfTime:
            rest = [p for p in pages if p not in done]
            tally.errors.append(f"pages {page_ranges(rest)}: no usable model answer within {budget:g} s "
                                f"(converter.page_timeout_s x {len(pages)} pages)")
            markdown, ctx_out = await self._fallback(job, rest, ctx_out, tally)
            pieces.append(markdown)
        markdown = "\n".join(pieces)
        all_fallback = set(tally.fallback_pages) == set(pages)
        batch = ConvertedBatch(
            doc_id=job.doc_id,
            segment_index=job.segment_index,
            batch_index=bi,
            page_start=a,
            page_end=b,
            markdown=markdown,
            context_out=ctx_out.to_json(),
            model=tally.model or getattr(self.backend, "name", ""),
            prompt_version=self.cfg.prompt_version,
            input_tokens=tally.input_tokens,
            output_tokens=tally.output_tokens,
            finish_reason="fallback" if all_fallback else tally.finish_reason,
            attempts=tally.attempts,
            fallback=bool(tally.fallback_pages),
            fallback_pages=sorted(tally.fallback_pages),
            lost_pages=sorted(tally.lost_pages),
            context_only=a < job.page_start,
            error="; ".join(tally.errors),
            config_hash=self.config_hash,
        )
        return batch, ctx_out

    async def _ladder(
        self,
        job: SegmentJob,
        bi: int,
        pages: list[int],
        ctx: BatchContext,
        temps: list[float],
        imgs: dict[int, bytes],
        sizes: dict[int, tuple[int, int]],
        mime: str,
        tally: _Tally,
        *,
        max_tokens: int,
        deadline: float | None = None,
        split_on_length: bool = False,
    ) -> tuple[str, BatchContext] | None:
        """The accepted answer for ``pages``, or None once the temperatures are spent (or, with
        ``split_on_length``, at the first answer cut off by the cap). Raises :class:`_OutOfTime` at the deadline."""
        span = f"p{pages[0]}-{pages[-1]}" if len(pages) > 1 else f"p{pages[0]}"
        loop = asyncio.get_running_loop()
        for t in temps:
            if deadline is not None and loop.time() >= deadline:
                raise _OutOfTime
            tally.attempts += 1
            req = build_request(
                pages, ctx, self.cfg.mode, self.cfg.prompt_version,
                [imgs[p] for p in pages], [sizes[p] for p in pages],
                temperature=t, max_tokens=max_tokens, mime=mime,
                tail_chars=self.cfg.context_tail_chars, summary_chars=self.cfg.summary_max_chars,
                request_id=f"{job.doc_id}/s{job.segment_index}/b{bi}/{span}/a{tally.attempts}",
            )
            timer = asyncio.timeout_at(deadline)
            try:
                async with timer:
                    res = await self.backend.generate(req)
            except (BackendUnavailable, EngineDead):
                raise
            except BackendRequestError as exc:
                tally.errors.append(f"{span} t={t}: backend error: {exc}")
                if not exc.retryable:
                    break  # the same request cannot succeed (e.g. prompt too long): go straight to smaller pieces
                continue
            except Exception as exc:  # noqa: BLE001 - per-request trouble (timeout, 5xx) is what the ladder is for
                if timer.expired():
                    # Ours, not the backend's: the request was cancelled (vLLM aborts it), the batch is out of time.
                    tally.errors.append(f"{span} t={t}: cancelled at the batch deadline")
                    raise _OutOfTime from None
                tally.errors.append(f"{span} t={t}: backend error {type(exc).__name__}: {exc}")
                continue
            tally.account(res)
            problems = check_output(res.text, res.finish_reason, self.cfg.mode, pages)
            if res.finish_detail == "repetition":
                problems.insert(0, "repetition loop stopped by the engine")
            accepted = None if problems else self._accept(res.text, pages, ctx, problems)
            if accepted is not None:
                tally.finish_reason = res.finish_reason
                return accepted
            tally.errors.append(f"{span} t={t}: " + ", ".join(problems))
            if split_on_length and res.finish_reason == "length":
                tally.errors.append(f"{span}: output cap reached, " + ("one page at a time" if len(pages) > 1
                                                                         else "one more try at the page cap"))
                tally.capped_at = t
                break
        return None

    def _accept(
        self, text: str, pages: list[int], ctx: BatchContext, problems: list[str]
    ) -> tuple[str, BatchContext] | None:
        """Turn a checked answer into contract Markdown and the next context; None (with problems) if unusable."""
        split = split_trailer(text)
        assert split.trailer is not None  # check_output demanded it
        summary = clip_summary(split.trailer.summary, self.cfg.summary_max_chars) or ctx.summary
        if self.cfg.mode == "markdown":
            markdown = ensure_page_marker(split.body, pages[0])
            path, levels = _heading_path_after(markdown, pages[0], ctx)
            if not path:
                # Pages without a heading and no path handed in (a segment's overlap starts blind): the model's own
                # reading of the hierarchy is the best there is (levels not known).
                path, levels = split.trailer.heading_path, []
            tail = _tail(split.body, self.cfg.context_tail_chars)
            return markdown, BatchContext(summary, tail, path, split.trailer.open_table, levels)
        parsed = parse_chunks(split.body)
        if not parsed.chunks:
            problems.append("chunk markers present but every chunk is empty")
            return None
        previous = ChunkRecord("False", list(ctx.heading_path), ctx.tail) if (ctx.tail or ctx.heading_path) else None
        merged = merge_chunks(parsed.chunks, previous, self.cfg.partial_policy)
        rendered = render_markdown(merged, ctx.heading_path, ctx.table_header)
        markdown = ensure_page_marker(rendered.markdown, pages[0])
        last = rendered.last_chunk.content if rendered.last_chunk else ""
        tail = _tail(last, self.cfg.context_tail_chars)
        path = rendered.heading_path or split.trailer.heading_path
        return markdown, BatchContext(summary, tail, path, rendered.open_table)

    async def _fallback(
        self, job: SegmentJob, pages: list[int], ctx: BatchContext, tally: _Tally
    ) -> tuple[str, BatchContext]:
        """The last resort: the text layer, visibly flagged. A failing fallback leaves the pages empty and says so."""
        try:
            # In a worker thread; the pdf-text converter takes the pdfium lock per page itself and runs OCR outside
            # it, so fallbacks of concurrent chains do not queue behind one another's OCR.
            md = await asyncio.to_thread(self.fallback.markdown_for_pages, job.source_uri, pages)
        except (BackendUnavailable, EngineDead):
            raise
        except Exception as exc:  # noqa: BLE001 - recorded on the row as lost pages; the verdict makes it partial
            tally.errors.append(f"pages {page_ranges(pages)}: fallback failed: {type(exc).__name__}: {exc}")
            tally.lost_pages.extend(pages)
            md = ""
        tally.fallback_pages.extend(pages)
        tally.errors.append(f"pages {page_ranges(pages)}: model output unusable, text-layer fallback used")
        md = ensure_page_marker(md, pages[0])
        path, levels = _heading_path_after(md, pages[0], ctx)
        # The summary stays: the fallback writes none, and the old one still describes the document.
        return md, BatchContext(ctx.summary, _tail(md, self.cfg.context_tail_chars), path, "", levels)


def _render_batch(images: PageImages, pages: list[int]) -> Rendered:
    return {p: images.image(p) for p in pages}, {p: images.size(p) for p in pages}
