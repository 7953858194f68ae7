"""Driver-side progress: one status line and Prometheus counters through ``ray.util.metrics``.

The line says what a user of a run wants to know (documents done of how many, pages, chunks, pages/s, an estimate
of the time left) and runs on its own thread rather than between rows, so it keeps moving while the pipeline is busy.
On a terminal it is one line rewritten in place about once a second; elsewhere (a log file, ``ray job logs``) it is
a new line every ``interval_s``. The final line is always printed.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, TextIO

log = logging.getLogger("jobs.progress")
LIVE_INTERVAL_S = 1.0


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
    """``total`` is the number of input files when the driver listed them (none for a manifest read by Ray: no ETA).
    ``live`` (default: the stream is a terminal) rewrites one line in place; ``emit`` replaces printing (tests)."""

    def __init__(self, interval_s: float, export_metrics: bool = True,
                 emit: Callable[[str], None] | None = None, total: int | None = None, live: bool | None = None,
                 stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stdout
        self.live = (emit is None and _isatty(self.stream)) if live is None else live
        self.interval_s = LIVE_INTERVAL_S if self.live else interval_s
        self.emit = emit or self._print
        self.total = total
        self.docs: Counter[str] = Counter()
        self.pages = 0
        self.tokens = 0
        self.chunks = 0
        self.t0 = time.perf_counter()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._width = 0
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
        of = f"/{self.total}" if self.total is not None else ""
        bad = ", ".join(f"{k} {d[k]}" for k in ("partial", "failed", "skipped") if d.get(k))
        text = (f"[ingest {_clock(dt)}] documents {done}{of}{f' ({bad})' if bad else ''}  pages {pages} "
                f"({pages / dt:.1f}/s)  chunks {chunks}")
        if tokens:
            text += f"  tokens/s {tokens / dt:.0f}"
        if self.total and 0 < done < self.total:
            text += f"  ETA {_clock(dt * (self.total - done) / done)}"
        return text

    def _print(self, text: str) -> None:
        if self.live:
            pad = max(0, self._width - len(text))
            self._width = len(text)
            self.stream.write("\r" + text + " " * pad)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

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
        if self.live and self.emit == self._print:
            self.stream.write("\n")
            self.stream.flush()


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _clock(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 60}:{s % 60:02d}" if s >= 60 else f"{s} s"
