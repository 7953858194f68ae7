"""Driver-side progress: a status line every few seconds and Prometheus counters through ``ray.util.metrics``.

Ray Data's own progress bars still show per-operator progress; this line says what a user of a million-page run
wants to know (documents done / failed, pages/s, tokens/s) and keeps printing while the pipeline is busy, because it
runs on its own thread rather than between rows.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

log = logging.getLogger("jobs.progress")


class _Metrics:
    """The exported counters (scraped from each node's metrics agent, prefixed ``ray_`` by Ray)."""

    def __init__(self) -> None:
        from ray.util.metrics import Counter as RayCounter

        self.documents = RayCounter("chunker_documents_total", description="Documents finished, by status.",
                                    tag_keys=("status",))
        self.pages = RayCounter("chunker_pages_total", description="Pages converted.")
        self.tokens = RayCounter("chunker_tokens_total", description="Model output tokens.")
        self.chunks = RayCounter("chunker_chunks_total", description="Chunks written to Milvus.")


class Progress:
    def __init__(self, interval_s: float, export_metrics: bool = True,
                 emit: Callable[[str], None] | None = None) -> None:
        self.interval_s = interval_s
        self.emit = emit or (lambda line: print(line, flush=True))
        self.docs: Counter[str] = Counter()
        self.pages = 0
        self.tokens = 0
        self.chunks = 0
        self.t0 = time.perf_counter()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.metrics: _Metrics | None = None
        if export_metrics:
            try:
                self.metrics = _Metrics()
            except Exception as exc:  # metrics are a convenience: a runtime without them still ingests
                log.warning("metrics not exported: %s", exc)

    def segment(self, pages: int, tokens: int) -> None:
        with self._lock:
            self.pages += pages
            self.tokens += tokens
        if self.metrics:
            if pages:
                self.metrics.pages.inc(pages)
            if tokens:
                self.metrics.tokens.inc(tokens)

    def written(self, chunks: int) -> None:
        with self._lock:
            self.chunks += chunks
        if self.metrics and chunks:
            self.metrics.chunks.inc(chunks)

    def document(self, status: str) -> None:
        with self._lock:
            self.docs[status] += 1
        if self.metrics:
            self.metrics.documents.inc(1, tags={"status": status})

    def line(self) -> str:
        with self._lock:
            dt = max(1e-9, time.perf_counter() - self.t0)
            d = dict(self.docs)
            pages, tokens, chunks = self.pages, self.tokens, self.chunks
        done = sum(d.values())
        return (f"[ingest {dt:7.0f} s] documents {done} (ok {d.get('ok', 0)}, partial {d.get('partial', 0)}, "
                f"failed {d.get('failed', 0)}, skipped {d.get('skipped', 0)})  pages {pages} ({pages / dt:.2f}/s)  "
                f"tokens {tokens} ({tokens / dt:.0f}/s)  chunks {chunks}")

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.emit(self.line())

    def __enter__(self) -> "Progress":
        self._thread = threading.Thread(target=self._loop, name="ingest-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.emit(self.line())
