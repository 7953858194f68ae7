"""Recursive sectioning: cut an element sequence too long for one planning call into sections, at header boundaries.

A planning call sees one section. A sequence within the budget is one section. A longer one is cut before each
heading of its shallowest heading level (``#`` before ``##``); siblings that fit together are packed back into one
section, so a document of many small chapters costs a few calls, not one per chapter; a piece still too long is cut
again at its next level down. Every section carries the headings above it that it does not contain (its ancestors)
as context, so the planner knows where it is without the parent's content being sent again.

A section with no heading left to cut at and still too long is cut between elements as a last resort, never inside
a table (rows of one table group), a list (items continuing each other) or a list with the line introducing it.

Sections are contiguous, in order, and together hold every element exactly once. Tokens are estimated as
characters / 4: the budget guards the prompt size, it does not need a tokenizer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from chunker.types import Element

CHARS_PER_TOKEN = 4


def estimate_tokens(elements: list[Element]) -> int:
    chars = sum(len(e.text) + 1 for e in elements)
    return (chars + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN


@dataclass
class Section:
    """A contiguous run of elements planned in one call, with the ancestor headings that sit outside it."""

    elements: list[Element]
    context: list[Element] = field(default_factory=list)  # outermost first; never part of ``elements``

    @property
    def tokens(self) -> int:
        return estimate_tokens(self.elements)

    @property
    def heading_path(self) -> list[str]:
        return [h.text for h in self.context]


def ancestors(heads: list[Element], below_level: int = 7) -> list[Element]:
    """The heading chain the headings ``heads`` (in reading order) leave open, cut to levels above ``below_level``.

    Siblings drop out the way they do in the parser: a heading closes every open heading of its level or deeper.
    """
    path: list[Element] = []
    for h in heads:
        path = [p for p in path if p.level < h.level] + [h]
    return [p for p in path if p.level < below_level]


def split_sections(elements: list[Element], budget_tokens: int) -> list[Section]:
    """Sections of at most ``budget_tokens`` each, except where a single unsplittable block is larger."""
    if not elements:
        return []
    return _split(list(elements), [], budget_tokens)


def _split(els: list[Element], context: list[Element], budget: int) -> list[Section]:
    if estimate_tokens(els) <= budget:
        return [Section(els, context)]
    n_lead = 0
    while n_lead < len(els) and els[n_lead].kind == "heading":
        n_lead += 1
    lead, rest = els[:n_lead], els[n_lead:]
    if not rest:
        # Nothing but headings: only the last resort can cut it.
        return _last_resort([], els, context, budget)
    levels = [e.level for e in rest if e.kind == "heading"]
    if not levels:
        return _last_resort(lead, rest, context, budget)
    top = min(levels)
    # rest[0] is not a heading, so the first piece is never empty and every piece is shorter than els:
    # the recursion always makes progress.
    pieces: list[list[Element]] = [[]]
    for e in rest:
        if e.kind == "heading" and e.level == top and pieces[-1]:
            pieces.append([])
        pieces[-1].append(e)
    inner = context + lead
    candidates = [(lead + pieces[0], context)] + [(p, ancestors(inner, top)) for p in pieces[1:]]
    out: list[Section] = []
    for group, ctx in _pack_siblings(candidates, budget):
        if len(group) == 1 and estimate_tokens(group[0]) > budget:
            out.extend(_split(group[0], ctx, budget))
        else:
            out.append(Section([e for piece in group for e in piece], ctx))
    return out


def _pack_siblings(
    candidates: list[tuple[list[Element], list[Element]]], budget: int
) -> list[tuple[list[list[Element]], list[Element]]]:
    """Greedily join consecutive sibling pieces while they fit; a joined group keeps its first piece's context
    (the later siblings' own heading is inside the group, so their context is no wider)."""
    groups: list[tuple[list[list[Element]], list[Element]]] = []
    size = 0
    for piece, ctx in candidates:
        t = estimate_tokens(piece)
        if groups and size + t <= budget:
            groups[-1][0].append(piece)
            size += t
        else:
            groups.append(([piece], ctx))
            size = t
    return groups


def _joins(prev: Element, e: Element) -> bool:
    """True when ``e`` must stay in the same section as ``prev`` (the last-resort cut may not fall between them)."""
    if prev.kind == "table_row" and e.kind == "table_row":
        return prev.group == e.group
    if e.kind == "list" and prev.kind == "list":
        return prev.heading_path == e.heading_path
    return e.kind == "list" and prev.kind == "paragraph" and prev.text.rstrip().endswith(":")


def blocks(elements: list[Element]) -> list[list[Element]]:
    """Runs of elements that the last-resort cut never separates."""
    out: list[list[Element]] = []
    for e in elements:
        if out and _joins(out[-1][-1], e):
            out[-1].append(e)
        else:
            out.append([e])
    return out


def _last_resort(lead: list[Element], rest: list[Element], context: list[Element], budget: int) -> list[Section]:
    pieces: list[list[Element]] = []
    cur: list[Element] = list(lead)
    has_body = False  # leading headings alone never make a piece: they open the first one
    for b in blocks(rest):
        if has_body and estimate_tokens(cur + b) > budget:
            pieces.append(cur)
            cur = []
        cur.extend(b)
        has_body = True
    pieces.append(cur)
    # Later pieces sit under the same headings, including the ones the first piece opened.
    later_ctx = ancestors(context + lead)
    return [Section(pieces[0], context)] + [Section(p, later_ctx) for p in pieces[1:]]
