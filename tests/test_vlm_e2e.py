"""The vision-language path through the real stage code: the conversion actor UDF driven directly with a scripted
engine at high concurrency, and the tiny Qwen2.5-VL through jobs.ingest on real pages."""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil

import pyarrow.parquet as pq
import pytest

from chunker.backends.base import GenerationRequest
from chunker.backends.scripted import ScriptedBackend
from chunker.config import load_config
from chunker.convert.vlm import VlmConverter
from chunker.intake.segments import plan_segments
from chunker.types import BatchContext, DocumentRecord


def _pages_in(req: GenerationRequest) -> list[int]:
    import re

    m = re.search(r"images are document pages ([\d, ]+)", req.user)
    return [int(p) for p in m.group(1).replace(" ", "").strip(",").split(",")] if m else []


class _Fallback:
    def markdown_for_pages(self, source_uri: str, pages: list[int]) -> str:
        return "\n".join(f"<!-- page {p} -->\nfallback {p}" for p in pages)


def test_convert_stage_keeps_every_chain_in_order_under_concurrency(tmp_path):
    from chunker.run.rows import SegmentRow, batch_of, rows_of
    from jobs.stages import ConvertStage, PlanStage

    rng = random.Random(7)
    seen: dict[str, list[tuple[list[int], str]]] = {}

    async def script(req: GenerationRequest, i: int) -> str:
        await asyncio.sleep(rng.random() * 0.002)
        doc = "/".join(req.request_id.split("/")[:2])  # one chain: document and segment
        pages = _pages_in(req)
        seen.setdefault(doc, []).append((pages, req.user))
        last = pages[-1] if pages else 0
        body = "\n".join(f"<!-- page {p} -->\n## Part {p}\n\nText of page {p}." for p in pages)
        ctx = json.dumps({"summary": f"upto {last}", "heading_path": [f"Part {last}"]})
        return f"{body}\n<context>{ctx}</context>"

    from fpdf import FPDF

    pdf = FPDF(format=(100, 100))
    pdf.set_font("Helvetica", size=8)
    for p in range(700):
        pdf.add_page()
        pdf.cell(0, 5, f"page {p + 1}")
    src = str(tmp_path / "long.pdf")
    pdf.output(src)
    # Tiny renders: this test is about ordering, not pixels.
    cfg = load_config(None, ["converter.backend=scripted", "intake.batch_pages=4", "intake.segment_pages=64",
                             "render.max_side_px=64"])
    stage = ConvertStage(cfg, "h", str(tmp_path / "run"))
    stage.converter = VlmConverter(cfg.converter, ScriptedBackend(script), fallback=_Fallback(), config_hash="h")
    sizes = [1, 2, 3, 5, 8, 13, 40, 90, 130, 700] + [rng.randint(1, 60) for _ in range(40)]
    rows = []
    for n, pages in enumerate(sizes):
        doc = DocumentRecord(f"d{n:02d}", src, f"d{n}.pdf", pages)
        for job in plan_segments(doc, cfg.intake):
            rows.append(SegmentRow(doc, job=job, pdf_uri=src))
    rng.shuffle(rows)  # arrival order must not matter

    async def drive() -> list[SegmentRow]:
        # Many one-row calls in flight at once, as the actor pool runs them.
        outs = await asyncio.gather(*(stage(batch_of([r])) for r in rows))
        return [rows_of(o)[0] for o in outs]

    out = asyncio.run(drive())
    assert all(r.active and r.batches for r in out), [r.facts for r in out if not r.active][:3]
    planner = PlanStage(cfg, "h", str(tmp_path / "run"))
    for r in out:
        job = r.job
        ranges = [(b.page_start, b.page_end) for b in r.batches]
        assert ranges == job.batches(), "batches come back in page order"
        # Every batch after the first was sent the context of the one before it.
        for prev, cur in zip(r.batches, r.batches[1:]):
            ctx = BatchContext.from_json(prev.context_out)
            assert ctx.summary == f"upto {prev.page_end}"
        planned = rows_of(asyncio.run(planner(batch_of([r]))))[0]
        assert planned.facts is not None and not planned.facts.failed
        pages = sorted({c.page_start for c in planned.chunks})
        assert pages == list(range(job.page_start, job.page_end + 1)), "every owned page lands in chunks once"
    for chain, calls in seen.items():
        firsts = [pages[0] for pages, _ in calls if pages]
        assert firsts == sorted(firsts), f"{chain}: a chain went out of order"
        # Each request after the first carries the summary its predecessor returned.
        for (prev, _), (_, user) in zip(calls, calls[1:]):
            assert f"upto {prev[-1]}" in user, f"{chain}: context of pages {prev} not handed on"
    assert len(list((tmp_path / "run" / "batches").glob("*.parquet"))) == len(rows)


@pytest.mark.ray
@pytest.mark.slow
def test_tiny_qwen_through_ingest_takes_the_fallback_path(tmp_path, samples_dir):
    import ray
    from tiny_qwen import build_tiny_qwen, tiny_qwen_overrides

    from jobs.ingest import run_ingest

    model = build_tiny_qwen(tmp_path / "tq")
    docs = tmp_path / "docs"
    docs.mkdir()
    shutil.copy(samples_dir / "travel-expense-policy.pdf", docs)
    shutil.copy(samples_dir / "controller-release-notes.pdf", docs)
    cfg = load_config("configs/local.yaml", tiny_qwen_overrides(model) + [
        f"milvus.uri={tmp_path / 'm.db'}", "ray.convert_actors=1", "ray.convert_concurrency=2",
        "converter.retry_temperatures=[0.1, 0.6]"])
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=4, include_dashboard=False, ignore_reinit_error=True, log_to_driver=False)
    try:
        s = run_ingest(cfg, str(docs), str(tmp_path / "run"))
    finally:
        ray.shutdown()
    assert s.documents == 2 and s.fallback_pages == s.pages == 2
    assert s.partial == 2, "noise from the model: every page fell back, above max_fallback_share"
    assert all("fell back" in p["reason"] for p in s.problems)
    batches = pq.read_table(tmp_path / "run" / "batches").to_pylist()
    assert all(b["fallback"] and b["attempts"] >= 2 and b["model"] for b in batches)
    assert s.chunks > 0 and s.collection_rows == s.chunks, "fallback text is still indexed"
