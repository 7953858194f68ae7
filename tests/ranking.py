"""Comparing two search answers the way they can differ on another machine: scores within a tolerance, and rows
whose scores tie in either order.

A batched and a single Milvus search (or two library versions) return the same ranking with scores that differ in
the last bits, and rows with equal scores in whatever order the engine's sort leaves them; neither is a defect.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

# float32 distances carry ~7 significant digits; batching changes the summation order, not the ranking.
REL_TOL = 1e-5
ABS_TOL = 1e-6


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL)


def _as_dict(row: Any) -> dict[str, Any]:
    if isinstance(row, Mapping):
        return dict(row)
    if dataclasses.is_dataclass(row) and not isinstance(row, type):
        return dataclasses.asdict(row)
    return dict(vars(row))


def same_values(a: Any, b: Any) -> bool:
    """Equal, with every float compared within the tolerance (through dicts, lists and tuples)."""
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and close(float(a), float(b))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(same_values(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_values(x, y) for x, y in zip(a, b))
    return bool(a == b)


def _tie_runs(scores: list[float]) -> list[range]:
    """Positions grouped into runs of consecutive scores that tie (within the tolerance)."""
    runs: list[range] = []
    start = 0
    for i in range(1, len(scores) + 1):
        if i == len(scores) or not close(scores[i - 1], scores[i]):
            runs.append(range(start, i))
            start = i
    return runs


def assert_same_ranking(got: Sequence[Any], want: Sequence[Any], *, key: str = "chunk_id", score: str = "score",
                        skip: tuple[str, ...] = ()) -> None:
    """``got`` ranks the same rows as ``want``: the same length; rank by rank the same score (within the
    tolerance); the same rows at each run of tied scores, in any order (the last run may hold other rows with the
    same score: it may be a tie cut by the limit, and which tied rows make the cut is the engine's choice); and each
    row found in both has the same fields (floats within the tolerance; ``skip`` names fields left out, e.g. a rank)."""
    g_rows, w_rows = [_as_dict(r) for r in got], [_as_dict(r) for r in want]
    g_ids, w_ids = [r[key] for r in g_rows], [r[key] for r in w_rows]
    assert len(g_rows) == len(w_rows), f"{len(g_rows)} rows, expected {len(w_rows)}: {g_ids} vs {w_ids}"
    g_scores, w_scores = [float(r[score]) for r in g_rows], [float(r[score]) for r in w_rows]
    for rank, (a, b) in enumerate(zip(g_scores, w_scores), start=1):
        assert close(a, b), f"rank {rank}: score {a!r}, expected {b!r} ({g_ids} vs {w_ids})"
    for run in _tie_runs(w_scores):
        if run.stop == len(w_rows):
            continue  # the last run may be cut by the limit: any row with its score may fill it
        assert {g_ids[i] for i in run} == {w_ids[i] for i in run}, \
            f"ranks {run.start + 1}-{run.stop}: {g_ids} vs {w_ids} (scores {w_scores})"
    by_id = {r[key]: r for r in w_rows}
    for row in g_rows:
        other = by_id.get(row[key])
        if other is not None:
            a = {k: v for k, v in row.items() if k not in skip}
            b = {k: v for k, v in other.items() if k not in skip}
            assert same_values(a, b), f"row {row[key]!r} differs:\n{a}\n{b}"


def assert_same_rankings(got: Sequence[Sequence[Any]], want: Sequence[Sequence[Any]], **kw: Any) -> None:
    """:func:`assert_same_ranking` for each pair of answers (a batch against its single searches)."""
    assert len(got) == len(want), f"{len(got)} answers, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        try:
            assert_same_ranking(g, w, **kw)
        except AssertionError as exc:
            raise AssertionError(f"answer {i}: {exc}") from None
