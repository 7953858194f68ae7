"""Where a run's time goes (chunker.run.timing): the steady rate leaves start-up and tail out."""

from __future__ import annotations

from chunker.run.timing import RunTiming, steady_rate


def test_steady_rate_ignores_start_up_and_tail() -> None:
    # 30 s of start-up, then 10 pages every second for 50 s, then a slow tail.
    arrivals = [(30.0 + i, 10) for i in range(1, 51)] + [(100.0, 10), (120.0, 10)]
    assert steady_rate(arrivals) == 10.0
    whole = sum(p for _, p in arrivals) / 120.0
    assert whole < 5.0  # what the start-up and tail cost the whole-run figure
    assert steady_rate([(5.0, 10), (5.2, 10)]) is None  # everything at once: no steady state
    assert steady_rate([]) is None


def test_run_timing_sums_worker_seconds_and_driver_steps() -> None:
    t = RunTiming()
    with t.step("load"):
        pass
    with t.step("load"):
        pass
    t.segment(4, {"convert": 0.5, "embed": 1.0})
    t.segment(0, {"intake": 0.2})  # a failed document's row: no pages
    rep = t.report()
    assert set(rep["driver_steps_s"]) == {"load"}
    assert rep["worker_s"]["convert"] == 0.5 and rep["worker_s"]["embed"] == 1.0 and rep["worker_s"]["intake"] == 0.2
    assert rep["first_segment_s"] <= rep["last_segment_s"] <= rep["whole_s"]
