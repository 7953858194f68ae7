"""How many times a segment's conversion has started in this run, across workers and nodes, and what that means.

Ray retries the work of a dead or unreachable actor; the retry bound has to be unlimited (``ray.actor_max_task_retries``
-1), because Ray spends retries while a lost node is still being detected and a small bound ends the whole run. What
then stops a segment that kills its worker every time (a PDF that crashes pdfium, an image that takes the engine
down) is this count: every start leaves one marker in the run folder until its conversion finishes, and a segment
whose worker died under it ``ray.segment_max_attempts`` times fails alone, ``quarantined``, and the run goes on.

An actor converts many segments at once, and a crash kills all of them, so a death cannot be pinned on one. A
segment whose worker died ``SOLO_AFTER`` times therefore runs alone in its actor (:class:`SoloGate`): from then on only
its own crash counts against it, while a segment that merely shared an actor with a bad one, or lost its node, is
counted at most ``SOLO_AFTER`` times before it runs alone and succeeds. Markers of a run are cleared when the next
run starts.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from chunker.run.layout import ATTEMPTS, RunStore, segment_part
from chunker.types import Problem, SegmentJob, Stage

SOLO_AFTER = 2


def _folder(job: SegmentJob) -> str:
    return f"{ATTEMPTS}/{segment_part(job.doc_id, job.segment_index)}"


DONE = ".done"


def prior_starts(store: RunStore, job: SegmentJob) -> int:
    """Starts of ``job``'s conversion in this run that never finished: each one lost its worker."""
    names = store.names(_folder(job))
    return sum(1 for n in names if not n.endswith(DONE)) - sum(1 for n in names if n.endswith(DONE))


def record_start(store: RunStore, job: SegmentJob) -> str:
    """Leave this start's marker; returns its name in the run, for :func:`record_finish`."""
    name = f"{_folder(job)}/{uuid.uuid4().hex}"
    store.write_bytes(name, b"")
    return name


def record_finish(store: RunStore, marker: str) -> None:
    """The conversion that left ``marker`` finished: it is not a death. It matters when the worker dies between the
    end of a conversion and the return of its result (a neighbour's crash ending the process): Ray runs the call
    again, and a segment that had finished must not be counted, nor quarantined, for a crash that was not its own.
    A second marker (not a delete) keeps every start on record and costs one PUT on object storage, no rename."""
    store.write_bytes(marker + DONE, b"")


def quarantine(prior: int, max_attempts: int) -> Problem | None:
    """The problem that fails a segment which has started ``prior`` times already, or None: run it."""
    if prior < max_attempts:
        return None
    return Problem(Stage.CONVERT, "quarantined",
                   f"conversion started {prior} times and its worker died each time; not retried again")


class SoloGate:
    """Shared for ordinary segments, exclusive for a segment whose worker died ``SOLO_AFTER`` times; a waiting
    solo segment holds back new shared ones so it cannot starve."""

    def __init__(self) -> None:
        self._cond: asyncio.Condition | None = None
        self._shared = 0
        self._solo = False
        self._solo_waiting = 0

    def _condition(self) -> asyncio.Condition:
        if self._cond is None:  # created on the actor's event loop, not in its constructor
            self._cond = asyncio.Condition()
        return self._cond

    @asynccontextmanager
    async def enter(self, solo: bool) -> AsyncIterator[None]:
        cond = self._condition()
        async with cond:
            if solo:
                self._solo_waiting += 1
                try:
                    await cond.wait_for(lambda: not self._solo and self._shared == 0)
                finally:
                    self._solo_waiting -= 1
                self._solo = True
            else:
                await cond.wait_for(lambda: not self._solo and self._solo_waiting == 0)
                self._shared += 1
        try:
            yield
        finally:
            async with cond:
                if solo:
                    self._solo = False
                else:
                    self._shared -= 1
                cond.notify_all()
