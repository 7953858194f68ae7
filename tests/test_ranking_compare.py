"""The search-answer comparison the store and retrieval tests use (tests/ranking.py) passes what differs between
machines and fails what is a real difference."""

from __future__ import annotations

import pytest
from ranking import assert_same_ranking, assert_same_rankings


def rows(*pairs: tuple[str, float], **extra: object) -> list[dict[str, object]]:
    return [{"chunk_id": cid, "score": score, "meta": {"page": 1, "w": 0.5}, **extra} for cid, score in pairs]


def test_last_bit_differences_and_tied_rows_in_either_order_pass():
    want = rows(("a", 0.6941221356391907), ("b", 0.5), ("c", 0.5), ("d", 0.25))
    got = rows(("a", 0.6941221952438354), ("c", 0.5000001), ("b", 0.5), ("d", 0.25))
    assert_same_ranking(got, want)
    # A tie at the cut: another row with the same score may fill the last place.
    assert_same_ranking(rows(("a", 0.9), ("x", 0.5)), rows(("a", 0.9), ("b", 0.5)))
    assert_same_rankings([got, []], [want, []])


WANT = rows(("a", 0.9), ("b", 0.8), ("c", 0.7))


@pytest.mark.parametrize("got", [
    rows(("b", 0.9), ("a", 0.8), ("c", 0.7)),  # two rows with different scores swapped
    rows(("a", 0.9), ("b", 0.81), ("c", 0.7)),  # a score off by more than float32 noise
    rows(("a", 0.9), ("b", 0.8)),  # a row missing
    rows(("a", 0.9), ("x", 0.8), ("c", 0.7)),  # another row where no tie allows it
    rows(("a", 0.9), ("b", 0.8), ("c", 0.7), text="other"),  # same ranking, a field more
])
def test_real_differences_fail(got):
    with pytest.raises(AssertionError):
        assert_same_ranking(got, WANT)


def test_nested_floats_compare_within_the_tolerance_and_objects_by_their_fields():
    from dataclasses import dataclass

    @dataclass
    class Hit:
        rank: int
        score: float
        chunk_id: str

    assert_same_ranking([Hit(1, 0.5, "a"), Hit(2, 0.5, "b")], [Hit(1, 0.5, "b"), Hit(2, 0.50000001, "a")],
                        skip=("rank",))
    with pytest.raises(AssertionError):
        assert_same_ranking([Hit(1, 0.5, "a"), Hit(2, 0.5, "b")], [Hit(1, 0.5, "b"), Hit(2, 0.5, "a")])
    with pytest.raises(AssertionError):
        assert_same_ranking(rows(("a", 0.9)), [{"chunk_id": "a", "score": 0.9, "meta": {"page": 1, "w": 0.6}}])
