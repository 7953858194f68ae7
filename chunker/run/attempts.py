"""How many times a segment's conversion has started in this run, across workers and nodes, what a death costs it,
and which copy of the same bytes converts it.

Ray retries the work of a dead or unreachable actor; the retry bound has to be unlimited (``ray.actor_max_task_retries``
-1), because Ray spends retries while a lost node is still being detected and a small bound ends the whole run. What
then stops a segment that kills its worker every time (a PDF that crashes pdfium, an image that takes the engine
down) is this count: every start leaves one marker in the run folder, and a start that never finished is a death.
A segment whose worker died ``ray.segment_max_attempts`` times fails alone, ``quarantined``, and the run goes on.

A death is charged once, to the segments that were running on the engine when it died, not to the others the
actor held: a conversion actor whose engine dies (:class:`chunker.backends.base.EngineDead`) marks the starts of its
segments that were not converting at that moment (waiting to run alone, fetching, waiting for a copy, writing their
result) as finished before it leaves (:func:`record_finish`), so their retries start from the count they had. A
worker killed outright (an out-of-memory kill, a lost node) cannot say who was running: then every start it held
counts. A segment whose worker died ``SUSPECT_AFTER`` times is a suspect: suspects run in groups that halve with
every further death (:mod:`chunker.run.suspects`), so the one that kills its engine is found in a few deaths while
its neighbours keep converting many at a time. A death with one segment alone on the engine is that segment's own
(:func:`record_alone`: written when the engine dies, or before a suspect that runs alone starts, so that an outright
kill is charged too; a start that then finishes voids it); only such a death as its latest, or a count far past the
bound, quarantines it.

The same bytes at two paths are two documents that share one content (``doc_id``): each copy has its own start
markers (named by :func:`chunker.run.layout.copy_key` of its source URI), so concurrent copies never count each
other's starts as deaths, and one copy converts while the others wait for its batches (:func:`elect`,
:func:`await_copy`). Markers of a run are cleared when the next run starts.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from chunker.run.layout import ATTEMPTS, BATCHES, RunStore, copy_key, segment_part
from chunker.types import ConvertedBatch, Problem, SegmentJob, Stage

DONE = ".done"  # beside a start marker: that start finished (or was not running when its engine died)
ALONE = ".alone"  # beside a start marker: it was the only segment converting on its engine (a death there is its own)
FAILED = ".failed"  # beside a start marker: that start finished with a problem (the JSON in it), for waiting copies
LEAD = "lead.claim"  # in a segment's folder: the copy that converts it in this run (a name with a dot: not a start)
COPY_POLL_S = (0.5, 5.0)  # first and longest pause between looks at the copy a segment waits for


def _folder(job: SegmentJob) -> str:
    return f"{ATTEMPTS}/{segment_part(job.doc_id, job.segment_index)}"


@dataclass(frozen=True)
class _Start:
    copy: str
    name: str  # the marker's file name
    mtime: float
    ended: bool  # a .done or .failed beside it


def _starts(entries: list[tuple[str, float]]) -> list[_Start]:
    ended = {n.split(".", 1)[0] for n, _ in entries if n.endswith((DONE, FAILED))}
    return [_Start(n.split("-", 1)[0], n, t, n in ended) for n, t in entries if "." not in n]


def prior_starts(store: RunStore, job: SegmentJob) -> int:
    """Starts of this copy's conversion of ``job`` in this run that never finished: each one lost its worker."""
    own = copy_key(job.source_uri)
    return sum(1 for s in _starts(store.entries(_folder(job))) if s.copy == own and not s.ended)


def record_start(store: RunStore, job: SegmentJob) -> str:
    """Leave this start's marker; returns its name in the run, for :func:`record_finish`."""
    name = f"{_folder(job)}/{copy_key(job.source_uri)}-{uuid.uuid4().hex}"
    store.write_bytes(name, b"")
    return name


def record_finish(store: RunStore, marker: str) -> None:
    """The start that left ``marker`` is not a death: its conversion finished, or it was not running on the engine
    when the engine died. It matters when the worker dies between the end of a conversion and the return of its
    result: Ray runs the call again, and a segment must not be counted, nor quarantined, for a crash that was not
    its own. A second marker (not a delete) keeps every start on record and costs one PUT on object storage."""
    store.write_bytes(marker + DONE, b"")


def record_failed(store: RunStore, job: SegmentJob, problem: Problem, marker: str = "") -> None:
    """This copy's conversion of ``job`` ended with ``problem`` (also: quarantined before starting): the copies
    waiting for it take the same outcome instead of waiting out their time."""
    name = marker or f"{_folder(job)}/{copy_key(job.source_uri)}-{uuid.uuid4().hex}"
    store.write_bytes(name + FAILED, json.dumps(problem.to_dict()).encode())


def record_alone(store: RunStore, marker: str) -> None:
    """The start that left ``marker`` is (or was, when its engine died) the only one converting on the engine: if it
    never finishes, the death is that segment's own, not a neighbour's (what :func:`quarantine` needs before it stops
    a suspect)."""
    store.write_bytes(marker + ALONE, b"")


def alone_deaths(store: RunStore, job: SegmentJob) -> int:
    """This copy's latest deaths of ``job`` in this run that had it alone on the engine: the unbroken run of
    never-finished starts marked alone at the end of its deaths, in start order. A death alone followed by a shared
    one says nothing: a document whose engine died once under it for a passing reason, and which then shared the
    deaths of a poisonous neighbour until the suspect groups split them, must not be quarantined for the first one
    (tests/test_resume.py once quarantined such a document beside the poison). A retry starts after its worker is
    replaced, seconds later, so start markers' modification times order the deaths; ties go by name."""
    own = copy_key(job.source_uri)
    entries = store.entries(_folder(job))
    alone = {n for n, _ in entries if n.endswith(ALONE)}
    deaths = sorted((s for s in _starts(entries) if s.copy == own and not s.ended), key=lambda s: (s.mtime, s.name))
    trailing = 0
    for s in reversed(deaths):
        if s.name + ALONE not in alone:
            break
        trailing += 1
    return trailing


def quarantine(prior: int, max_attempts: int, alone: int = 0, depth: int = 0) -> Problem | None:
    """The problem that fails a segment which has started ``prior`` times already, or None: run it.

    A death shared with other segments does not say whose it was. So ``max_attempts`` deaths quarantine a segment
    only when the latest of them had it alone on the engine (``alone``: the latest deaths alone, :func:`alone_deaths`),
    or when its count passed the bound by
    ``depth`` (the halvings that isolate one segment among its actor's chains: :func:`chunker.run.suspects.depth`;
    a worker killed outright, which records nothing, still ends there)."""
    if prior < max_attempts or (alone == 0 and prior < max_attempts + depth):
        return None
    how = f", the last {alone} with it alone on the engine" if alone else ""
    return Problem(Stage.CONVERT, "quarantined",
                   f"conversion started {prior} times and its worker died each time{how}; not retried again")


def elect(store: RunStore, job: SegmentJob) -> str:
    """The copy that converts ``job`` in this run. Asked after this copy's own start is recorded. Where the run
    folder can create a file only if absent (a local disk, NFS) the first copy to ask claims the lead; a copy that
    started later, or in the same clock tick, reads it. On object storage it is the copy with the earliest start
    marker (ties: by name): two copies starting together both see both starts and agree, though two whose markers
    share a modification time may both convert (a wasted conversion, never a wrong row). A copy whose first start
    died keeps the lead: its retry comes back and converts."""
    own = copy_key(job.source_uri)
    held = store.claim(f"{_folder(job)}/{LEAD}", own.encode())
    if held:
        return held.decode()
    starts = _starts(store.entries(_folder(job)))
    if not starts:
        return own
    return min(starts, key=lambda s: (s.mtime, s.name)).copy


def copy_outcome(store: RunStore, job: SegmentJob, leader: str) -> list[ConvertedBatch] | Problem | None:
    """What the leading copy's conversion of ``job`` produced in this run, or None while it runs: its batches (the
    segment's part, written after the leader's first start), or the problem it ended with."""
    from chunker.schemas import from_table

    entries = store.entries(_folder(job))
    mine = [(n, t) for n, t in entries if n.split("-", 1)[0] == leader]
    for name, _ in mine:
        if name.endswith(FAILED):
            raw = store.read_bytes(f"{_folder(job)}/{name}")
            return Problem.from_dict(json.loads(raw.decode() or "{}")) if raw else Problem(
                Stage.CONVERT, "copy_failed", "the copy that converted these bytes failed")
    first = min((t for n, t in mine if "." not in n), default=None)
    written = store.segment_mtime(BATCHES, job.doc_id, job.segment_index)
    if first is None or written is None or written < first:
        return None
    return from_table(store.read_segment(BATCHES, job.doc_id, job.segment_index), ConvertedBatch)


async def await_copy(store: RunStore, job: SegmentJob, leader: str, timeout_s: float,
                     sleep: Callable[[float], object] = asyncio.sleep,
                     clock: Callable[[], float] = time.monotonic) -> list[ConvertedBatch] | Problem | None:
    """Wait (at most ``timeout_s``, looking less often as it goes) for the leading copy's outcome; None when it
    has not come: this copy then converts the segment itself."""
    deadline = clock() + timeout_s
    pause = COPY_POLL_S[0]
    while True:
        out = await asyncio.to_thread(copy_outcome, store, job, leader)
        if out is not None or clock() >= deadline:
            return out
        await sleep(min(pause, max(0.0, deadline - clock())))
        pause = min(pause * 1.5, COPY_POLL_S[1])
