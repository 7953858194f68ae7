"""No fragment chunks: a planned chunk too small to stand alone joins a neighbour.

Packing a section stops at every change of kind (prose, table, figure) and every heading, so a document leaves
pieces behind: a cover-page line under its form heading ("FORM 10-Q > (Mark One)"), "See accompanying notes to
consolidated financial statements." after a statement, a heading over one line, a page-top remnant. Alone, such a
chunk says little, and when its few words match a question it outranks the chunk that answers it.

A chunk whose text (breadcrumb included: what the embedder sees) is under ``planner.min_chars`` joins, in order of
preference: the chunk before it in its section, the chunk after it in its section, the first chunk of the next
section, the last chunk of the section before. The joined chunk must stay within ``planner.max_chars``. A question
and its answer (an FAQ pair) is a whole unit, not a fragment: it neither joins nor takes a fragment. Joining only
ever concatenates neighbouring ID lists, so the plan still places every element exactly once, in order; a heading
that ends up inside a chunk keeps its text in the body (see :func:`chunker.plan.deterministic.build_chunks`).
"""

from __future__ import annotations

from dataclasses import dataclass

from chunker.config import PlannerConfig
from chunker.types import Element


@dataclass
class Piece:
    """A planned chunk while fragments are joined: its IDs, the section it was packed in, its text size."""

    ids: list[str]
    section: int
    size: int
    pair: bool  # a question with its answer: never joined


def join_fragments(pieces: list[Piece], cfg: PlannerConfig, measure) -> list[Piece]:  # noqa: ANN001 - callable
    """Join every piece under ``cfg.min_chars`` into a neighbour (see the module docstring). ``measure(ids)`` gives
    the text size of a would-be chunk, so the size test is the one the finished chunk will have."""
    out = list(pieces)
    i = 0
    while i < len(out):
        p = out[i]
        if p.size >= cfg.min_chars or p.pair or len(out) == 1:
            i += 1
            continue
        j = _target(out, i, cfg, measure)
        if j is None:
            i += 1
            continue
        lo, hi = min(i, j), max(i, j)
        ids = out[lo].ids + out[hi].ids
        # The joined chunk belongs to the section of the piece that is not the fragment: its breadcrumb comes from
        # its first element either way, and a fragment may join again if the result is still small.
        out[lo:hi + 1] = [Piece(ids, out[j].section, measure(ids), False)]
        i = lo
    return out


def _target(out: list[Piece], i: int, cfg: PlannerConfig, measure) -> int | None:  # noqa: ANN001
    p = out[i]
    before = i - 1 if i > 0 else None
    after = i + 1 if i + 1 < len(out) else None
    same = [j for j in (before, after) if j is not None and out[j].section == p.section]
    other = [j for j in (after, before) if j is not None and out[j].section != p.section] \
        if cfg.merge_fragments == "document" else []
    for j in same + other:
        if out[j].pair:
            continue
        ids = out[j].ids + p.ids if j < i else p.ids + out[j].ids
        if measure(ids) <= cfg.max_chars:
            return j
    return None


def is_pair(els: list[Element], is_question) -> bool:  # noqa: ANN001 - predicate
    """Whether a chunk's content opens with a question (an FAQ pair: the question and its answer)."""
    content = [e for e in els if e.kind != "heading"]
    return bool(content) and is_question(content[0])
