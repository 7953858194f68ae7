"""Where a run's time goes: the driver's own steps, the seconds spent inside each stage's workers, and the pace at
which segments reach the driver (whole-run against steady rate).

Three kinds of figure, kept apart because they do not add up to one another:

* driver steps (``listing``, ``ray_init``, ``store_open``, ``load`` into Milvus, ``finish`` ...): wall seconds of
  the driver's thread, in order; the pipeline runs in Ray while the driver waits for rows, so waiting is not a step.
  Beside each, the CPU seconds the driver's thread spent in it (``driver_steps_cpu_s``: waiting on a store costs
  wall time, not CPU) and those of the whole driver process, every thread (``driver_steps_process_cpu_s``: Ray
  Data's executor runs in a thread of its own while the driver thread consumes rows);
* worker seconds (``intake``, ``convert``, ``plan``, ``embed``, ``write``): summed over every segment from the
  timings each row carries (:mod:`chunker.run.rows`); stages overlap and run side by side, so their sum can exceed
  the wall time, and a stage's share of it says where the CPU went;
* arrivals: when each segment reached the driver. The first one ends the start-up (Ray, actors, model loads, the
  first conversion); the steady rate is the pace between 10 % and 90 % of the pages, start-up and tail excluded.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

WORKER_STAGES = ("intake", "convert", "plan", "embed", "write")


@dataclass
class RunTiming:
    t0: float = field(default_factory=time.perf_counter)
    steps: dict[str, float] = field(default_factory=dict)
    steps_cpu: dict[str, float] = field(default_factory=dict)  # the driver thread's CPU seconds per step
    steps_process_cpu: dict[str, float] = field(default_factory=dict)  # the driver process's (every thread)
    workers: dict[str, float] = field(default_factory=lambda: dict.fromkeys(WORKER_STAGES, 0.0))
    arrivals: list[tuple[float, int]] = field(default_factory=list)  # (seconds since t0, pages of the segment)
    # (process CPU s, driver-thread CPU s) at the first and at the latest arrival: the driver's CPU while rows flow,
    # start-up (Ray Data starting its actors) and the last commit left out
    cpu_first: tuple[float, float] | None = None
    cpu_last: tuple[float, float] | None = None

    def now(self) -> float:
        return time.perf_counter() - self.t0

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        """Adds the wall time of the block to driver step ``name`` (a step may run several times)."""
        t, c, pc = time.perf_counter(), time.thread_time(), time.process_time()
        try:
            yield
        finally:
            self.steps[name] = self.steps.get(name, 0.0) + time.perf_counter() - t
            self.steps_cpu[name] = self.steps_cpu.get(name, 0.0) + time.thread_time() - c
            self.steps_process_cpu[name] = self.steps_process_cpu.get(name, 0.0) + time.process_time() - pc

    def segment(self, pages: int, worker_s: dict[str, float]) -> None:
        """A segment reached the driver, with the seconds each stage spent on it."""
        self.arrivals.append((self.now(), pages))
        self.cpu_last = (time.process_time(), time.thread_time())
        if self.cpu_first is None:
            self.cpu_first = self.cpu_last
        for k, v in worker_s.items():
            self.workers[k] = self.workers.get(k, 0.0) + v

    def report(self) -> dict[str, Any]:
        total = self.now()
        out: dict[str, Any] = {
            "whole_s": round(total, 2),
            # To 0.1 ms: rounded to 10 ms, the wall of a fast step (a few local ledger writes) read as none at all.
            "driver_steps_s": {k: round(v, 4) for k, v in self.steps.items()},
            "driver_steps_cpu_s": {k: round(v, 3) for k, v in self.steps_cpu.items()},
            "driver_steps_process_cpu_s": {k: round(v, 3) for k, v in self.steps_process_cpu.items()},
            "worker_s": {k: round(v, 2) for k, v in self.workers.items()},
        }
        pages = sum(p for _, p in self.arrivals)
        if self.arrivals:
            out["first_segment_s"] = round(self.arrivals[0][0], 2)
            out["last_segment_s"] = round(self.arrivals[-1][0], 2)
        if self.cpu_first is not None and self.cpu_last is not None and len(self.arrivals) > 1:
            # Between the first arrival and the last: the segments and pages after the first one.
            out["driver_cpu_window"] = {
                "segments": len(self.arrivals) - 1, "pages": pages - self.arrivals[0][1],
                "wall_s": round(self.arrivals[-1][0] - self.arrivals[0][0], 3),
                "process_cpu_s": round(self.cpu_last[0] - self.cpu_first[0], 3),
                "thread_cpu_s": round(self.cpu_last[1] - self.cpu_first[1], 3)}
        steady = steady_rate(self.arrivals)
        if steady is not None:
            out["steady_pages_per_s"] = steady
        out["whole_pages_per_s"] = round(pages / total, 3) if total else 0.0
        return out


def steady_rate(arrivals: list[tuple[float, int]], lo: float = 0.1, hi: float = 0.9,
                min_span_s: float = 1.0) -> float | None:
    """Pages per second between the arrival that brought the total past ``lo`` of all pages and the one that brought
    it past ``hi`` (the pages of the later one counted, not those of the earlier); None when that span is shorter
    than ``min_span_s`` (a handful of segments arriving together has no steady state)."""
    total = sum(p for _, p in arrivals)
    if total <= 0:
        return None
    seen, t_lo, t_hi, pages = 0, None, None, 0
    for t, p in arrivals:
        seen += p
        if t_lo is None:
            if seen >= lo * total:
                t_lo, base = t, seen
            continue
        if t_hi is None and seen >= hi * total:
            t_hi, pages = t, seen - base
            break
    if t_lo is None or t_hi is None or t_hi - t_lo < min_span_s:
        return None
    return round(pages / (t_hi - t_lo), 3)
