"""CPU seconds by process kind while a step runs: the figure the machine's load does not distort much.

Wall seconds on a shared 2-core machine measure the neighbours as much as the pipeline; the CPU time each process
used does not (contention only adds cache misses and switches). :class:`CpuSampler` reads ``/proc/<pid>/stat`` of
this process and of every Ray process of the local runtime (workers, raylet, GCS, dashboard ...) about once a second
in a thread (only this process's descendants: the local runtime it started), keeps the last reading of each pid (a worker that exits keeps what it used up to its last reading), and
sums user+system seconds by kind: the driver, each stage's actors by their class name, Ray Data's tasks, idle
workers and Ray's own daemons. Linux only; elsewhere it reports nothing.
"""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path
from typing import Any

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_STAGE = re.compile(r"MapBatches\((\w+)\)")


def kind_of(cmdline: str) -> str | None:
    """The process kind a command line belongs to, or None for processes that are not this run's Ray processes."""
    if cmdline.startswith("ray::"):
        m = _STAGE.search(cmdline)
        if m:
            return f"actor:{m.group(1)}"
        name = cmdline[5:].split()[0] if len(cmdline) > 5 else ""
        return "ray:idle_workers" if name.startswith("IDLE") else f"ray:task:{name.split('(')[0][:40]}"
    for daemon in ("raylet", "gcs_server", "dashboard", "log_monitor", "monitor.py", "runtime_env", "ray_client"):
        if daemon in cmdline.split(" ")[0] or f"/{daemon}" in cmdline[:300]:
            return f"ray:{daemon}"
    return None


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, user+system CPU seconds) of a process, or None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / _TICK  # ppid; utime + stime


def _children(pid: int) -> list[int]:
    """Child pids of every thread of ``pid`` (a thread or process that just ended has none)."""
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    out: list[int] = []
    for tid in tasks:
        try:
            out += [int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
        except OSError:
            continue
    return out


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


class CpuSampler:
    """``with CpuSampler() as s: ...`` then ``s.report()``: CPU seconds by process kind used during the block."""

    def __init__(self, interval_s: float = 1.0) -> None:
        self.interval_s = interval_s
        self.me = os.getpid()
        self.base: dict[int, float] = {}  # CPU seconds a process had used before the block started
        self.last: dict[int, tuple[str, float]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.enabled = Path("/proc/self/stat").exists()
        self.wall_s = 0.0
        self.own_cpu_s = 0.0  # the sampler's own CPU seconds (it runs in the sampled process)
        # The kernel's children files (CONFIG_PROC_CHILDREN), else one pass over every process per scan.
        self.walk = Path(f"/proc/{self.me}/task/{self.me}/children").exists()

    def _scan(self, first: bool = False) -> None:
        c0 = time.thread_time()
        # Only this process and its descendants: the Ray runtime it started (daemons and workers), not another job's.
        # Walked down through /proc/<pid>/task/<tid>/children where the kernel has it: reading every process's stat
        # on a busy machine cost the sampled process more CPU than the steps it was measuring.
        if not self.walk:
            stats, mine = self._scan_all()
        else:
            stats, mine, todo = {}, set(), [self.me]
            while todo:
                pid = todo.pop()
                st = _stat(pid)
                if st is None or pid in mine:
                    continue
                stats[pid] = st
                mine.add(pid)
                todo.extend(_children(pid))
        for pid in mine:
            known = self.last.get(pid)
            if pid == self.me:
                kind: str | None = "driver"
            elif known is not None and known[0].startswith("actor:"):
                kind = known[0]
            else:  # an idle worker renames itself when it becomes an actor or runs a task: read its name again
                kind = kind_of(_cmdline(pid)) or (known[0] if known else "other")
            cpu = stats[pid][1]
            if first:
                self.base[pid] = cpu
            self.last[pid] = (kind or "other", cpu)
        self.own_cpu_s += time.thread_time() - c0

    def _scan_all(self) -> tuple[dict[int, tuple[int, float]], set[int]]:
        stats = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                st = _stat(int(entry))
                if st is not None:
                    stats[int(entry)] = st
        children: dict[int, list[int]] = {}
        for pid, (ppid, _) in stats.items():
            children.setdefault(ppid, []).append(pid)
        mine, todo = set(), [self.me]
        while todo:
            pid = todo.pop()
            if pid in stats and pid not in mine:
                mine.add(pid)
                todo.extend(children.get(pid, []))
        return stats, mine

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._scan()

    def __enter__(self) -> "CpuSampler":
        if self.enabled:
            self._t0 = time.perf_counter()
            self._scan(first=True)
            self._thread = threading.Thread(target=self._loop, name="cpu-sampler", daemon=True)
            self._thread.start()
        return self

    def sample(self) -> None:
        """One more reading now (call it before the processes of interest exit, e.g. before ``ray.shutdown``)."""
        if self.enabled:
            self._scan()

    def __exit__(self, *exc: Any) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._scan()
            self.wall_s = time.perf_counter() - self._t0

    def report(self) -> dict[str, Any]:
        by_kind: dict[str, float] = {}
        count: dict[str, int] = {}
        for pid, (kind, cpu) in self.last.items():
            by_kind[kind] = by_kind.get(kind, 0.0) + cpu - self.base.get(pid, 0.0)
            count[kind] = count.get(kind, 0) + 1
        total = sum(by_kind.values())
        return {"cpu_s_by_process": {k: round(v, 2) for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1])},
                "processes": count, "cpu_s_total": round(total, 2), "wall_s": round(self.wall_s, 2),
                "sampler_cpu_s": round(self.own_cpu_s, 3)}


# Every kind thread_kind answers. A window reports each of them, 0.0 when none of its threads was read inside it:
# a short window (or one on a loaded machine, where the sampler's thread runs late) may fall between two readings
# of a thread that lives only while documents are written, and a figure must not vanish because of that.
THREAD_KINDS = ("driver thread", "writer threads", "ray data", "benchmark", "other")


def thread_kind(name: str) -> str:
    """The part of a driver process a thread belongs to, by its name (Python's, else the kernel's comm); one of
    :data:`THREAD_KINDS`."""
    if name == "MainThread":
        return "driver thread"
    if name.startswith(("writer-", "ledger")):
        return "writer threads"
    if name.startswith(("StreamingExecutor", "iter_threaded", "ray-data", "ray_data")):
        return "ray data"
    if name.startswith(("cpu-sampler", "thread-sampler")):
        return "benchmark"
    return "other"


class ThreadSampler:
    """CPU seconds of each thread of this process over time (``/proc/self/task``), read every ``interval_s``: which
    part of the driver (its thread, the writer's threads, Ray Data's executor) used the CPU in a time window. A
    thread that has ended keeps the seconds of its last reading."""

    def __init__(self, interval_s: float = 1.0) -> None:
        self.interval_s = interval_s
        self.samples: list[tuple[float, dict[str, float]]] = []  # (perf_counter, CPU s by thread name)
        self.threads: dict[int, tuple[str, float]] = {}  # tid -> (name, CPU s at its last reading)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.enabled = Path("/proc/self/task").exists()

    def _update(self) -> None:
        names = {t.native_id: t.name for t in threading.enumerate() if t.native_id is not None}
        for tid in os.listdir("/proc/self/task"):
            try:
                base = Path(f"/proc/self/task/{tid}")
                fields = (base / "stat").read_text().rsplit(")", 1)[1].split()
                known = self.threads.get(int(tid))
                name = names.get(int(tid)) or (known[0] if known else (base / "comm").read_text().strip())
            except (OSError, IndexError):
                continue
            self.threads[int(tid)] = (name, (int(fields[11]) + int(fields[12])) / _TICK)

    def read(self, by_name: bool = False) -> dict[str, float]:
        """CPU seconds of every thread seen so far, by kind (``by_name``: by thread name)."""
        self._update()
        out: dict[str, float] = {}
        for name, cpu in self.threads.values():
            key = name if by_name else thread_kind(name)
            out[key] = out.get(key, 0.0) + cpu
        return out

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.samples.append((time.perf_counter(), self.read(by_name=True)))

    def __enter__(self) -> "ThreadSampler":
        if self.enabled:
            self.samples.append((time.perf_counter(), self.read(by_name=True)))
            self._thread = threading.Thread(target=self._loop, name="thread-sampler", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self.samples.append((time.perf_counter(), self.read(by_name=True)))

    def between(self, t0: float, t1: float, by_name: bool = False) -> dict[str, float]:
        """CPU seconds by thread kind (or name) between perf_counter times ``t0`` and ``t1`` (interpolated between
        samples). By kind, every one of :data:`THREAD_KINDS` is there, 0.0 where no thread of it was read. A window
        of a few ``interval_s`` or less is interpolated from readings taken mostly outside it."""
        a, b = self._at(t0), self._at(t1)
        out: dict[str, float] = {} if by_name else dict.fromkeys(THREAD_KINDS, 0.0)
        for name in set(a) | set(b):
            key = name if by_name else thread_kind(name)
            out[key] = out.get(key, 0.0) + max(0.0, b.get(name, 0.0) - a.get(name, 0.0))
        return {k: round(v, 3) for k, v in sorted(out.items(), key=lambda kv: -kv[1])}

    def _at(self, t: float) -> dict[str, float]:
        s = self.samples
        if not s:
            return {}
        if t <= s[0][0]:
            return s[0][1]
        for (ta, va), (tb, vb) in zip(s, s[1:]):
            if ta <= t <= tb:
                w = (t - ta) / (tb - ta) if tb > ta else 0.0
                return {k: va.get(k, 0.0) + w * (vb.get(k, 0.0) - va.get(k, 0.0)) for k in set(va) | set(vb)}
        return s[-1][1]
