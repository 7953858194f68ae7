"""The job's request to the autoscaler: asked once, kept alive while the job needs it, withdrawn on every way out.

Ray has one cluster-wide request slot (``ray.autoscaler.sdk.request_resources``: each call replaces the last, from
any process), and Ray Data 2.60 writes it too: its default cluster autoscaler starts a detached coordinator actor
(ray/data/_internal/cluster_autoscaler/default_autoscaling_coordinator.py) that merges the bundles of every requester
registered with it and sends them every 20 s and on any requester's start or cancel, ``[]`` when none is left. A
request made beside it lives at most 20 s; two jobs (or shards) asking on their own overwrite each other, and the
one that finishes first withdraws the other's.

So the job registers with that coordinator as one more requester (its own id, low priority: Ray Data's pipelines
reserve first), and re-asserts its bundles from a thread every few seconds with an expiry: the coordinator keeps it
in every request it sends, several jobs' requests add up, and a job killed outright (SIGKILL) loses its request
when the expiry passes. Where the coordinator is not there to use (another Ray version), the job falls back to
``request_resources`` itself, re-asserted on the same clock, and ``[]`` when withdrawn.

The request is withdrawn when the job's pipelines have started (their own Ray Data requesters ask for what they run,
and the coordinator would otherwise count this request against their share), and in any case when the job ends:
success, an error, or ``ray job stop`` (SIGTERM, turned into an exit by :func:`exit_on_sigterm`). A job
killed outright loses it when its expiry passes.
"""

from __future__ import annotations

import logging
import signal
import threading
import uuid
from typing import Any

log = logging.getLogger("jobs.claim")

REASSERT_S = 5.0  # how often a standing request is sent again
EXPIRE_S = 60.0  # how long the coordinator keeps a request nobody re-asserts (a job killed outright)


class Claim:
    """One job's standing request for ``bundles`` (:meth:`ask`), re-asserted until :meth:`withdraw`."""

    def __init__(self, name: str = "") -> None:
        self.requester = f"vision-chunker-{name or uuid.uuid4().hex[:12]}"
        self.bundles: list[dict[str, float]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._coordinator: Any = None
        self._via_coordinator: bool | None = None  # decided at the first send

    @property
    def standing(self) -> bool:
        return bool(self.bundles)

    def ask(self, bundles: list[dict[str, float]]) -> None:
        """Stand on ``bundles`` from now until :meth:`withdraw` (an empty list withdraws)."""
        if not bundles:
            self.withdraw()
            return
        with self._lock:
            self.bundles = [dict(b) for b in bundles]
            self._send()
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._keep, name="autoscaler-claim", daemon=True)
            self._thread.start()

    def withdraw(self) -> None:
        """Take the request back (idempotent; never raises: it runs on the way out of failures)."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=2 * REASSERT_S)
        with self._lock:
            if not self.bundles:
                return
            self.bundles = []
            try:
                self._cancel()
            except Exception as exc:  # noqa: BLE001 - the expiry (or the coordinator's next tick) ends it anyway
                log.warning("autoscaler request %s not withdrawn (%s); it expires within %.0f s", self.requester,
                            exc, EXPIRE_S)

    def __call__(self, bundles: list[dict[str, float]]) -> None:
        """The ``request`` callable of :func:`chunker.run.autoscale.fit_cluster`."""
        self.ask(bundles)

    def __enter__(self) -> "Claim":
        return self

    def __exit__(self, *exc: object) -> None:
        self.withdraw()

    def _keep(self) -> None:
        while not self._stop.wait(REASSERT_S):
            with self._lock:
                if not self.bundles:
                    return
                try:
                    self._send()
                except Exception as exc:  # noqa: BLE001 - try again on the next beat
                    log.warning("autoscaler request %s not re-asserted: %s", self.requester, exc)

    def _send(self) -> None:
        if self._via_coordinator is None:
            self._coordinator = _coordinator()
            self._via_coordinator = self._coordinator is not None
        if self._via_coordinator:
            from ray.data._internal.cluster_autoscaler.base_autoscaling_coordinator import ResourceRequestPriority

            self._coordinator.request_resources.remote(requester_id=self.requester, resources=self.bundles,
                                                       expire_after_s=EXPIRE_S,
                                                       priority=ResourceRequestPriority.LOW)
        else:
            from ray.autoscaler.sdk import request_resources

            request_resources(bundles=self.bundles)

    def _cancel(self) -> None:
        if self._via_coordinator:
            import ray

            # Waited for (briefly): a job about to exit must not leave before the coordinator has heard it.
            ray.get(self._coordinator.cancel_request.remote(self.requester), timeout=10)
        elif self._via_coordinator is False:
            from ray.autoscaler.sdk import request_resources

            request_resources(bundles=[])


def _coordinator() -> Any:
    """Ray Data's autoscaling coordinator actor (created if no pipeline made it yet), or None where this Ray has
    none (an internal module: its absence, or another shape, sends the job to the plain request)."""
    try:
        from ray.data._internal.cluster_autoscaler.default_autoscaling_coordinator import (
            get_or_create_autoscaling_coordinator)

        return get_or_create_autoscaling_coordinator()
    except Exception as exc:  # noqa: BLE001 - any failure here only costs the merging
        log.warning("Ray Data's autoscaling coordinator is not usable (%s); asking the autoscaler directly", exc)
        return None


def exit_on_sigterm() -> None:
    """``ray job stop`` sends SIGTERM to the job's processes (and SIGKILL a few seconds later): make it an exit that
    runs the ``finally`` blocks on its way out (the request withdrawn, the store closed), with a line saying so.
    Called after ``ray.init``, which installs a handler of its own (``sys.exit(signum)``, ray/_private/worker.py
    ``init``); in the main thread only, where signal handlers live."""
    if threading.current_thread() is not threading.main_thread():
        return

    def stop(signum: int, _frame: object) -> None:
        log.warning("stopped (signal %d): withdrawing the autoscaler request and closing the run", signum)
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
