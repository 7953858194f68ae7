"""Conversion starts are counted per segment in the run folder, across processes; past the bound the segment is
quarantined."""

from __future__ import annotations

from chunker.run.attempts import start_attempt
from chunker.run.layout import ATTEMPTS, RunStore
from chunker.types import SegmentJob


def test_past_the_bound_a_segment_is_quarantined(tmp_path):
    store = RunStore(str(tmp_path / "run"))
    job = SegmentJob("d1", "/in/a.pdf", "a.pdf", 10, 0, 1, 1, 10, 1, 4)
    other = SegmentJob("d1", "/in/a.pdf", "a.pdf", 10, 1, 2, 11, 20, 11, 4)
    assert [start_attempt(store, job, 3) for _ in range(3)] == [None, None, None]
    p = start_attempt(store, job, 3)
    assert p is not None and p.code == "quarantined" and "4 times" in p.message
    assert start_attempt(store, other, 3) is None  # counted per segment
    store.clear(ATTEMPTS)  # a new run starts counting again
    assert start_attempt(store, job, 3) is None
