"""The ingest's progress line moves while work is under way: pages as each batch is converted (heard inside the
conversion, published by each conversion actor, summed by the driver), chunks as each commit reaches the store."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from chunker.config import MilvusConfig, load_config
from chunker.eval.samples import SAMPLE_FACTS
from chunker.types import ConvertedBatch
from jobs.progress import ConvertedPages, PageTally, Progress, run_key


def _segments(samples_dir: Path, segment_pages: int):
    from chunker.intake.inputs import InputFile
    from chunker.intake.prepare import prepare
    from chunker.intake.segments import plan_segments

    cfg = load_config("configs/local.yaml", [f"intake.segment_pages={segment_pages}", "intake.batch_pages=2"])
    manual = samples_dir / SAMPLE_FACTS.manual.file
    doc, pdf = prepare(InputFile(path=str(manual), source=manual.name), cfg.intake, samples_dir)
    assert pdf
    return cfg, plan_segments(doc, cfg.intake)


def test_each_batch_is_heard_as_it_is_converted_before_the_segment_is_done(samples_dir: Path) -> None:
    from chunker.convert.factory import make_converter
    from chunker.run.segment import convert_segment

    cfg, jobs = _segments(samples_dir, segment_pages=4)
    later = jobs[1]  # starts with an overlap batch, converted only for its context
    converter = make_converter(cfg)
    heard: list[tuple[int, bool, bool]] = []  # (batch, overlap only, the segment's conversion finished by then)
    tally = PageTally("unit", interval_s=3600)

    async def run() -> list[ConvertedBatch]:
        task: asyncio.Future[list[ConvertedBatch]] | None = None

        def listen(batch: ConvertedBatch) -> None:
            heard.append((batch.batch_index, batch.context_only, task is None or task.done()))
            tally(batch)

        task = asyncio.ensure_future(convert_segment(converter, later, cfg, on_batch=listen))
        return await task

    batches = asyncio.run(run())
    assert len(batches) == 3
    # Each batch once, in order, each while its segment was still converting (not when it returned).
    assert heard == [(0, True, False), (1, False, False), (2, False, False)]
    assert tally.pages == later.page_end - later.page_start + 1  # the segment's own pages, the overlap left out

    def broken(_: ConvertedBatch) -> None:
        raise RuntimeError("a listener that fails")

    again = asyncio.run(convert_segment(converter, later, cfg, on_batch=broken))
    assert [b.markdown for b in again] == [b.markdown for b in batches]  # a failing listener costs the segment nothing


def test_chunks_count_when_a_commit_lands_not_when_the_document_closes(tmp_path: Path) -> None:
    from chunker.index.bulk import ChunkSink
    from chunker.index.store import ChunkStore
    from chunker.run.layout import RunStore
    from chunker.run.ledger import Ledger
    from chunker.run.rows import SegmentRow
    from chunker.run.verdict import SegmentFacts
    from chunker.run.writer import Writer
    from chunker.types import Chunk, DocumentRecord, SegmentJob

    def row(seg: int) -> SegmentRow:
        rec = DocumentRecord("long", "/docs/long.pdf", "long.pdf", 20)
        job = SegmentJob("long", "/docs/long.pdf", "long.pdf", 20, seg, 2, seg * 10 + 1, seg * 10 + 10, seg * 10 + 1, 4)
        cs = [Chunk(f"long:{seg}:{i}", "long", [f"long:{seg * 100 + i}"], f"text {seg} {i}", "", 1, 1, "text",
                    "deterministic", "h", source="long.pdf", source_uri="/docs/long.pdf") for i in range(3)]
        return SegmentRow(rec, job=job, facts=SegmentFacts(seg, 10), chunks=cs,
                          vectors=np.random.default_rng(seg).normal(size=(3, 8)).astype(np.float32))

    lines: list[str] = []
    progress = Progress(3600, export_metrics=False, emit=lines.append, total=1)
    store = ChunkStore(MilvusConfig(uri=str(tmp_path / "m.db")), 8)
    try:
        run = RunStore(str(tmp_path / "run"))
        writer = Writer(store, ChunkSink(store, store.cfg), Ledger(run.uri, "h", "m#chunks"), run, "h", 0.25,
                        commit_rows=1, commit_interval_s=3600, progress=progress)
        writer.add(row(0))
        writer.commit()
        assert (progress.chunks, sum(progress.docs.values())) == (3, 0)  # in the store, the document still open
        writer.add(row(1))
        writer.commit()
        assert (progress.chunks, dict(progress.docs)) == (6, {"ok": 1})
    finally:
        store.close()


@pytest.mark.ray
def test_actors_publish_pages_and_the_driver_line_shows_them_at_once(ray_local) -> None:
    import ray

    run = run_key("/runs/r1", "cfghash")

    @ray.remote(num_cpus=0)
    class Converter:  # the conversion actor's part: a tally fed batch by batch
        def __init__(self, run: str) -> None:
            self.tally = PageTally(run, interval_s=0.0)

        def converted(self, first: int, last: int, context_only: bool = False) -> None:
            self.tally(ConvertedBatch(doc_id="d", segment_index=0, batch_index=0, page_start=first, page_end=last,
                                      markdown="",
                                      context_only=context_only))

    a, b = Converter.remote(run), Converter.remote(run)
    ray.get([a.converted.remote(1, 4), b.converted.remote(65, 68), b.converted.remote(63, 64, True)])
    lines: list[str] = []
    reader = ConvertedPages(run)
    with Progress(3600, export_metrics=False, emit=lines.append, total=2, converted=reader) as progress:
        progress.poll()
        assert "documents 0/2" in progress.line() and "pages 8 " in progress.line()  # no segment has reached the driver
        ray.get(a.converted.remote(5, 8))
        progress.poll()
        assert "pages 12 " in progress.line()
        assert ConvertedPages(run_key("/runs/other", "cfghash"))() == 0  # another run's tallies are apart
        progress.segment(8, 0)  # what reached the driver by the end: its own count is the final word
    assert "pages 8 " in lines[-1]
    assert reader() == 0  # the run's tallies are gone from the GCS
