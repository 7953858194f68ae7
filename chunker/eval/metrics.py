"""Retrieval metrics, as defined in ../shared/data/rag-multi-corpus-cloudway/README.md.

* ``doc@k``: share of questions with a hit from a supporting document among the top k.
* ``page@k``: the same for hits whose page span overlaps a supporting page (only questions whose evidence names
  pages count).
* ``mrr@k``: mean reciprocal rank of the first hit from a supporting document (0 when none in the top k).
* ``fact@budget``: read hits in rank order until ``budget`` characters are spent (the last one cut to what is left);
  for each supporting fact, the share of its content words found in the spent text of hits from that fact's
  document; averaged per question, then over questions.
* ``num@k`` (numeric questions): the share of the answer's figures found among the number tokens of the top k hits
  from a supporting document. The figures are the number tokens of the question's ``answer`` when it has one, else
  of its evidence texts; a question without figures does not count. A number token is a run of digits with optional
  thousands commas and decimals ("$ 16,425", "(1,234.50)", "7.5%"), compared by value as written: commas, currency
  signs, signs and parentheses dropped, leading zeros and trailing decimal zeros removed ("16,425" = "16425",
  "2.50" = "2.5"). It asks whether the figures themselves reached the reader, not just the right document.
* ``num@budget`` (``num@2000``): the same figures, looked for in the text a reader spends (as ``fact@budget``: hits
  in rank order until ``budget`` characters are spent, the last one cut) of hits from a supporting document. num@5
  can be bought with bigger chunks; at an equal reading budget it cannot.
* ``hit chars``: mean length of the top 5 hits' text: what a reader spends per hit.

Documents are matched by file name (evidence names ``X.pdf``; hits carry a path relative to the input root).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath

STOP_WORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below between both but
by can could did do does doing down during each few for from further had has have having he her here hers herself him
himself his how i if in into is it its itself just me more most my myself no nor not now of off on once only or other
our ours ourselves out over own same she should so some such than that the their theirs them themselves then there
these they this those through to too under until up very was we were what when where which while who whom why will
with would you your yours yourself yourselves also may must shall via per etc within without upon
""".split())

_WORD = re.compile(r"[a-z0-9]+")
# Thousands-grouped numbers first, so "16,425" is one figure; a plain run of digits otherwise.
_NUMBER = re.compile(r"(?<![\d,.])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\d]|,\d)|\d+(?:\.\d+)?")


def content_words(text: str) -> set[str]:
    """Lower-cased alphanumeric words of 2+ characters, minus stop words."""
    return {w for w in _WORD.findall(text.lower()) if len(w) >= 2 and w not in STOP_WORDS}


def _norm_number(raw: str) -> str:
    whole, _, frac = raw.replace(",", "").partition(".")
    whole = whole.lstrip("0") or "0"
    frac = frac.rstrip("0")
    return f"{whole}.{frac}" if frac else whole


def figures(text: str) -> set[str]:
    """The number tokens of ``text``, normalised (see the module docstring)."""
    return {_norm_number(m.group(0)) for m in _NUMBER.finditer(text)}


def doc_key(name: str) -> str:
    return PurePath(name).name.strip().lower()


@dataclass
class Evidence:
    doc: str
    text: str = ""
    pages: list[int] = field(default_factory=list)


@dataclass
class RankedHit:
    source: str
    text: str
    page_start: int = 0
    page_end: int = 0


def first_relevant_rank(hits: Sequence[RankedHit], docs: set[str], k: int) -> int | None:
    for rank, h in enumerate(hits[:k], 1):
        if doc_key(h.source) in docs:
            return rank
    return None


def doc_at_k(hits: Sequence[RankedHit], evidence: Sequence[Evidence], k: int = 5) -> float:
    return 1.0 if first_relevant_rank(hits, {doc_key(e.doc) for e in evidence}, k) else 0.0


def mrr_at_k(hits: Sequence[RankedHit], evidence: Sequence[Evidence], k: int = 10) -> float:
    r = first_relevant_rank(hits, {doc_key(e.doc) for e in evidence}, k)
    return 1.0 / r if r else 0.0


def page_at_k(hits: Sequence[RankedHit], evidence: Sequence[Evidence], k: int = 5) -> float | None:
    """None when no evidence names pages (the question does not count)."""
    wanted = {(doc_key(e.doc), p) for e in evidence for p in e.pages}
    if not wanted:
        return None
    for h in hits[:k]:
        for p in range(h.page_start, h.page_end + 1):
            if (doc_key(h.source), p) in wanted:
                return 1.0
    return 0.0


def spent_text_by_doc(hits: Iterable[RankedHit], budget: int) -> dict[str, str]:
    left = budget
    spent: dict[str, list[str]] = defaultdict(list)
    for h in hits:
        if left <= 0:
            break
        piece = h.text[:left]
        left -= len(piece)
        spent[doc_key(h.source)].append(piece)
    return {d: "\n".join(parts) for d, parts in spent.items()}


def fact_at_budget(hits: Sequence[RankedHit], evidence: Sequence[Evidence], budget: int = 2000) -> float:
    """Mean over the question's facts of the share of each fact's content words found in its document's spent text.
    Facts with no content words are left out; a question with none scores 0."""
    spent = spent_text_by_doc(hits, budget)
    scores = []
    for e in evidence:
        words = content_words(e.text)
        if not words:
            continue
        found = content_words(spent.get(doc_key(e.doc), ""))
        scores.append(len(words & found) / len(words))
    return sum(scores) / len(scores) if scores else 0.0


def _wanted_figures(evidence: Sequence[Evidence], answer: str) -> set[str]:
    return figures(answer) if answer.strip() else set().union(*(figures(e.text) for e in evidence))


def num_at_k(hits: Sequence[RankedHit], evidence: Sequence[Evidence], k: int = 5, answer: str = "") -> float | None:
    """Share of the answer's figures among the number tokens of the top ``k`` hits from a supporting document;
    None when the answer (or, without one, the evidence) holds no figure."""
    wanted = _wanted_figures(evidence, answer)
    if not wanted:
        return None
    docs = {doc_key(e.doc) for e in evidence}
    found: set[str] = set()
    for h in hits[:k]:
        if doc_key(h.source) in docs:
            found |= figures(h.text)
    return len(wanted & found) / len(wanted)


def num_at_budget(hits: Sequence[RankedHit], evidence: Sequence[Evidence], budget: int = 2000,
                  answer: str = "") -> float | None:
    """Share of the answer's figures in the spent text (see :func:`spent_text_by_doc`) of supporting documents."""
    wanted = _wanted_figures(evidence, answer)
    if not wanted:
        return None
    spent = spent_text_by_doc(hits, budget)
    found = set().union(*(figures(spent.get(d, "")) for d in {doc_key(e.doc) for e in evidence}))
    return len(wanted & found) / len(wanted)


def hit_chars(hits: Sequence[RankedHit], k: int = 5) -> float:
    top = hits[:k]
    return sum(len(h.text) for h in top) / len(top) if top else 0.0


@dataclass
class QuestionScore:
    qid: str
    qtype: str
    doc_at_5: float
    mrr_at_10: float
    fact_at_2000: float
    page_at_5: float | None
    num_at_5: float | None = None
    hit_chars: float = 0.0
    num_at_2000: float | None = None


def score_question(qid: str, qtype: str, hits: Sequence[RankedHit], evidence: Sequence[Evidence],
                   answer: str = "") -> QuestionScore:
    return QuestionScore(qid, qtype, doc_at_k(hits, evidence, 5), mrr_at_k(hits, evidence, 10),
                         fact_at_budget(hits, evidence, 2000), page_at_k(hits, evidence, 5),
                         num_at_k(hits, evidence, 5, answer), hit_chars(hits, 5),
                         num_at_budget(hits, evidence, 2000, answer))


def aggregate(scores: Sequence[QuestionScore]) -> dict[str, float | int | None]:
    n = len(scores)
    pages = [s.page_at_5 for s in scores if s.page_at_5 is not None]
    nums = [s.num_at_5 for s in scores if s.num_at_5 is not None]
    nums_spent = [s.num_at_2000 for s in scores if s.num_at_2000 is not None]
    return {
        "questions": n,
        "doc@5": round(sum(s.doc_at_5 for s in scores) / n, 4) if n else 0.0,
        "mrr@10": round(sum(s.mrr_at_10 for s in scores) / n, 4) if n else 0.0,
        "fact@2000": round(sum(s.fact_at_2000 for s in scores) / n, 4) if n else 0.0,
        "page@5": round(sum(pages) / len(pages), 4) if pages else None,
        "num@5": round(sum(nums) / len(nums), 4) if nums else None,
        "num@2000": round(sum(nums_spent) / len(nums_spent), 4) if nums_spent else None,
        "num_questions": len(nums),
        "hit_chars": round(sum(s.hit_chars for s in scores) / n, 1) if n else 0.0,
    }


def aggregate_by_type(scores: Sequence[QuestionScore]) -> dict[str, dict[str, float | int | None]]:
    groups: dict[str, list[QuestionScore]] = defaultdict(list)
    for s in scores:
        groups[s.qtype or "all"].append(s)
    return {t: aggregate(g) for t, g in sorted(groups.items())}
