"""Conversion starts are counted per segment in the run folder, across processes; a segment that keeps killing its
worker is quarantined, and after two deaths it runs alone so that only its own crash counts."""

from __future__ import annotations

import asyncio

from chunker.run.attempts import SOLO_AFTER, SoloGate, prior_starts, quarantine, record_finish, record_start
from chunker.run.layout import ATTEMPTS, RunStore
from chunker.types import SegmentJob


def test_starts_are_counted_per_segment_and_per_run(tmp_path):
    store = RunStore(str(tmp_path / "run"))
    job = SegmentJob("d1", "/in/a.pdf", "a.pdf", 10, 0, 1, 1, 10, 1, 4)
    other = SegmentJob("d1", "/in/a.pdf", "a.pdf", 10, 1, 2, 11, 20, 11, 4)
    for _ in range(3):
        record_start(store, job)
    record_start(store, other)
    assert (prior_starts(store, job), prior_starts(store, other)) == (3, 1)
    assert quarantine(3, 4) is None
    p = quarantine(4, 4)
    assert p is not None and p.code == "quarantined" and "4 times" in p.message
    store.clear(ATTEMPTS)  # a new run starts counting again
    assert prior_starts(store, job) == 0


def test_a_start_that_finished_is_not_a_death(tmp_path):
    """A segment whose conversion finished, but whose result died with its worker (a neighbour crashed the process
    before the call returned), runs again without being counted: only unfinished starts count."""
    store = RunStore(str(tmp_path / "run"))
    job = SegmentJob("d1", "/in/a.pdf", "a.pdf", 10, 0, 1, 1, 10, 1, 4)
    died = record_start(store, job)
    finished = [record_start(store, job) for _ in range(5)]
    for marker in finished:
        record_finish(store, marker)
    assert prior_starts(store, job) == 1 and quarantine(prior_starts(store, job), 2) is None
    record_finish(store, died)
    record_finish(store, died)  # twice (a retried call) is harmless
    assert prior_starts(store, job) == 0


def test_a_solo_segment_runs_alone_and_is_not_starved():
    gate = SoloGate()
    log: list[tuple[str, str]] = []
    running: set[str] = set()

    async def seg(name: str, solo: bool, delay: float) -> None:
        await asyncio.sleep(delay)
        async with gate.enter(solo):
            running.add(name)
            log.append((name, ",".join(sorted(running))))
            await asyncio.sleep(0.02)
            running.discard(name)

    async def main() -> None:
        await asyncio.gather(*(seg(f"s{i}", False, 0.001 * i) for i in range(4)), seg("solo", True, 0.005),
                             *(seg(f"late{i}", False, 0.01) for i in range(3)))

    asyncio.run(main())
    assert dict(log)["solo"] == "solo", "nothing else runs beside a solo segment"
    order = [n for n, _ in log]
    assert all(order.index("solo") < order.index(f"late{i}") for i in range(3)), "a waiting solo is not starved"
    assert SOLO_AFTER == 2
