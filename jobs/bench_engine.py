"""Engine experiments of the benchmark: the real conversion code (intake -> segments -> VlmConverter chains) driven
against one or more model engines in this process.

Each "actor" is one engine (one GPU) with its own :class:`VlmConverter`, taking up to ``concurrency`` segment chains
at once from a shared queue, as Ray Data's ``ActorPoolStrategy(size, max_concurrent_calls_per_actor)`` feeds
``jobs.stages.ConvertStage``. Actors are concurrent asyncio engines in one process, not Ray actors: on a 2-core
machine, Ray actors would mostly measure process contention, while the simulated engines need almost no CPU.

Pages are rendered in one of two ways:

* ``full``: :class:`chunker.render.RenderedDocument`, exactly what ``convert_segment`` does (1568 px JPEG);
* ``proxy``: a real pdfium render at a small size, reported to the engine as the size the full render would have,
  so the engine's visual-token load is exact while the host CPU stays out of the way of many engines.
"""

from __future__ import annotations

import asyncio
import io
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Literal

from chunker.backends.base import ModelBackend
from chunker.config import Config, RenderConfig, config_hash
from chunker.convert.vlm import VlmConverter
from chunker.intake import InputFile, inspect, plan_segments
from chunker.pipeline import convert_segment, make_converter
from chunker.render import PDFIUM_LOCK, render_scale
from chunker.types import ConvertedBatch, SegmentJob

RenderMode = Literal["full", "proxy"]


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
    documents: int
    pages: int  # pages owned by segments (overlap pages not counted)
    segments: int
    wall_s: float
    engine_s: float
    pages_per_s: float
    output_tokens_per_s: float
    capacity_pages_per_s: float  # work-based roofline of all engines (0 when the backend cannot say)
    efficiency: float
    occupancy: float  # mean share of engine time doing token work
    mean_running_seqs: float
    cpu_s: float  # process CPU time during the run
    cpu_share: float  # cpu_s / wall_s: near 1.0 means the single event loop was the bottleneck
    steady_efficiency: float  # useful engine occupancy until the queue ran dry (before the last chains' tail)
    drain_s: float  # engine seconds until the last segment was handed out
    fallback_pages: int
    failed_segments: int
    doc_times: dict[str, tuple[int, float]] = field(default_factory=dict)  # source -> (pages, engine seconds)

    def row(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d.pop("doc_times")
        return d


def build_actors(cfg: Config, n: int, make_backend: Any) -> list[Actor]:
    h = config_hash(cfg)
    actors = []
    for i in range(n):
        backend = make_backend(i)
        conv = make_converter(cfg, h, backend=backend)
        assert isinstance(conv, VlmConverter), "the engine benchmark needs a model backend, not pdf-text"
        actors.append(Actor(backend=backend, converter=conv))
    return actors


async def _convert(actor: Actor, job: SegmentJob, cfg: Config, render: RenderMode) -> list[ConvertedBatch]:
    if render == "full":
        return await convert_segment(actor.converter, job, cfg)
    pages = ProxyPages(job.source_uri, cfg.render)
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


async def _drive(actors: list[Actor], jobs: list[SegmentJob], cfg: Config, concurrency: int, render: RenderMode,
                 time_scale: float) -> tuple[list[SegmentOutcome], float, dict[str, float]]:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[SegmentJob] = asyncio.Queue()
    for j in jobs:
        queue.put_nowait(j)
    outcomes: list[SegmentOutcome] = []
    drain: dict[str, float] = {}
    t0 = loop.time()

    def clock() -> float:
        return (loop.time() - t0) / time_scale

    async def worker(actor: Actor) -> None:
        while not queue.empty():
            job = queue.get_nowait()
            start = clock()
            if queue.empty() and not drain:
                # From here on the engines only finish what they hold: the ramp-down a finite corpus always has.
                drain.update(at=start, busy=sum(getattr(getattr(a.backend, "stats", None), "busy_seconds", 0.0)
                                                for a in actors))
            try:
                batches = await _convert(actor, job, cfg, render)
                outcomes.append(SegmentOutcome(job, batches, start, clock()))
            except Exception as exc:  # noqa: BLE001 - one broken segment is counted, the run goes on
                outcomes.append(SegmentOutcome(job, [], start, clock(), error=f"{type(exc).__name__}: {exc}"))

    await asyncio.gather(*(worker(a) for a in actors for _ in range(concurrency)))
    return outcomes, loop.time() - t0, drain


def run_engines(cfg: Config, paths: list[str], actors: int, concurrency: int, make_backend: Any,
                render: RenderMode = "proxy", time_scale: float = 1.0) -> EngineRun:
    """Convert every file in ``paths`` on ``actors`` engines; ``make_backend(i)`` builds engine i."""
    jobs, sources = plan_jobs(cfg, paths)
    pool = build_actors(cfg, actors, make_backend)

    async def go() -> tuple[list[SegmentOutcome], float, dict[str, float]]:
        try:
            return await _drive(pool, jobs, cfg, concurrency, render, time_scale)
        finally:
            for a in pool:
                await a.backend.close()

    cpu0 = time.process_time()
    outcomes, wall, drain = asyncio.run(go())
    cpu = time.process_time() - cpu0
    return summarise(pool, outcomes, sources, wall, cpu, time_scale, concurrency, drain)


def summarise(pool: list[Actor], outcomes: list[SegmentOutcome], sources: dict[str, str], wall: float, cpu: float,
              time_scale: float, concurrency: int, drain: dict[str, float]) -> EngineRun:
    engine_s = wall / time_scale
    pages = sum(o.job.page_end - o.job.page_start + 1 for o in outcomes if not o.error)
    out_tokens = sum(b.output_tokens for o in outcomes for b in o.batches)
    work = 0.0
    occupancy, running = [], []
    for a in pool:
        st = getattr(a.backend, "stats", None)
        spec = getattr(a.backend, "spec", None)
        if st is None or spec is None:
            continue
        work += st.prefill_tokens / spec.prefill_tokens_per_s + st.output_tokens / spec.decode_tokens_per_s
        occupancy.append(st.busy_seconds / engine_s if engine_s else 0.0)
        running.append(st.seq_seconds / engine_s if engine_s else 0.0)
    # Roofline: every engine busy all the time on exactly the token work this corpus needed (overlap re-conversion
    # and retries count as work, so they lower efficiency as they should).
    capacity = len(pool) * pages / work if work else 0.0
    rate = pages / engine_s if engine_s else 0.0
    overlap = sum(b.page_end - b.page_start + 1 for o in outcomes for b in o.batches if b.context_only)
    useful = pages / (pages + overlap) if pages else 0.0
    drain_at = drain.get("at", 0.0)
    steady = useful * drain.get("busy", 0.0) / (len(pool) * drain_at) if drain_at > 0 else 0.0
    spans: dict[str, list[float]] = defaultdict(list)
    doc_pages: dict[str, int] = defaultdict(int)
    for o in outcomes:
        spans[o.job.doc_id] += [o.start_s, o.end_s]
        doc_pages[o.job.doc_id] += o.job.page_end - o.job.page_start + 1
    return EngineRun(
        actors=len(pool), concurrency=concurrency, documents=len(sources), pages=pages, segments=len(outcomes),
        wall_s=round(wall, 2), engine_s=round(engine_s, 2), pages_per_s=round(rate, 3),
        output_tokens_per_s=round(out_tokens / engine_s, 1) if engine_s else 0.0,
        capacity_pages_per_s=round(capacity, 3), efficiency=round(rate / capacity, 4) if capacity else 0.0,
        occupancy=round(sum(occupancy) / len(occupancy), 4) if occupancy else 0.0,
        mean_running_seqs=round(sum(running) / len(running), 2) if running else 0.0,
        cpu_s=round(cpu, 2), cpu_share=round(cpu / wall, 3) if wall else 0.0,
        steady_efficiency=round(steady, 4), drain_s=round(drain_at, 2),
        fallback_pages=sum(len(b.fallback_pages) for o in outcomes for b in o.batches if not b.context_only),
        failed_segments=sum(1 for o in outcomes if o.error),
        doc_times={sources[d]: (doc_pages[d], round(max(s) - min(s), 2)) for d, s in spans.items()},
    )
