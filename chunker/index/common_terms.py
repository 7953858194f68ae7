"""Query words that nearly every chunk holds: they cost the BM25 search the most and weigh next to nothing, so they
are left out of the BM25 query.

Why: BM25 weighs a term by its rarity, idf = ln(1 + (N - n + 0.5) / (n + 0.5)) for a term in n of N chunks. For a
word in 90 % of the chunks that is at most ln(1.111) = 0.105 (times at most k1 + 1 = 2.2 for its frequency), against
3-10 for the words that tell chunks apart; but its posting list is 90 % of the collection, and Milvus Lite scores
every posting of every query term. On a synthetic 100k-chunk collection one word found in every chunk was 57 % of
the BM25 search's time (BENCHMARKS.md, "Query serving"). A Milvus server's ``drop_ratio_search`` drops the smallest
query weights by itself; Milvus Lite refuses any value but 0 ("only drop_ratio_search=0 is supported", measured).

How common a word is comes from a sample of the collection's BM25 text (:meth:`ChunkStore.sample_search_texts`:
the rows whose chunk ID ends in chosen characters, an even spread over documents because chunk IDs are hashes).
Shares are counted over lowercase words as written; the index stems them, and a stem is at least as common as each
of its words, so a word dropped here is one whose indexed term is at least as common. Only whole words are dropped
(a token with inner punctuation such as "U.S." or "10-K" is kept as it is, since the index tokenizes it its own
way), and a question made only of common words is sent whole.
"""

from __future__ import annotations

import logging
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable

log = logging.getLogger(__name__)

SAMPLE_ROWS = 2000  # enough for a share of 0.9 to within a few points; ~0.7 s of Lite at 100k rows (measured)
REFRESH_S = 600.0  # word shares move slowly as a collection grows; a write through this process refreshes at once
_WORD = re.compile(r"\w+")
_EDGE_PUNCT = "\"'“”‘’()[]{}<>,.;:!?"


def common_words(texts: Iterable[str], share: float) -> frozenset[str]:
    """The lowercase words found in at least ``share`` of ``texts`` (none when there are fewer than 20 texts: too
    few to tell a common word from a small corpus)."""
    texts = list(texts)
    if len(texts) < 20 or share >= 1.0:
        return frozenset()
    df: Counter[str] = Counter()
    for t in texts:
        df.update(set(_WORD.findall(t.lower())))
    need = share * len(texts)
    return frozenset(w for w, n in df.items() if n >= need)


def prune(query: str, common: frozenset[str]) -> str:
    """``query`` without its whitespace-separated tokens that are one common word (edge punctuation aside); the
    query unchanged when nothing would be left or nothing is common."""
    if not common or not query:
        return query
    kept = []
    for token in query.split():
        core = token.strip(_EDGE_PUNCT).lower()
        if core and _WORD.fullmatch(core) and core in common:
            continue
        kept.append(token)
    if not any(_WORD.search(t) for t in kept):
        return query
    return " ".join(kept)


class CommonTerms:
    """The common words of one collection, sampled on first use and again after ``REFRESH_S`` or a write."""

    def __init__(self, sample: Callable[[int], list[str]], share: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._sample = sample
        self.share = share
        self._clock = clock
        self._words: frozenset[str] = frozenset()
        self._made: float | None = None
        self._generation = -1

    def words(self, generation: int) -> frozenset[str]:
        if self.share >= 1.0:
            return frozenset()
        now = self._clock()
        if self._made is None or generation != self._generation or now - self._made >= REFRESH_S:
            try:
                self._words = common_words(self._sample(SAMPLE_ROWS), self.share)
            except Exception as exc:  # noqa: BLE001 - an optimisation: a failed sample leaves the query whole
                log.warning("could not sample the collection's words (BM25 queries go unpruned): %s", exc)
                self._words = frozenset()
            self._made, self._generation = now, generation
        return self._words

    def prune(self, queries: list[str], generation: int) -> list[str]:
        words = self.words(generation)
        return [prune(q, words) for q in queries] if words else list(queries)
