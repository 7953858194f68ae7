"""The conversion actor writes its Parquet part off the event loop that all of its chains share."""

from __future__ import annotations

import asyncio
import threading

from chunker.config import load_config
from chunker.intake.segments import plan_segments
from chunker.types import DocumentRecord


def test_the_batches_part_is_written_in_a_worker_thread(tmp_path):
    from fpdf import FPDF

    from chunker.run.rows import SegmentRow, batch_of, rows_of
    from jobs.stages import ConvertStage

    pdf = FPDF(format=(100, 100))
    pdf.set_font("Helvetica", size=8)
    for p in range(3):
        pdf.add_page()
        pdf.cell(0, 5, f"page {p + 1}")
    src = str(tmp_path / "d.pdf")
    pdf.output(src)
    cfg = load_config(None, ["converter.backend=scripted", "render.max_side_px=64"])
    stage = ConvertStage(cfg, "h", str(tmp_path / "run"))
    threads: list[bool] = []
    write = stage.store.write_segment

    def recording_write(*args, **kwargs):
        threads.append(threading.current_thread() is threading.main_thread())
        return write(*args, **kwargs)

    stage.store.write_segment = recording_write  # type: ignore[method-assign]
    doc = DocumentRecord("d0", src, "d.pdf", 3)
    rows = [SegmentRow(doc, job=job, pdf_uri=src) for job in plan_segments(doc, cfg.intake)]
    out = rows_of(asyncio.run(stage(batch_of(rows))))  # asyncio.run: the event loop runs in the main thread
    assert out[0].active and out[0].batches
    assert threads == [False], "the Parquet write ran on the event loop thread, stalling every chain of the actor"
    assert len(list((tmp_path / "run" / "batches").glob("*.parquet"))) == 1
