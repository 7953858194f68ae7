"""Known-harmless lines kept off this process's stderr, at the file-descriptor level (what Ray's C++ core worker
writes bypasses Python's ``sys.stderr`` and its logging).

Why: Ray 2.60's core worker logs one ``E`` line when an actor with ``max_restarts`` > 0 gets constructor arguments
from the object store (ray/src/ray/core_worker/core_worker.cc; ray-project/ray#53727). Ray Data always passes its
map transformer and data context that way (``ray.put``, ray/data/_internal/execution/operators/map_operator.py), and
the conversion actors must be restartable, so no choice of ours avoids it; to a newcomer it reads as a failure. Where
those arguments live is the driver's own object store, alive for the whole run, so the restart it warns about works.

Only whole lines containing one of the given byte strings are dropped; everything else goes through unchanged and in
order. The pipe is drained into the real stderr at exit, after Python has printed a final traceback.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading

# The line Ray prints for every job whose actor stages are restartable (Ray Data's defaults and ours).
RAY_CONSTRUCTOR_ARGS = b"has constructor arguments in the object store and max_restarts > 0"

_installed: "_Filter | None" = None


class _Filter:
    def __init__(self, patterns: tuple[bytes, ...]) -> None:
        self.patterns = patterns
        sys.stderr.flush()
        self.saved = os.dup(2)  # the real stderr, where kept lines go
        read, write = os.pipe()
        os.dup2(write, 2)
        os.close(write)
        self.thread = threading.Thread(target=self._pump, args=(read,), name="stderr-filter", daemon=True)
        self.thread.start()

    def _keep(self, line: bytes) -> bool:
        return not any(p in line for p in self.patterns)

    def _pump(self, read: int) -> None:
        pending = b""
        while True:
            try:
                chunk = os.read(read, 65536)
            except OSError:
                break
            if not chunk:
                break
            *lines, pending = (pending + chunk).split(b"\n")
            kept = b"".join(line + b"\n" for line in lines if self._keep(line))
            if kept:
                os.write(self.saved, kept)
        if pending and self._keep(pending):
            os.write(self.saved, pending)
        os.close(read)

    def close(self) -> None:
        """Give fd 2 its real stderr back and forward what is still in the pipe."""
        try:
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        os.dup2(self.saved, 2)  # the pipe's last write end in this process goes: the pump reads to its end
        self.thread.join(timeout=5)


def drop_stderr_lines(*patterns: bytes) -> None:
    """From now on, for the rest of the process, lines of fd 2 containing any of ``patterns`` are dropped. Once per
    process (a second call adds nothing); meant for a job's driver after ``ray.init``, so the processes Ray starts
    there never hold the pipe."""
    global _installed
    if _installed is not None or not patterns:
        return
    _installed = _Filter(tuple(patterns))
    atexit.register(_installed.close)
