"""Adaptive fusion and near-duplicates: pure functions of chunker.index.fusion on hand-made rows (no store, no model).
The retriever that calls them, over Milvus Lite with the real MiniLM: tests/test_retrieval.py."""

from __future__ import annotations

import pytest


def row(cid: str, score: float, modality: str = "text", text: str = "") -> dict:
    return {"chunk_id": cid, "score": score, "modality": modality, "text": text or cid, "breadcrumb": "B",
            "source": "s.pdf", "doc_id": "d", "page_start": 1, "page_end": 1}


def test_leg_weight_is_the_legs_own_spread() -> None:
    from chunker.index.fusion import leg_weight

    assert leg_weight([12.0, 6.0, 1.0]) == 1.0  # spread well past FLAT_SPREAD
    assert leg_weight([0.60, 0.59, 0.57]) == pytest.approx((0.03 / 0.60) / 0.1)  # near-flat: little say
    assert leg_weight([5.0, 5.0]) == 0.0 and leg_weight([3.0]) == 1.0 and leg_weight([]) == 0.0


def test_adaptive_fusion_lets_the_separating_leg_decide_a_near_tie() -> None:
    from chunker.index.fusion import fuse_adaptive

    def leg(*pairs: tuple[str, float]) -> list[dict]:
        return [row(cid, sc) for cid, sc in pairs]

    # Dense cannot tell two near-identical sheets apart (0.61 vs 0.60); BM25 can (the model code matched).
    dense = leg(("hx100", 0.61), ("hx200", 0.60), ("other", 0.30))
    sparse = leg(("hx200", 14.0), ("hx100", 7.0), ("other", 1.0))
    assert [r["chunk_id"] for r in fuse_adaptive(dense, sparse)][:2] == ["hx200", "hx100"]
    # Reciprocal ranks would call it a tie (1st + 2nd each); the mirror case goes to dense just the same.
    dense = leg(("para", 0.70), ("wrong", 0.40), ("x", 0.20))
    sparse = leg(("wrong", 9.1), ("para", 9.0), ("x", 8.9))  # BM25 nearly flat: its order is noise
    fused = fuse_adaptive(dense, sparse)
    assert fused[0]["chunk_id"] == "para" and fused[0]["score"] > fused[1]["score"]
    # A chunk only one leg found still competes; an empty leg leaves the other's order.
    assert [r["chunk_id"] for r in fuse_adaptive(dense, [])] == ["para", "wrong", "x"]


def test_near_duplicates_move_below_distinct_hits() -> None:
    from chunker.index.fusion import demote_duplicates

    spec = "Parameter: Maximum head; Value: 46 m.\nParameter: Motor power; Value: 4.0 kW."
    rows = [row("sheet", 3.0, text=f"HX-200 Sheet > Performance\n\n{spec}"),
            row("catalogue", 2.9, text=f"Catalogue > HX-200 Series\n\n{spec}"),
            row("guide", 2.0, text="HX-200 Guide > Maintenance\n\nRegrease the bearings every 4000 hours.")]
    assert [r["chunk_id"] for r in demote_duplicates(rows, 0.9)] == ["sheet", "guide", "catalogue"]
    assert [r["chunk_id"] for r in demote_duplicates(rows, 1.0)] == ["sheet", "catalogue", "guide"]  # off


def test_same_wording_with_other_figures_is_another_fact_not_a_duplicate() -> None:
    from chunker.index.fusion import demote_duplicates

    # Two quarters of one company's statement: the same words, other figures. Both are answers to some question.
    q2 = "Statements of Operations\n\nTotal net sales | Three Months Ended April 1, 2023: 94,836; 97,278"
    q3 = "Statements of Operations\n\nTotal net sales | Three Months Ended July 1, 2023: 81,797; 82,959"
    rows = [row("q3", 3.0, text=q3), row("q2", 2.9, text=q2), row("notes", 2.0, text="Notes\n\nLeases are ...")]
    assert [r["chunk_id"] for r in demote_duplicates(rows, 0.5)] == ["q3", "q2", "notes"]
    # The same figures again (a summary repeating the statement) is a copy and moves down.
    rows[1] = row("copy", 2.9, text=q3.replace("Statements of Operations", "Summary"))
    assert [r["chunk_id"] for r in demote_duplicates(rows, 0.5)] == ["q3", "notes", "copy"]


def test_bm25_counts_half_outside_the_documents_dense_found() -> None:
    from chunker.index.fusion import fuse_adaptive

    def hit(cid: str, doc: str, score: float) -> dict:
        return dict(row(cid, score), doc_id=doc)

    def order(outside: float) -> list[str]:
        # The question names one company; BM25's best match is a rare word in another company's filing.
        dense = [hit("amcor-liq", "amcor", 0.62), hit("amcor-bs", "amcor", 0.55), hit("amcor-risk", "amcor", 0.39)]
        sparse = [hit("cvs-quick", "cvs", 21.0), hit("amcor-risk", "amcor", 12.0), hit("amcor-liq", "amcor", 3.0)]
        return [r["chunk_id"] for r in fuse_adaptive(dense, sparse, outside=outside)]

    assert order(1.0).index("cvs-quick") < order(1.0).index("amcor-bs")  # ungated, the stray match climbs
    assert order(0.5).index("cvs-quick") > order(0.5).index("amcor-bs")  # the default gate keeps it below
    # Within the documents dense found, BM25 still breaks a near tie (the right quarter by its date).
    dense = [hit("q3", "q3", 0.601), hit("q2", "q2", 0.600), hit("x", "x", 0.30)]
    sparse = [hit("q2", "q2", 15.0), hit("q3", "q3", 9.0), hit("x", "x", 1.0)]
    assert [r["chunk_id"] for r in fuse_adaptive(dense, sparse)][0] == "q2"
