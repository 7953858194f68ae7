"""A small cache of finished answers: a repeated question is answered without embedding or searching.

An entry is served only while three things hold:

- it is younger than ``ttl_s``: the bound on staleness against writers in *other* processes (an ingest job writing
  into the collection a Serve replica reads), which this process cannot see;
- the store's write generation is the one it was made under: a write through this process's
  :class:`~chunker.index.store.ChunkStore` (upsert, delete, drop, ``mark_changed``) makes every older entry stale
  at once, so a process that writes and then reads never reads an answer from before its write;
- it is among the ``size`` most recently used (LRU): memory stays bounded whatever the traffic.

Why not ask the store whether the collection changed? Milvus offers no cheap change marker: the row count misses
an upsert that replaces rows one for one, and on Milvus Lite counting walks every row in Python (as each search
does), so a check per question would cost what a cached answer saves.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")


def normalise_question(question: str) -> str:
    """The question as a cache key: outer and repeated whitespace do not change an answer (the embedder's tokenizer
    and the BM25 analyzers split on whitespace), letter case may (a cased analyzer or cross-encoder), so it stays."""
    return " ".join(question.split())


class ResultCache(Generic[V]):
    """LRU of values by key, each valid for ``ttl_s`` seconds and for one store generation; size 0 turns it off.

    Used by one thread at a time, as the :class:`~chunker.index.retrieval.Retriever` that owns it is."""

    def __init__(self, size: int, ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.size = max(0, int(size))
        self.ttl_s = float(ttl_s)
        self._clock = clock
        self._entries: OrderedDict[Hashable, tuple[float, int, V]] = OrderedDict()  # key -> (made at, generation, value)
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Hashable, generation: int) -> V | None:
        if not self.size:
            return None
        entry = self._entries.get(key)
        if entry is not None and entry[1] == generation and self._clock() - entry[0] < self.ttl_s:
            self._entries.move_to_end(key)
            self.hits += 1
            return entry[2]
        if entry is not None:
            del self._entries[key]  # stale: gone now rather than at eviction
        self.misses += 1
        return None

    def put(self, key: Hashable, generation: int, value: V) -> None:
        """Keep ``value`` under ``key``; ``generation`` is the store's as read *before* the search began, so an answer
        raced by a write is stale on arrival."""
        if not self.size:
            return
        self._entries[key] = (self._clock(), generation, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)

    def clear(self) -> None:
        self._entries.clear()
