"""Fault injection for tests: make chosen documents raise at a chosen stage of a real run.

Switched on by one environment variable, read here and nowhere else::

    CHUNKER_FAULTS="convert:report-b,embed:scan 7.pdf,write:ledger"

Each entry is ``stage:needle``; a document whose ``source`` (its path relative to the input root, as shown in the
documents table) contains ``needle`` raises :class:`InjectedFault` when it reaches ``stage``. Stages, each checked
by a one-line hook at its boundary:

=========  ==========================================================================================
intake     ``jobs.stages.intake_rows``, before the file is fetched and hashed
render     ``chunker.run.segment.convert_segment``, where the segment's PDF is opened for its pages
convert    ``chunker.run.segment.convert_segment``, before the converter runs
parse      ``chunker.run.segment.plan_segment``, before the Markdown is parsed into elements
plan       ``chunker.run.segment.plan_segment``, before the planner runs
embed      ``jobs.stages.EmbedStage``, before a row's chunks are embedded
write      ``chunker.index.bulk.ChunkSink``, before chunks are written to Milvus
=========  ==========================================================================================

``InjectedFault`` is a plain ``RuntimeError``, not one of the project's typed errors, so it takes the path of an
unforeseen defect: what the tests prove is that *any* exception for one document stays with that document. An entry
``stage:needle:setup`` raises a :class:`~chunker.errors.SetupError` instead, which must stop the run.

Ray workers inherit the variable from the process that starts Ray (a local runtime); on a cluster it would have to be
in the runtime environment. Unset (the normal case) every hook is one dictionary lookup. It is not a config field
on purpose: nobody turns it on by accident, and a run with it set says so in its log.
"""

from __future__ import annotations

import logging
import os
from functools import lru_cache

from chunker.errors import SetupError

ENV = "CHUNKER_FAULTS"
STAGES = ("intake", "render", "convert", "parse", "plan", "embed", "write")

log = logging.getLogger("chunker.run.faults")


class InjectedFault(RuntimeError):
    """Raised by :func:`check` for a document named in ``CHUNKER_FAULTS``."""


class InjectedSetupError(SetupError):
    """Raised by :func:`check` for a ``stage:needle:setup`` entry."""


@lru_cache(maxsize=8)
def parse(spec: str) -> tuple[tuple[str, str, bool], ...]:
    """``CHUNKER_FAULTS`` as ``(stage, needle, setup)`` entries; a malformed entry is a :class:`SetupError`."""
    out: list[tuple[str, str, bool]] = []
    for raw in spec.split(","):
        entry = raw.strip()
        if not entry:
            continue
        stage, sep, rest = entry.partition(":")
        needle, setup = rest, False
        if rest.endswith(":setup"):
            needle, setup = rest[: -len(":setup")], True
        if not sep or stage not in STAGES or not needle:
            raise SetupError(f"{ENV}: entry {entry!r} is not stage:needle[:setup] with a stage among {', '.join(STAGES)}")
        out.append((stage, needle, setup))
    return tuple(out)


def active() -> tuple[tuple[str, str, bool], ...]:
    """The entries in force (none when the variable is unset or empty)."""
    spec = os.environ.get(ENV)
    return parse(spec) if spec else ()


def check(stage: str, *sources: str) -> None:
    """Raise for the first of ``sources`` that an entry names at ``stage``; nothing when injection is off."""
    spec = os.environ.get(ENV)
    if not spec:
        return
    for entry_stage, needle, setup in parse(spec):
        if entry_stage != stage:
            continue
        for source in sources:
            if needle in source:
                if setup:
                    raise InjectedSetupError(f"injected setup error at {stage} for {source!r} ({ENV})")
                raise InjectedFault(f"injected fault at {stage} for {source!r} ({ENV})")


def announce() -> None:
    """Log the entries in force (drivers call it once, so a run with injection on says so), and validate them."""
    entries = active()
    if entries:
        log.warning("%s is set: documents will fail on purpose: %s", ENV,
                    ", ".join(f"{s}:{n}" + (":setup" if u else "") for s, n, u in entries))
