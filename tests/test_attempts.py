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


# ------------------------------------------------------------------ copies of the same bytes


def _copy(uri: str, seg: int = 0) -> SegmentJob:
    # The same content (doc_id d1) at another path: another document, the same segment of the same bytes.
    return SegmentJob("d1", uri, uri.rsplit("/", 1)[-1], 10, seg, 1, 1, 10, 1, 4)


def test_concurrent_copies_never_count_each_others_starts(tmp_path):
    store = RunStore(str(tmp_path / "run"))
    a, b, c = _copy("/in/a/x.pdf"), _copy("/in/b/x.pdf"), _copy("/in/c/x.pdf")
    for job in (a, b, c):  # three copies in flight at once, none finished
        record_start(store, job)
    assert [prior_starts(store, j) for j in (a, b, c)] == [1, 1, 1], "each copy sees its own start only"
    record_start(store, a)
    assert (prior_starts(store, a), prior_starts(store, b)) == (2, 1)


def test_the_earliest_copy_converts_and_the_others_take_its_batches(tmp_path):
    import os

    from chunker.run.attempts import await_copy, copy_outcome, elect, record_failed
    from chunker.run.layout import BATCHES, copy_key
    from chunker.schemas import CONVERTED_BATCH, to_table
    from chunker.types import ConvertedBatch, Problem, Stage

    store = RunStore(str(tmp_path / "run"))
    a, b = _copy("/in/a/x.pdf"), _copy("/in/b/x.pdf")
    first = record_start(store, a)
    os.utime(store.path(first), (1000, 1000))  # a started first
    record_start(store, b)
    assert elect(store, a) == elect(store, b) == copy_key(a.source_uri), "both copies agree on the leader"
    leader = copy_key(a.source_uri)
    # A part left by an earlier run (older than the leader's start) is not this run's result.
    old = store.write_segment(BATCHES, "d1", 0, to_table([ConvertedBatch("d1", 0, 0, 1, 4, "old")], CONVERTED_BATCH))
    os.utime(old, (500, 500))
    assert copy_outcome(store, b, leader) is None
    assert asyncio.run(await_copy(store, b, leader, timeout_s=0.2)) is None, "no result in time: convert it yourself"
    store.write_segment(BATCHES, "d1", 0, to_table([ConvertedBatch("d1", 0, 0, 1, 4, "# new")], CONVERTED_BATCH))
    got = asyncio.run(await_copy(store, b, leader, timeout_s=5))
    assert [x.markdown for x in got] == ["# new"]
    # A leader whose conversion failed hands the waiting copies its problem; a failed start is not a death.
    c = _copy("/in/c/y.pdf", seg=1)
    marker = record_start(store, c)
    record_failed(store, c, Problem(Stage.CONVERT, "timeout", "conversion timed out after 5 s"), marker)
    out = copy_outcome(store, _copy("/in/d/y.pdf", seg=1), copy_key(c.source_uri))
    assert isinstance(out, Problem) and out.code == "timeout" and prior_starts(store, c) == 0
