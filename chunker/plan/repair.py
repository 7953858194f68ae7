"""Validation and deterministic repair of an LLM chunk plan (see :mod:`chunker.plan.llm`).

A plan answer is raw ID lists; :func:`repair_plan` turns them into plans that cover a section's elements exactly once,
in order, counting every repair by kind. What cannot be repaired raises :class:`PlanRejected` and the section falls
back to the deterministic planner.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from chunker.errors import ChunkerError
from chunker.config import PlannerConfig
from chunker.plan.deterministic import Plan, is_question, plan
from chunker.types import Element


class PlanRejected(ChunkerError, ValueError):
    """A model answer that no deterministic repair can turn into a plan; its section falls back."""


_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.I)


def parse_answer(text: str) -> list[list[Any]]:
    """The raw ID lists of an answer; :class:`PlanRejected` when it is not a JSON plan."""
    s = _FENCE.sub("", text.strip())
    try:
        obj = json.loads(s)
    except ValueError:
        # A sentence around the JSON is forgiven; anything else is not JSON.
        m = re.search(r"[{\[].*[}\]]", s, re.S)
        try:
            obj = json.loads(m.group(0)) if m else None
        except ValueError:
            obj = None
        if obj is None:
            raise PlanRejected("not JSON") from None
    lists = obj.get("chunks") if isinstance(obj, dict) else obj
    if not isinstance(lists, list) or not lists:
        raise PlanRejected("empty plan")
    out: list[list[Any]] = []
    for item in lists:
        if isinstance(item, dict):
            item = item.get("ids", item.get("element_ids"))
        if not isinstance(item, list):
            raise PlanRejected("a chunk is not a list of IDs")
        out.append(item)
    return out


def _position(item: Any, pos: dict[int, int]) -> int | None:
    if isinstance(item, bool):
        return None
    if isinstance(item, float) and item.is_integer():
        item = int(item)
    if isinstance(item, str):
        tail = item.strip().rsplit(":", 1)[-1].strip("[] ")
        item = int(tail) if tail.isdigit() else None
    return pos.get(item) if isinstance(item, int) else None


def _size(els: list[Element]) -> int:
    return sum(len(e.text) + 1 for e in els)


def _gap_cut(els: list[Element], s: int, e: int, has_prev: bool, has_next: bool) -> int:
    """Where a run of missing elements [s, e) between two chunks splits: before it goes back, after it goes on."""
    if not has_prev:
        return s
    if not has_next:
        return e
    for i in range(s, e):
        if els[i].kind == "heading":
            return i  # a heading opens what follows it
    nxt = els[e]
    if nxt.kind == "table_row" and not (els[s - 1].kind == "table_row" and els[s - 1].group == nxt.group):
        i = e
        while i > s and els[i - 1].kind == "table_row" and els[i - 1].group == nxt.group:
            i -= 1
        return i  # rows of the next chunk's table go with that table
    return e


def repair_plan(els: list[Element], raw: list[list[Any]], cfg: PlannerConfig) -> tuple[list[Plan], Counter[str]]:
    """Turn raw ID lists into plans covering ``els`` exactly once in order, counting each repair by kind."""
    pos = {e.ordinal: i for i, e in enumerate(els)}
    repairs: Counter[str] = Counter()
    seen: set[int] = set()
    chunks: list[list[int]] = []
    for lst in raw:
        cur: list[int] = []
        for item in lst:
            p = _position(item, pos)
            if p is None:
                repairs["unknown_id"] += 1
            elif p in seen:
                repairs["heading_reused" if els[p].kind == "heading" else "duplicate_id"] += 1
            else:
                seen.add(p)
                cur.append(p)
        if cur:
            chunks.append(cur)
        else:
            repairs["empty_chunk"] += 1
    if not chunks:
        raise PlanRejected("no known element IDs")
    for c in chunks:
        if c != sorted(c):
            c.sort()
            repairs["reordered_within_chunk"] += 1
    if [c[0] for c in chunks] != sorted(c[0] for c in chunks):
        chunks.sort(key=lambda c: c[0])
        repairs["reordered_chunks"] += 1
    if any(a[-1] > b[0] for a, b in zip(chunks, chunks[1:])):
        raise PlanRejected("chunks interleave")
    owner: list[int | None] = [None] * len(els)
    for ci, c in enumerate(chunks):
        for p in range(c[0], c[-1] + 1):
            owner[p] = ci  # a hole inside a chunk's run belongs to that chunk
    s = 0
    while s < len(els):
        if owner[s] is not None:
            s += 1
            continue
        e = s
        while e < len(els) and owner[e] is None:
            e += 1
        prev, nxt = (owner[s - 1] if s else None), (owner[e] if e < len(els) else None)
        cut = _gap_cut(els, s, e, prev is not None, nxt is not None)
        for i in range(s, e):
            owner[i] = prev if i < cut else nxt
        s = e
    repairs["missing_id"] += len(els) - len(seen)
    runs: list[list[Element]] = []
    for i, e in enumerate(els):
        if i and owner[i] == owner[i - 1]:
            runs[-1].append(e)
        else:
            runs.append([e])
    runs = _size_repairs(runs, cfg, repairs)
    return [Plan([e.element_id for e in r]) for r in runs], +repairs


def _plain(run: list[Element]) -> bool:
    return all(e.kind in ("heading", "paragraph", "list", "code") for e in run)


def _size_repairs(runs: list[list[Element]], cfg: PlannerConfig, repairs: Counter[str]) -> list[list[Element]]:
    """Quality repairs the prompt asks for but a model may ignore: no lone headings, the hard size cap, no crumbs."""
    merged: list[list[Element]] = []
    carry: list[Element] = []
    for r in runs:
        if all(e.kind == "heading" for e in r):
            carry.extend(r)
            repairs["lone_heading"] += 1
            continue
        merged.append(carry + r)
        carry = []
    if carry:
        if merged:
            merged[-1].extend(carry)
        else:
            merged.append(carry)
    out: list[list[Element]] = []
    for r in merged:
        if _size(r) > cfg.max_chars and sum(e.kind != "heading" for e in r) > 1:
            repairs["oversized_split"] += 1
            by_id = {e.element_id: e for e in r}
            out.extend([by_id[i] for i in p.element_ids] for p in plan(r, cfg))
        else:
            out.append(r)
    final: list[list[Element]] = []
    for r in out:
        prev = final[-1] if final else None
        if (prev is not None and _size(prev) < cfg.min_chars and _plain(prev) and _plain(r)
                and _size(prev) + _size(r) <= cfg.target_chars and r[0].kind != "heading"
                and not is_question(r[0]) and prev[-1].heading_path == r[0].heading_path):
            prev.extend(r)
            repairs["small_merged"] += 1
        else:
            final.append(r)
    return final
