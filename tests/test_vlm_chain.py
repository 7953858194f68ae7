"""VlmConverter: ordered chains at high concurrency against a fake engine (the ladder: test_vlm_ladder.py)."""

from __future__ import annotations

import asyncio
import itertools
import random
import re
from collections import defaultdict
from dataclasses import dataclass

from chunker.backends.base import GenerationRequest, GenerationResult
from chunker.config import ConverterConfig
from chunker.contract import parse_batches
from chunker.convert.vlm import VlmConverter
from chunker.types import BatchContext, ConvertedBatch, SegmentJob
from vlm_pages import FakeImages, TextFallback, document_status, page_answer, pages_of  # tests/ is on sys.path under pytest


@dataclass
class Call:
    doc: str
    segment: int
    pages: list[int]
    user: str
    start: int
    end: int


class ChainEngine:
    """An async engine with seeded random latencies and bounded capacity (like continuous batching)."""

    name = "fake-engine"

    def __init__(self, seed: int, capacity: int = 48) -> None:
        self.rng = random.Random(seed)
        self.sem = asyncio.Semaphore(capacity)
        self.clock = itertools.count()
        self.calls: dict[tuple[str, int], list[Call]] = defaultdict(list)
        self.in_flight = 0
        self.max_in_flight = 0

    async def generate(self, req: GenerationRequest) -> GenerationResult:
        doc, pages = pages_of(req)
        segment = int(re.search(r"/s(\d+)/", req.request_id).group(1))  # type: ignore[union-attr]
        start = next(self.clock)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        async with self.sem:
            await asyncio.sleep(self.rng.uniform(0.0002, 0.003) * len(pages))
        self.in_flight -= 1
        self.calls[(doc, segment)].append(Call(doc, segment, pages, req.user, start, next(self.clock)))
        text = page_answer(doc, pages)
        return GenerationResult(text, input_tokens=100 * len(pages), output_tokens=len(text) // 4, model="fake-vl")

    async def close(self) -> None:
        pass



def segment_jobs(doc: str, n: int, segment_pages: int = 64, overlap: int = 2, batch_pages: int = 4) -> list[SegmentJob]:
    count = -(-n // segment_pages)
    jobs = []
    for s in range(count):
        start, end = s * segment_pages + 1, min((s + 1) * segment_pages, n)
        jobs.append(SegmentJob(doc, f"file:///{doc}.pdf", f"{doc}.pdf", n, s, count, start, end,
                               max(1, start - overlap) if s else start, batch_pages))
    return jobs


def doc_sizes(rng: random.Random, count: int = 50) -> list[int]:
    sizes = [1, 1, 700, 700]  # the extremes are always present
    while len(sizes) < count:
        sizes.append(min(700, max(1, int(rng.paretovariate(0.9) * 2))))  # heavy tail
    return sizes


def test_fifty_documents_convert_as_ordered_chains_without_starvation() -> None:
    rng = random.Random(7)
    sizes = doc_sizes(rng)
    docs = {f"doc{i:02d}": n for i, n in enumerate(sizes)}
    engine = ChainEngine(seed=11)
    conv = VlmConverter(ConverterConfig(backend="scripted"), engine, TextFallback())
    finished: list[str] = []
    results: dict[str, list[list[ConvertedBatch]]] = {}

    async def run_doc(doc: str, n: int) -> None:
        jobs = segment_jobs(doc, n)
        # Segments of one document convert in parallel; each is its own ordered chain.
        results[doc] = list(await asyncio.gather(*(conv.convert(j, FakeImages(doc)) for j in jobs)))
        finished.append(doc)

    async def main() -> None:
        # The largest documents are submitted first: small ones must still not wait behind them.
        order = sorted(docs, key=lambda d: -docs[d])
        await asyncio.gather(*(run_doc(d, docs[d]) for d in order))

    asyncio.run(main())

    assert sorted(finished) == sorted(docs)  # nothing starved or hung
    assert engine.max_in_flight >= 40  # many chains really were in flight at once
    pos = {d: i for i, d in enumerate(finished)}
    tiny = [d for d, n in docs.items() if n == 1]
    huge = [d for d, n in docs.items() if n == 700]
    assert max(pos[d] for d in tiny) < min(pos[d] for d in huge)

    for doc, n in docs.items():
        jobs = segment_jobs(doc, n)
        for job, batches in zip(jobs, results[doc]):
            calls = engine.calls[(doc, job.segment_index)]
            # Exactly the planned batches, in order, each sent only after the previous one came back.
            assert [(c.pages[0], c.pages[-1]) for c in calls] == job.batches()
            assert all(b.start > a.end for a, b in zip(calls, calls[1:]))
            assert [(b.page_start, b.page_end) for b in batches] == job.batches()
            assert [b.batch_index for b in batches] == list(range(len(batches)))
            # Batch i+1's request carries batch i's summary and heading path.
            for prev, call in zip(batches, calls[1:]):
                ctx = BatchContext.from_json(prev.context_out)
                assert ctx.summary == f"{doc} read up to page {prev.page_end}"
                assert f"Summary so far: {ctx.summary}" in call.user
                if ctx.heading_path:
                    assert "Heading path: " + " > ".join(ctx.heading_path) in call.user
            assert "first pages you see" in calls[0].user
            # The overlap primes the context and is flagged; owned batches are not.
            assert [b.context_only for b in batches] == [job.context_start < job.page_start and i == 0
                                                         for i in range(len(batches))]
            assert all(b.attempts == 1 and not b.fallback and b.error == "" for b in batches)
        # Assembled output: every page exactly once, in page order, across segments.
        owned = [b for seg in results[doc] for b in seg if not b.context_only]
        assert [p for b in owned for p in range(b.page_start, b.page_end + 1)] == list(range(1, n + 1))
        texts = []
        for job, batches in zip(jobs, results[doc]):
            seed = [BatchContext.from_json(b.context_out).heading_path for b in batches if b.context_only]
            els = parse_batches(doc, batches, job.segment_index, seed[-1] if seed else None)
            texts += [(e.text, e.page_start) for e in els if e.kind == "paragraph"]
        assert texts == [(f"Text of {doc} page {p}.", p) for p in range(1, n + 1)]
        status, reason = document_status([b for seg in results[doc] for b in seg], 0.25)
        assert (status, reason) == ("ok", "")
    # The first owned batch of a later segment is primed by the overlap (here: pages 63-64 before 65).
    big = results[huge[0]][1]
    assert big[0].context_only and (big[0].page_start, big[0].page_end) == (63, 64)
    assert f"{huge[0]} read up to page 64" in engine.calls[(huge[0], 1)][1].user
    assert BatchContext.from_json(big[0].context_out).heading_path == [huge[0], "Part 6"]


