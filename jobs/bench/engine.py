"""Engine experiments of the benchmark: the real conversion code (intake -> segments -> VlmConverter chains) driven
against one or more model engines in this process.

Each "actor" is one engine (one GPU) with its own :class:`VlmConverter`, taking up to ``concurrency`` segment chains
at once from a shared queue, as Ray Data's ``ActorPoolStrategy(size, max_concurrent_calls_per_actor)`` feeds
``jobs.stages.ConvertStage``. Actors are concurrent asyncio engines in one process, not Ray actors: on a 2-core
machine, Ray actors would mostly measure process contention, while the simulated engines need almost no CPU.

Pages are rendered in one of two ways:

* ``full``: :class:`chunker.convert.render.RenderedDocument`, exactly what ``convert_segment`` does (1568 px JPEG);
* ``proxy``: a real pdfium render at a small size, reported to the engine as the size the full render would have,
  so the engine's visual-token load is exact while the host CPU stays out of the way of many engines;
* ``sizes``: no render at all (a fixed 8 px JPEG), the full render's size reported: for corpora of tens of
  thousands of pages, where only the engine's load matters (rendering is timed in the stages section).
"""

from __future__ import annotations

import asyncio
import io
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from chunker.backends.base import GenerationRequest, GenerationResult, ModelBackend
from chunker.config import Config, RenderConfig, config_hash
from chunker.convert.vlm import VlmConverter
from chunker.convert.factory import make_converter
from chunker.intake.inputs import InputFile
from chunker.intake.prepare import inspect
from chunker.intake.segments import plan_segments
from chunker.run.segment import convert_segment
from chunker.convert.render import PDFIUM_LOCK, render_scale
from chunker.types import ConvertedBatch, Problem, SegmentJob

RenderMode = Literal["full", "proxy", "sizes"]
Order = Literal["arrival", "longest"]


class ProxyPages:
    """:class:`chunker.convert.base.PageImages` that renders small but reports the full render's size.

    The converter renders on worker threads; pdfium is not thread-safe, so every call takes the process-wide lock
    the real renderer takes. ``side_px=0`` skips rendering (a fixed tiny JPEG): for corpora of many thousands of
    pages, where only the engine's token load matters and rendering is measured in the stages section.
    """

    mime = "image/jpeg"

    def __init__(self, path: str, cfg: RenderConfig, side_px: int = 192) -> None:
        import pypdfium2 as pdfium

        with PDFIUM_LOCK:
            self._pdf = pdfium.PdfDocument(path)
        self.cfg = cfg
        self.side_px = side_px
        self._blank = b""

    def size(self, page: int) -> tuple[int, int]:
        with PDFIUM_LOCK:
            w, h = self._pdf.get_page_size(page - 1)
        s = render_scale(w, h, self.cfg)
        return round(w * s), round(h * s)

    def image(self, page: int) -> bytes:
        from PIL import Image

        if self.side_px <= 0:
            if not self._blank:
                buf = io.BytesIO()
                Image.new("RGB", (8, 8), "white").save(buf, format="JPEG")
                self._blank = buf.getvalue()
            return self._blank
        with PDFIUM_LOCK:
            pg = self._pdf[page - 1]
            try:
                w, h = pg.get_size()
                img = pg.render(scale=self.side_px / max(w, h)).to_pil()
            finally:
                pg.close()
        buf = io.BytesIO()
        img.convert("RGB").save(buf, format="JPEG", quality=60)
        return buf.getvalue()

    def close(self) -> None:
        with PDFIUM_LOCK:
            self._pdf.close()


@dataclass
class Done:
    """One answered request: when (engine seconds since the run started), which document, pages, and token work."""

    t: float
    doc: str
    pages: int
    work_s: float  # engine-seconds of token work (0 when the backend has no spec)


class Recorder:
    """Wraps a backend to log each answered request, so steady-state rates come from completions, whatever the
    backend (simulated or real)."""

    def __init__(self, inner: ModelBackend, clock: Callable[[], float], log: list[Done]) -> None:
        self.inner, self.clock, self.log = inner, clock, log
        self.name = inner.name

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        res = await self.inner.generate(request)
        spec = getattr(self.inner, "spec", None)
        work = spec.work_seconds(request, res) if spec is not None else 0.0
        self.log.append(Done(self.clock(), request.request_id.split("/")[0], len(request.images), work))
        return res

    async def close(self) -> None:
        await self.inner.close()

    def __getattr__(self, name: str) -> Any:  # stats, spec, model: whatever the summary asks of the engine
        return getattr(self.inner, name)


@dataclass
class Actor:
    backend: ModelBackend
    converter: VlmConverter


@dataclass
class SegmentOutcome:
    job: SegmentJob
    batches: list[ConvertedBatch]
    start_s: float  # engine seconds since the run started
    end_s: float
    error: str = ""


@dataclass
class EngineRun:
    """What one run measured; ``*_s`` figures are in engine (simulated) seconds, ``wall_s`` in real seconds."""

    actors: int
    concurrency: int
    order: str
    documents: int
    pages: int  # pages owned by segments (overlap pages not counted)
    segments: int
    wall_s: float
    engine_s: float
    pages_per_s: float
    output_tokens_per_s: float
    capacity_pages_per_s: float  # work-based roofline of all engines (0 when the backend cannot say)
    efficiency: float  # whole run: pages/s over capacity, ramp-down included
    steady_efficiency: float  # while every engine had its full set of chains (queue not yet dry)
    mid80_efficiency: float  # over the middle 80 % of converted pages (10 % .. 90 % done)
    occupancy: float  # mean share of engine time doing token work
    mean_running_seqs: float
    cpu_s: float  # process CPU time during the run
    cpu_share: float  # cpu_s / wall_s: near 1.0 means the single event loop was the bottleneck
    drain_s: float  # engine seconds until the last segment was handed out
    fallback_pages: int
    failed_segments: int
    doc_times: dict[str, tuple[int, float]] = field(default_factory=dict)  # source -> (pages, engine seconds)
    doc_work: dict[str, float] = field(default_factory=dict)  # source -> engine-seconds of token work

    def row(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d.pop("doc_times")
        d.pop("doc_work")
        return d


def build_actors(cfg: Config, n: int, make_backend: Any, clock: Callable[[], float], log: list[Done]) -> list[Actor]:
    h = config_hash(cfg)
    actors = []
    for i in range(n):
        backend = Recorder(make_backend(i), clock, log)
        conv = make_converter(cfg, h, backend=backend)
        assert isinstance(conv, VlmConverter), "the engine benchmark needs a model backend, not pdf-text"
        actors.append(Actor(backend=backend, converter=conv))
    return actors


async def _convert(actor: Actor, job: SegmentJob, cfg: Config, render: RenderMode) -> list[ConvertedBatch]:
    if render == "full":
        out = await convert_segment(actor.converter, job, cfg)
        if isinstance(out, Problem):
            raise RuntimeError(out.message)  # counted as a failed segment by the caller
        return out
    pages = ProxyPages(job.source_uri, cfg.render, side_px=192 if render == "proxy" else 0)
    try:
        return await actor.converter.convert(job, pages)
    finally:
        pages.close()


def plan_jobs(cfg: Config, paths: list[str]) -> tuple[list[SegmentJob], dict[str, str]]:
    """Real intake on each file: content hash, page count, segments. Returns jobs and doc_id -> source."""
    jobs: list[SegmentJob] = []
    sources: dict[str, str] = {}
    for p in paths:
        doc = inspect(InputFile(path=p, source=p.rsplit("/", 1)[-1]), cfg.intake)
        if doc.status == "failed":
            raise RuntimeError(f"benchmark input {p} failed intake: {doc.error}")
        sources[doc.doc_id] = doc.source
        jobs.extend(plan_segments(doc, cfg.intake))
    return jobs, sources


def order_jobs(jobs: list[SegmentJob], order: Order) -> list[SegmentJob]:
    """``arrival``: as listed. ``longest``: longest chains first (pages including the overlap), ties by arrival.

    A run lasts at least as long as the last chain started plus its length; starting the long chains first lets the
    short ones fill the engine at the end instead of leaving one long chain alone in it.
    """
    if order == "arrival":
        return list(jobs)
    return sorted(jobs, key=lambda j: -(j.page_end - j.context_start + 1))


async def _drive(actors: list[Actor], jobs: list[SegmentJob], cfg: Config, concurrency: int, render: RenderMode,
                 clock: Callable[[], float]) -> tuple[list[SegmentOutcome], dict[str, float]]:
    queue: asyncio.Queue[SegmentJob] = asyncio.Queue()
    for j in jobs:
        queue.put_nowait(j)
    outcomes: list[SegmentOutcome] = []
    drain: dict[str, float] = {}

    async def worker(actor: Actor) -> None:
        while not queue.empty():
            job = queue.get_nowait()
            start = clock()
            if queue.empty() and not drain:
                # From here on the engines only finish what they hold: the ramp-down a finite corpus always has.
                drain["at"] = start
            try:
                batches = await _convert(actor, job, cfg, render)
                outcomes.append(SegmentOutcome(job, batches, start, clock()))
            except Exception as exc:  # noqa: BLE001 - one broken segment is counted, the run goes on
                outcomes.append(SegmentOutcome(job, [], start, clock(), error=f"{type(exc).__name__}: {exc}"))

    await asyncio.gather(*(worker(a) for a in actors for _ in range(concurrency)))
    return outcomes, drain


def run_engines(cfg: Config, paths: list[str], actors: int, concurrency: int, make_backend: Any,
                render: RenderMode = "proxy", time_scale: float = 1.0, order: Order = "arrival") -> EngineRun:
    """Convert every file in ``paths`` on ``actors`` engines; ``make_backend(i)`` builds engine i."""
    jobs, sources = plan_jobs(cfg, paths)
    log: list[Done] = []
    t0: list[float] = []

    def clock() -> float:
        return (time.perf_counter() - t0[0]) / time_scale if t0 else 0.0

    pool = build_actors(cfg, actors, make_backend, clock, log)

    async def go() -> tuple[list[SegmentOutcome], dict[str, float]]:
        t0.append(time.perf_counter())
        try:
            return await _drive(pool, order_jobs(jobs, order), cfg, concurrency, render, clock)
        finally:
            for a in pool:
                await a.backend.close()

    cpu0 = time.process_time()
    outcomes, drain = asyncio.run(go())
    wall = time.perf_counter() - t0[0]
    cpu = time.process_time() - cpu0
    return summarise(pool, outcomes, sources, wall, cpu, time_scale, concurrency, drain, log, order)


def window_rates(log: list[Done], drain_at: float, engine_s: float) -> tuple[float, float]:
    """(pages/s while the queue still held work, pages/s over the middle 80 % of converted pages); 0 when there
    is no such window. Pages here are every page the engines converted, overlap included, like the roofline's."""
    done = sorted(log, key=lambda d: d.t)
    total = sum(d.pages for d in done)
    steady = sum(d.pages for d in done if d.t <= drain_at) / drain_at if drain_at > 0.05 * engine_s else 0.0
    lo = hi = None
    acc = 0
    for d in done:
        acc += d.pages
        if lo is None and acc >= 0.1 * total:
            lo = (d.t, acc)
        if acc >= 0.9 * total:
            hi = (d.t, acc)
            break
    mid = (hi[1] - lo[1]) / (hi[0] - lo[0]) if lo and hi and hi[0] > lo[0] else 0.0
    return steady, mid


def summarise(pool: list[Actor], outcomes: list[SegmentOutcome], sources: dict[str, str], wall: float, cpu: float,
              time_scale: float, concurrency: int, drain: dict[str, float], log: list[Done],
              order: str) -> EngineRun:
    engine_s = wall / time_scale
    pages = sum(o.job.page_end - o.job.page_start + 1 for o in outcomes if not o.error)
    out_tokens = sum(b.output_tokens for o in outcomes for b in o.batches)
    occupancy, running = [], []
    for a in pool:
        st = getattr(a.backend, "stats", None)
        if st is None:
            continue
        occupancy.append(st.busy_seconds / engine_s if engine_s else 0.0)
        running.append(st.seq_seconds / engine_s if engine_s else 0.0)
    # Roofline: every engine busy all the time on exactly the token work this corpus needed (overlap re-conversion
    # and retries count as work, so they lower efficiency as they should).
    work = sum(d.work_s for d in log)
    all_pages = sum(d.pages for d in log)
    capacity = len(pool) * pages / work if work else 0.0
    raw_capacity = len(pool) * all_pages / work if work else 0.0  # same roofline, counting every converted page
    rate = pages / engine_s if engine_s else 0.0
    steady, mid = window_rates(log, drain.get("at", 0.0), engine_s)
    spans: dict[str, list[float]] = defaultdict(list)
    doc_pages: dict[str, int] = defaultdict(int)
    doc_work: dict[str, float] = defaultdict(float)
    for o in outcomes:
        spans[o.job.doc_id] += [o.start_s, o.end_s]
        doc_pages[o.job.doc_id] += o.job.page_end - o.job.page_start + 1
    for d in log:
        doc_work[d.doc] += d.work_s

    def eff(x: float, cap: float) -> float:
        return round(x / cap, 4) if cap else 0.0

    return EngineRun(
        actors=len(pool), concurrency=concurrency, order=order, documents=len(sources), pages=pages,
        segments=len(outcomes), wall_s=round(wall, 2), engine_s=round(engine_s, 2), pages_per_s=round(rate, 3),
        output_tokens_per_s=round(out_tokens / engine_s, 1) if engine_s else 0.0,
        capacity_pages_per_s=round(capacity, 3), efficiency=eff(rate, capacity),
        steady_efficiency=eff(steady, raw_capacity), mid80_efficiency=eff(mid, raw_capacity),
        occupancy=round(sum(occupancy) / len(occupancy), 4) if occupancy else 0.0,
        mean_running_seqs=round(sum(running) / len(running), 2) if running else 0.0,
        cpu_s=round(cpu, 2), cpu_share=round(cpu / wall, 3) if wall else 0.0, drain_s=round(drain.get("at", 0.0), 2),
        fallback_pages=sum(len(b.fallback_pages) for o in outcomes for b in o.batches if not b.context_only),
        failed_segments=sum(1 for o in outcomes if o.error),
        doc_times={sources[d]: (doc_pages[d], round(max(s) - min(s), 2)) for d, s in spans.items()},
        doc_work={sources[d]: round(w, 2) for d, w in doc_work.items() if d in sources},
    )
