"""Conversion starts are counted per segment in the run folder, across processes; a segment that keeps killing its
worker is quarantined once a death is known to be its own, and after two deaths segments run in suspect groups that
halve with every further death."""

from __future__ import annotations

import asyncio

from chunker.run.attempts import alone_deaths, prior_starts, quarantine, record_alone, record_finish, record_start
from chunker.run.suspects import SUSPECT_AFTER, SuspectGate, depth, suspect_group
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


def test_a_suspect_group_has_the_engine_to_itself_and_is_not_starved():
    gate = SuspectGate(serial_from=2)
    log: list[tuple[str, str]] = []
    running: set[str] = set()
    a, b = (1, 0), (1, 1)

    async def seg(name: str, group, delay: float) -> None:  # noqa: ANN001
        await asyncio.sleep(delay)
        async with gate.enter(group):
            running.add(name)
            log.append((name, ",".join(sorted(running))))
            await asyncio.sleep(0.02)
            running.discard(name)

    async def main() -> None:
        await asyncio.gather(*(seg(f"s{i}", None, 0.001 * i) for i in range(4)),
                             seg("a1", a, 0.005), seg("a2", a, 0.006), seg("b1", b, 0.007),
                             *(seg(f"late{i}", None, 0.01) for i in range(3)))

    asyncio.run(main())
    seen = dict(log)
    assert {seen["a1"], seen["a2"]} <= {"a1", "a1,a2", "a2"}, "a group runs together, nothing else beside it"
    assert seen["b1"] == "b1", "one group at a time"
    order = [n for n, _ in log]
    assert all(order.index(g) < order.index(f"late{i}") for g in ("a1", "b1") for i in range(3)), "not starved"


def test_a_deep_suspect_group_converts_one_segment_at_a_time():
    """Two segments of one group at the serial level never share the engine; at a shallower level they do."""
    gate = SuspectGate(serial_from=2)
    inside: list[int] = []

    async def seg(group) -> None:  # noqa: ANN001
        async with gate.enter(group):
            inside.append(gate.running)
            await asyncio.sleep(0.01)

    async def main(group) -> None:  # noqa: ANN001
        await asyncio.gather(seg(group), seg(group), seg(group))

    asyncio.run(main((1, 0)))
    assert max(inside) == 3, "a shallow group converts together"
    inside.clear()
    asyncio.run(main((2, 1)))
    assert inside == [1, 1, 1]
    assert gate.serial((2, 1)) and not gate.serial((1, 1)) and not gate.serial(None)


def test_an_alone_mark_counts_only_for_a_start_that_never_finished(tmp_path):
    store = RunStore(str(tmp_path))
    job = SegmentJob("d1", "/in/a.pdf", "a.pdf", 4, 0, 1, 1, 4, 1, 4)
    died = record_start(store, job)
    record_alone(store, died)
    finished = record_start(store, job)
    record_alone(store, finished)  # marked before it ran alone, and then it finished
    record_finish(store, finished)
    assert alone_deaths(store, job) == 1


def test_only_the_latest_deaths_alone_count_as_its_own(tmp_path):
    """A death alone, then deaths shared with a neighbour that kills every engine: the segment's latest deaths say
    nothing about it, and it is not quarantined at the bound (an innocent document whose engine died once under it
    had been, beside the poison); deaths alone after the shared ones count."""
    import os

    store = RunStore(str(tmp_path))
    job = SegmentJob("d1", "/in/a.pdf", "a.pdf", 4, 0, 1, 1, 4, 1, 4)

    def death(at: float, alone: bool) -> None:
        marker = record_start(store, job)
        os.utime(tmp_path / marker, (at, at))  # deaths come seconds apart (a worker is replaced between them)
        if alone:
            record_alone(store, marker)

    death(100.0, alone=True)
    for at in (110.0, 120.0, 130.0):
        death(at, alone=False)
    assert prior_starts(store, job) == 4 and alone_deaths(store, job) == 0
    assert quarantine(4, 4, alone_deaths(store, job), depth=2) is None
    death(140.0, alone=True)
    death(150.0, alone=True)
    assert alone_deaths(store, job) == 2
    assert "the last 2 with it alone" in quarantine(6, 4, alone_deaths(store, job), depth=2).message


def test_every_further_death_halves_the_poison_segments_group():
    """80 segments die together twice with one poison among them: their groups halve with each death of the
    poison's group, so it is alone after about log2(80) more deaths, not after 80 solo runs."""
    jobs = [SegmentJob(f"d{i}", f"/in/{i}.pdf", f"{i}.pdf", 64, 0, 1, 1, 64, 1, 4) for i in range(80)]
    assert suspect_group(jobs[0], SUSPECT_AFTER - 1) is None
    deaths = {j.doc_id: SUSPECT_AFTER for j in jobs}
    poison = jobs[17]
    extra = 0
    while True:
        mates = [j for j in jobs if suspect_group(j, deaths[j.doc_id]) == suspect_group(poison, deaths[poison.doc_id])]
        if len(mates) == 1:
            break
        for j in mates:  # the poison's group dies together
            deaths[j.doc_id] += 1
        extra += 1
        assert extra <= 20
    assert extra <= depth(80) + 3, extra
    cleared = [j for j in jobs if deaths[j.doc_id] == SUSPECT_AFTER]
    assert len(cleared) >= 35, "about half never died again: their group converted together at the first level"


def test_shared_deaths_quarantine_only_with_an_own_death_or_far_past_the_bound():
    assert quarantine(4, 4, alone=0, depth=7) is None, "four deaths shared with others say nothing about whose"
    assert quarantine(4, 4, alone=1, depth=7).code == "quarantined"
    assert quarantine(11, 4, alone=0, depth=7).code == "quarantined", "a worker killed outright still ends"
    assert quarantine(3, 4, alone=3, depth=7) is None
    assert "the last 1 with it alone" in quarantine(5, 4, alone=1, depth=7).message


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


def test_the_first_copy_to_ask_keeps_the_lead_when_start_times_tie(tmp_path):
    """File systems stamp modification times by a coarse clock tick: a copy that started alone and converts, and a
    second copy whose marker lands in the same tick (or, from another node, seems earlier), must not both convert."""
    import os

    from chunker.run.attempts import elect
    from chunker.run.layout import copy_key

    store = RunStore(str(tmp_path / "run"))
    a, b = _copy("/in/a/x.pdf"), _copy("/in/b/x.pdf")
    first = record_start(store, a)
    assert elect(store, a) == copy_key(a.source_uri), "alone, it leads"
    second = record_start(store, b)
    os.utime(store.path(first), (1000, 1000))
    os.utime(store.path(second), (999, 999))  # b's marker reads as the earlier one
    assert elect(store, b) == elect(store, a) == copy_key(a.source_uri), "the lead stays with the copy that took it"
    assert prior_starts(store, a) == prior_starts(store, b) == 1, "the lead file is not a start"


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
