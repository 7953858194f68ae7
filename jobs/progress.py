"""Driver-side progress: one status line and Prometheus counters through ``ray.util.metrics``.

The line says what a user of a run wants to know (documents done of how many, pages, chunks, pages/s, an estimate
of the time left) and runs on its own thread rather than between rows, so it keeps moving while the pipeline is busy.
On a terminal it is one line rewritten in place about once a second; elsewhere (a log file, ``ray job logs``) it is
a new line every ``interval_s``. The final line is always printed.

Pages count as they are converted, not when a segment reaches the driver (a 64-page segment of a VLM run takes
minutes, and then still goes through planning and embedding): each conversion actor's :class:`PageTally` publishes
its pages to Ray's key-value store about once a second, and :class:`ConvertedPages` sums them for the line. Chunks
count as they are committed to the store (chunker.run.writer).
"""

from __future__ import annotations

import hashlib
import logging
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any, TextIO

from chunker.types import ConvertedBatch

log = logging.getLogger("jobs.progress")
LIVE_INTERVAL_S = 1.0
KV_NAMESPACE = "vision-chunker-progress"
TALLY_INTERVAL_S = 1.0  # how often an actor publishes: the line's own pace, at one small write per actor


def run_key(out_uri: str, cfg_hash: str) -> str:
    """What a run's tallies are filed under: its output and config (shards, and runs side by side, apart)."""
    return hashlib.sha256(f"{out_uri}\0{cfg_hash}".encode("utf-8", "surrogateescape")).hexdigest()[:16]


class PageTally:
    """In a conversion actor: the pages it has converted, each batch counted the moment it is done (an overlap batch,
    converted only to prime its context, is not a page of the document's). Called from the actor's event loop and
    from converter threads alike."""

    def __init__(self, run: str, interval_s: float = TALLY_INTERVAL_S) -> None:
        self.key = f"{run}/{uuid.uuid4().hex}".encode()  # one key per actor: no read-modify-write between actors
        self.interval_s = interval_s
        self.pages = 0
        self._lock = threading.Lock()
        self._sent = 0
        self._sent_at = 0.0

    def __call__(self, batch: ConvertedBatch) -> None:
        if batch.context_only:
            return
        with self._lock:
            self.pages += batch.page_end - batch.page_start + 1
            due = time.monotonic() - self._sent_at >= self.interval_s
        if due:
            self.flush()

    def flush(self) -> None:
        """Publish the count now (at the end of each segment, so its last pages never wait for the next batch)."""
        with self._lock:
            pages, self._sent_at = self.pages, time.monotonic()
            if pages == self._sent:
                return
            self._sent = pages
        try:
            from ray.experimental.internal_kv import _internal_kv_put

            _internal_kv_put(self.key, str(pages).encode(), overwrite=True, namespace=KV_NAMESPACE)
        except Exception as exc:  # noqa: BLE001 - the line is a convenience; outside Ray (tests, rechunk) nothing to tell
            log.debug("page tally not published: %s", exc)


class ConvertedPages:
    """In the driver: the pages every conversion actor of the run has converted so far."""

    def __init__(self, run: str) -> None:
        self.prefix = f"{run}/".encode()

    def __call__(self) -> int:
        from ray.experimental.internal_kv import _internal_kv_get, _internal_kv_list

        keys = _internal_kv_list(self.prefix, namespace=KV_NAMESPACE)
        return sum(int(_internal_kv_get(k, namespace=KV_NAMESPACE) or 0) for k in keys)

    def clear(self) -> None:
        from ray.experimental.internal_kv import _internal_kv_del

        _internal_kv_del(self.prefix, del_by_prefix=True, namespace=KV_NAMESPACE)


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
                 stream: TextIO | None = None, converted: ConvertedPages | None = None) -> None:
        self.stream = stream or sys.stdout
        self.live = (emit is None and _isatty(self.stream)) if live is None else live
        self.interval_s = LIVE_INTERVAL_S if self.live else interval_s
        self.emit = emit or self._print
        self.total = total
        self.docs: Counter[str] = Counter()
        self.pages = 0
        self.tokens = 0
        self.chunks = 0
        self.converted = converted  # pages converted so far, read on the line's own thread (poll)
        self.converted_pages = 0
        self.finished = False  # the pipeline is done: the driver's own count is exact (no actor retried twice)
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
            if not self.finished:
                pages = max(pages, self.converted_pages)
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

    def poll(self) -> None:
        """Read the conversion actors' page count (a few small reads from Ray's GCS; never stops the line)."""
        if self.converted is None:
            return
        try:
            pages = self.converted()
        except Exception as exc:  # noqa: BLE001 - the line goes on with the driver's own count
            log.debug("converted pages not read: %s", exc)
            return
        with self._lock:
            self.converted_pages = max(self.converted_pages, pages)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.poll()
            self.emit(self.line())

    def __enter__(self) -> "Progress":
        self._thread = threading.Thread(target=self._loop, name="ingest-progress", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.finished = True
        if self.converted is not None:
            try:
                self.converted.clear()
            except Exception as exc_:  # noqa: BLE001 - leftovers in the GCS go with the runtime
                log.debug("page tallies not cleared: %s", exc_)
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
