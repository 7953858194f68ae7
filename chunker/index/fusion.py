"""Fusing the dense and BM25 candidates of one question, and moving near-duplicate hits down: pure functions over
the rows the store returns (``chunk_id``, ``score``, ``doc_id``, ``text``), shared by the retriever and the
evaluation's offline comparisons."""

from __future__ import annotations

import re
from typing import Any

# A leg whose N best candidates all score within this share of its best one cannot rank them: its say in the fused
# order shrinks in proportion (a flat BM25 list over ten near-identical filings, or dense cosines over a family of
# near-identical spec sheets). A property of the ranking itself, read per query.
FLAT_SPREAD = 0.1
_WORDS = re.compile(r"[a-z0-9]+")


def leg_weight(scores: list[float], flat: float = FLAT_SPREAD) -> float:
    """How well a leg separates its own candidates: its score spread relative to its best score, capped at 1 from
    ``flat`` upward (scores best first, higher is better)."""
    if len(scores) < 2 or scores[0] <= 0:
        return 1.0 if scores else 0.0
    return min(1.0, max(0.0, (scores[0] - scores[-1]) / scores[0]) / flat)


# BM25 evidence for a chunk of a document the dense leg did not find among its candidates counts this much.
OUTSIDE_DENSE = 0.5


def fuse_adaptive(dense: list[dict[str, Any]], sparse: list[dict[str, Any]], flat: float = FLAT_SPREAD,
                  outside: float = OUTSIDE_DENSE) -> list[dict[str, Any]]:
    """Dense and BM25 candidates (each best first) as one list, best first, ``score`` = the fused score.

    Each leg's scores are rescaled to [0, 1] over its own candidates (best 1, last 0), weighted by
    :func:`leg_weight`, and summed per chunk (a chunk one leg missed gets 0 from it). Unlike reciprocal-rank fusion,
    a near tie in one leg stays a near tie, so the leg that does separate the candidates decides: BM25 between
    near-identical documents that differ in one code or date, dense between paraphrases that share no rare word.

    BM25 is precise and brittle: among the documents the dense leg finds plausible it is the best tie-breaker
    there is (the right quarter's statement by its date, the right sheet by its code), but a rare question word
    matched in a document the dense leg never considered ("quick" in another company's filing) is how it fails
    on corpora of similar documents. Its score for a chunk of a document outside the dense leg's candidates
    counts ``outside`` times (QUALITY.md: on the real filings this kept hybrid at or above the better leg).
    """
    fused: dict[str, float] = {}
    rows: dict[str, dict[str, Any]] = {}
    plausible = {r.get("doc_id") for r in dense}
    for leg in (dense, sparse):
        if not leg:
            continue
        scores = [float(r["score"]) for r in leg]
        w = leg_weight(scores, flat)
        hi, lo = scores[0], scores[-1]
        for r, sc in zip(leg, scores):
            z = (sc - lo) / (hi - lo) if hi > lo else 1.0
            if leg is sparse and dense and r.get("doc_id") not in plausible:
                z *= outside
            fused[r["chunk_id"]] = fused.get(r["chunk_id"], 0.0) + w * z
            rows.setdefault(r["chunk_id"], r)
    order = sorted(fused, key=lambda c: -fused[c])  # stable: dense order breaks exact ties
    return [dict(rows[c], score=fused[c]) for c in order]


_FIGURES = re.compile(r"\d[\d,]*(?:\.\d+)?")


def demote_duplicates(rows: list[dict[str, Any]], threshold: float) -> list[dict[str, Any]]:
    """Rows whose body (text after the breadcrumb) shares at least ``threshold`` of its words (Jaccard) with a
    better-ranked row, and no figure that row lacks, move below every distinct row, in order: a catalogue
    repeating a specification sheet fills the top k with one text twice, and the reader gains nothing from the
    copy. The same wording with other figures (a company's statement of another quarter) is another fact and
    keeps its place. ``threshold`` >= 1 turns it off."""
    if threshold >= 1.0:
        return rows
    seen: list[tuple[set[str], set[str]]] = []
    distinct, copies = [], []
    for r in rows:
        body = (r.get("text") or "").split("\n\n", 1)[-1]
        words = set(_WORDS.findall(body.lower()))
        figs = {f.replace(",", "") for f in _FIGURES.findall(body)}
        if words and any(len(words & w) >= threshold * len(words | w) and figs <= f for w, f in seen):
            copies.append(r)
        else:
            distinct.append(r)
            seen.append((words, figs))
    return distinct + copies
