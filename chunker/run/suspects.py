"""Finding the segment that kills its engine, without running its neighbours one at a time.

An engine death is charged to every segment converting on it (:mod:`chunker.run.attempts`): with 80 chains in flight
and one poison segment (a page that crashes the engine), two deaths make 80 segments equally suspect. Running each
of them alone until the poison one is quarantined serialises the GPU for as many segment conversions; bisection
finds it in about log2(80) deaths instead, while the innocent half keeps converting many at a time:

* a segment whose conversion died ``SUSPECT_AFTER`` times is a suspect at level ``deaths - SUSPECT_AFTER + 1``;
* suspects run in groups: the same level and the same first ``level`` bits of a hash of the segment, so every
  further death halves the group the poison one is in (the group that finishes is cleared with it);
* a group has its actor's engine to itself (no other group, no ordinary segment beside it), so a death is charged to
  that group alone, and a group of one that dies is the segment's own death (``record_alone``);
* from the level at which a group holds one segment on average (:func:`depth` of the actor's chains) a group's
  segments run one at a time. Halving by hash bits alone never parts two segments whose hashes share a long prefix:
  an innocent one would die beside the poison one at every level and be quarantined with it. Run alone, it finishes,
  and a death there is known to be the running segment's own before it happens (the marker is written first), also
  when the worker is killed outright and records nothing.

Ray retries a dead actor's calls on the restarted actor, so a death's suspects meet again in one gate; a worker
killed outright (no chance to say who was converting) charges all it held, and the same halving still applies.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from chunker.run.layout import copy_key
from chunker.types import SegmentJob

SUSPECT_AFTER = 2  # one death may be anything's (an engine that ran out of memory); two on the same segment are not

Group = tuple[int, int]  # (level, the segment's first `level` hash bits)


def suspect_group(job: SegmentJob, deaths: int) -> Group | None:
    """The group a segment whose conversion died ``deaths`` times runs in, or None: not a suspect."""
    if deaths < SUSPECT_AFTER:
        return None
    level = min(deaths - SUSPECT_AFTER + 1, 63)
    key = f"{copy_key(job.source_uri)}:{job.doc_id}:{job.segment_index}".encode()
    bits = int.from_bytes(hashlib.sha256(key).digest()[:8], "big")
    return level, bits >> (64 - level)


def depth(chains: int) -> int:
    """Halvings that leave one segment of ``chains`` converting at once alone in its group (on average)."""
    return math.ceil(math.log2(max(1, chains)))


class SuspectGate:
    """Ordinary segments share the engine; a suspect group has it to itself, one group at a time, in the order they
    came, and a group of level ``serial_from`` or deeper one segment at a time. A waiting group holds new ordinary
    segments back, so suspects are never starved."""

    def __init__(self, serial_from: int) -> None:
        self._serial_from = max(1, serial_from)
        self._cond: asyncio.Condition | None = None
        self._shared = 0
        self._group: Group | None = None
        self._in_group = 0
        self._waiting: dict[Group, int] = {}  # insertion order is arrival order

    def _condition(self) -> asyncio.Condition:
        if self._cond is None:  # created on the actor's event loop, not in its constructor
            self._cond = asyncio.Condition()
        return self._cond

    @property
    def running(self) -> int:
        """Segments inside the gate now."""
        return self._shared + self._in_group

    def serial(self, group: Group | None) -> bool:
        """Whether a segment of ``group`` converts with nothing else on the engine."""
        return group is not None and group[0] >= self._serial_from

    def _may_enter(self, group: Group) -> bool:
        if self._shared:
            return False
        if self._group is not None:  # a retry of the running group joins it, unless the group runs one at a time
            return self._group == group and not (self.serial(group) and self._in_group)
        return next(iter(self._waiting)) == group

    @asynccontextmanager
    async def enter(self, group: Group | None) -> AsyncIterator[None]:
        cond = self._condition()
        async with cond:
            if group is None:
                await cond.wait_for(lambda: self._group is None and not self._waiting)
                self._shared += 1
            else:
                self._waiting[group] = self._waiting.get(group, 0) + 1
                try:
                    await cond.wait_for(lambda: self._may_enter(group))
                finally:
                    self._waiting[group] -= 1
                    if not self._waiting[group]:
                        del self._waiting[group]
                self._group = group
                self._in_group += 1
        try:
            yield
        finally:
            async with cond:
                if group is None:
                    self._shared -= 1
                else:
                    self._in_group -= 1
                    if not self._in_group:
                        self._group = None
                cond.notify_all()
