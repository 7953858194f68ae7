"""``jobs.ingest`` with ``converter.backend=vllm`` through Ray Data, the real engine inside the conversion actor.

One Ray runtime for the module (sized as CI's two cores allow: 4 logical CPUs, one conversion actor at 0.5 CPU, so
the intake tasks always find a CPU). The clean run comes first and is the reference of the second, in which the
engine's core process (``VLLM::EngineCore``, a child of the conversion actor) is killed twice from this process:
once while the engine starts, once while a segment converts. Each kill is a real ``SIGKILL`` of a core whose parent
is a worker of this module's own raylet, found by reading ``/proc`` when the run reaches that point (by its
process name, or by the pid vLLM writes into the actor's log).
"""

from __future__ import annotations

import json
import os
import re
import signal
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from engine_support import MAX_NUM_SEQS, MAX_SIDE_PX

pytestmark = [pytest.mark.ray, pytest.mark.slow]
REPO_ROOT = Path(__file__).resolve().parents[2]
MODEL_NAME = "tiny-qwen2.5-vl"
# vLLM titles its core process VLLM::EngineCore (vllm/utils/system_utils.py); the kernel keeps 15 bytes of it.
ENGINE_CORE = "EngineCor"
SHUTDOWN_WAIT_S = 120.0
# The start-up kill lands this long after the core is first seen: it is loading then (tens of seconds here).
START_UP_KILL_AFTER_S = 2.0
# vLLM prefixes its core's log lines with the process's name and pid: "(EngineCore pid=7700) INFO ...".
CORE_LOG_PID = re.compile(rb"\(EngineCore[^ )]* pid=(\d+)\)")


@pytest.fixture(scope="module")
def ray_runtime():
    import ray

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    # address="local": a runtime of our own, even when a `ray start` cluster runs on this machine.
    ray.init(address="local", num_cpus=4, include_dashboard=False, ignore_reinit_error=True, log_to_driver=False)
    yield Path(ray._private.worker._global_node.get_logs_dir_path())  # noqa: SLF001 - no public getter
    ray.shutdown()


def _cfg(model_dir: Path, db: Path):
    from chunker.config import load_config

    return load_config(REPO_ROOT / "configs" / "local.yaml", [
        "converter.backend=vllm", f"converter.model.name={MODEL_NAME}", f"converter.model.path={model_dir}",
        "converter.model.device=cpu", "converter.model.dtype=float32", "converter.model.gpu_memory_utilization=0.1",
        "converter.model.max_model_len=4096", f"converter.model.max_num_seqs={MAX_NUM_SEQS}",
        "converter.model.max_output_tokens=48", f"render.max_side_px={MAX_SIDE_PX}",
        "converter.retry_temperatures=[0.1]",  # one attempt per batch, then one per page
        f"milvus.uri={db}", "ray.convert_actors=1", "ray.convert_concurrency=4", "ray.status_interval_s=10",
    ])


def _proc(pid: int) -> tuple[str, int, str] | None:
    """(name, parent pid, state) of a process, read from ``/proc`` (None once it is gone). The name is
    ``/proc/<pid>/comm``, the title's first 15 bytes (setproctitle, which vLLM and Ray both use, sets it too). Not
    ``cmdline``: the kernel reads that out of the process's memory under its memory-map lock, so a read can wait on a
    process busy mapping memory (vLLM's worker allocating its KV cache); ``comm`` and ``stat`` are read without
    touching the process's memory."""
    try:
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # gone meanwhile
        return None
    fields = stat[stat.rfind(")") + 2:].split()  # (the name in stat is in parentheses and may hold spaces)
    return comm, int(fields[1]), fields[0]


def _processes() -> dict[int, tuple[str, int, str]]:
    procs = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (p := _proc(int(name))) is not None:
            procs[int(name)] = p
    return procs


def _raylet_pid() -> int:
    import ray
    from ray._private import ray_constants

    node = ray._private.worker._global_node  # noqa: SLF001 - no public getter for the local node's processes
    return node.all_processes[ray_constants.PROCESS_TYPE_RAYLET][0].process.pid


def _worker_of(pid: int, raylet: int, procs: dict[int, tuple[str, int, str]]) -> int | None:
    """The worker of ``raylet`` (its child) that ``pid`` descends from, at most a few generations down; None when
    ``pid`` is not below that raylet. Any depth, so an intermediate process between worker and core would not hide
    it (that was not the cause of the watcher's empty runs: one failed with this rule too)."""
    chain = [pid]
    while chain[-1] in procs and len(chain) < 8:
        parent = procs[chain[-1]][1]
        if parent == raylet:
            return chain[-1] if len(chain) > 1 else None
        chain.append(parent)
    return None


def _engine_cores(raylet: int, procs: dict[int, tuple[str, int, str]] | None = None) -> list[int]:
    """Engine core processes below a worker of ``raylet`` (a conversion actor of this module's runtime): not the
    session's in-process engine of the other tests, whose core is a child of this process, and not a core of another
    Ray runtime on the machine. Found by walking up from the core to the raylet, not by being this process's
    descendant (the way CI's killed run once saw no core at all, cause unproven; ``seen`` notes each core's parent
    and whether it was below this process)."""
    procs = _processes() if procs is None else procs
    # (A killed core stays a zombie until its actor reaps it: not a core any more.)
    return [pid for pid, (comm, _, state) in procs.items()
            if ENGINE_CORE in comm and state != "Z" and _worker_of(pid, raylet, procs) is not None]


def _below(pid: int, ancestor: int, procs: dict[int, tuple[str, int, str]]) -> bool:
    while pid in procs and pid != ancestor:
        pid = procs[pid][1]
    return pid == ancestor


def _ray_and_vllm(raylet: int, procs: dict[int, tuple[str, int, str]]) -> list[str]:
    """What a watcher that found no core saw: every process of this raylet, of Ray or of vLLM, with its parent."""
    return sorted(f"{pid} {comm!r} [{state}] parent {ppid} {procs.get(ppid, ('?',))[0]!r}"
                  for pid, (comm, ppid, state) in procs.items()
                  if ppid == raylet or comm.startswith(("ray::", "VLLM", "raylet")) or ENGINE_CORE in comm)


def _wait_no_engine_core(watcher: "Watcher", timeout_s: float) -> list:
    """Waits for this raylet's engine cores to go, those found by name and those the actors' logs named."""
    deadline = time.monotonic() + timeout_s
    while (cores := watcher.cores()) and time.monotonic() < deadline:
        time.sleep(0.5)
    return cores


def _actor_logs(logs: Path, since: float) -> str:
    """The worker logs of conversion actors written since ``since`` (both streams: vLLM logs to stdout)."""
    text = []
    for f in sorted(logs.glob("worker-*")):
        if f.suffix in (".out", ".err") and f.stat().st_mtime >= since:
            body = f.read_text(errors="replace")
            if "ConvertStage" in body:
                text.append(f"== {f.name}\n{body}")
    return "\n".join(text)


def _doc_chunks(out: Path) -> dict[str, list[str]]:
    by_doc: dict[str, list[str]] = defaultdict(list)
    for c in pq.read_table(out / "chunks").to_pylist():
        by_doc[c["source"]].append(c["chunk_id"])
    return {k: sorted(v) for k, v in by_doc.items()}


def _store_ids(cfg) -> set[str]:
    from chunker.index.store import ChunkStore

    with ChunkStore(cfg.milvus, 384) as store:
        return store.chunk_ids()


def _by_source(problems: list[dict]) -> list[dict]:
    return sorted(problems, key=lambda p: (p["source"], p.get("code", ""), p.get("reason", "")))


def _outcomes(out: Path) -> dict[str, str]:
    return {d["source"]: d["status"] for d in pq.read_table(out / "documents").to_pylist()}


class Watcher(threading.Thread):
    """Polls ``/proc`` for this runtime's engine cores while a run goes on and keeps every core seen in ``seen``,
    how many polls it made, the slowest poll, the last process list in which it saw no core, and any error that
    ended it: a run in which a watcher found nothing says what there was to find."""

    def __init__(self, raylet: int, logs: Path) -> None:
        super().__init__(daemon=True)
        self.raylet = raylet
        self.logs = logs
        self.read_to: dict[Path, int] = {}  # worker log -> bytes read so far
        self.logged: dict[int, str] = {}  # core pid named in an actor's log -> its /proc name when first seen
        self.stop = threading.Event()
        self.t0 = time.monotonic()
        self.started_at = time.time()
        # pid -> [parent's name, first seen s, gone at s or None, below this process]
        self.seen: dict[int, list] = {}
        self.polls = 0
        self.slowest_poll_s = 0.0
        self.last_without_core: list[str] = []
        self.error: str | None = None

    def _logged_cores(self, procs: dict[int, tuple[str, int, str]]) -> list[int]:
        """Cores named in the actors' logs since the watch began that are alive below this raylet: a second way
        to find the core, by what vLLM says of it rather than by its process name (CI's watchers twice saw no
        core by name in a run whose actor log shows one running for 30 s)."""
        for f in self.logs.glob("worker-*.out"):
            try:
                if f.stat().st_mtime < self.started_at:
                    continue
                with f.open("rb") as fh:
                    fh.seek(self.read_to.get(f, 0))
                    text = fh.read()
            except OSError:
                continue
            self.read_to[f] = self.read_to.get(f, 0) + len(text)
            for m in CORE_LOG_PID.finditer(text):
                pid = int(m.group(1))
                if pid in procs:
                    self.logged.setdefault(pid, procs[pid][0])
        return [pid for pid in self.logged if pid in procs and procs[pid][2] != "Z"
                and _worker_of(pid, self.raylet, procs) is not None]

    def cores(self) -> list[int]:
        started = time.monotonic()
        procs = _processes()
        cores = _engine_cores(self.raylet, procs)
        cores += [pid for pid in self._logged_cores(procs) if pid not in cores]
        now = round(time.monotonic() - self.t0, 1)
        for pid in cores:
            self.seen.setdefault(pid, [procs[procs[pid][1]][0], now, None, _below(pid, os.getpid(), procs)])
        for pid, note in self.seen.items():
            if pid not in cores and note[2] is None:
                note[2] = now
        if not cores:
            self.last_without_core = _ray_and_vllm(self.raylet, procs)
        self.polls += 1
        self.slowest_poll_s = max(self.slowest_poll_s, time.monotonic() - started)
        return cores

    def report(self) -> dict:
        return {"seen": self.seen, "named in logs (pid: /proc name)": self.logged, "polls": self.polls,
                "slowest_poll_s": round(self.slowest_poll_s, 2),
                "raylet": self.raylet, "error": self.error, "last processes without a core": self.last_without_core}

    def watch(self) -> None:
        while not self.stop.wait(0.1):
            self.cores()

    def run(self) -> None:
        try:
            self.watch()
        except Exception:  # noqa: BLE001 - kept for the test's assertion message, which a dead thread would lose
            import traceback

            self.error = traceback.format_exc()


class Killer(Watcher):
    """Kills the engine core once while the engine starts (a core seen alive for ``START_UP_KILL_AFTER_S``), then
    once while a segment converts (as soon as the run folder holds the first segment's start marker,
    chunker.run.attempts), and notes how long the conversion actor lived on after that second kill. A core that goes
    away before it was killed is noted and waited past (the next core is the one killed)."""

    def __init__(self, raylet: int, logs: Path, out: Path) -> None:
        super().__init__(raylet, logs)
        self.out = out
        self.killed: list[tuple[str, int]] = []
        self.actor_left_after_s: float | None = None

    def _kill(self, when: str, core: int) -> int | None:
        """The killed core's actor (the raylet's worker it runs below), or None when the core was gone (or a
        zombie) by now."""
        procs = _processes()
        now = procs.get(core)
        actor = _worker_of(core, self.raylet, procs)
        if now is None or now[2] == "Z" or actor is None:
            return None
        os.kill(core, signal.SIGKILL)
        self.killed.append((when, core))
        return actor

    def _start_up_kill(self) -> int | None:
        """The actor of the first core that stays alive ``START_UP_KILL_AFTER_S`` after it was first seen."""
        while not self.stop.wait(0.1):
            for core in self.cores():
                first = self.seen[core][1]
                if time.monotonic() - self.t0 - first >= START_UP_KILL_AFTER_S \
                        and (actor := self._kill("start-up", core)) is not None:
                    return actor
        return None

    def watch(self) -> None:
        if self._start_up_kill() is None:
            return
        attempts = self.out / "attempts"
        actor = None
        while actor is None and not self.stop.wait(0.05):
            if attempts.is_dir() and any(attempts.rglob("*")):
                for core in self.cores():
                    if (actor := self._kill("mid-run", core)) is not None:
                        break
        if actor is None:
            return
        killed_at = time.monotonic()
        while (state := _proc(actor)) is not None and state[2] != "Z":
            if self.stop.wait(0.1):
                return
        self.actor_left_after_s = time.monotonic() - killed_at


def _watched_ingest(watcher: Watcher, cfg, samples_dir: Path, out: Path):
    """``jobs.ingest`` of the samples with ``watcher`` polling (and acting) while it runs; stopped either way."""
    from jobs.ingest import run_ingest

    watcher.start()
    try:
        return run_ingest(cfg, str(samples_dir), str(out), verbose=False)
    finally:
        watcher.stop.set()
        watcher.join()


def test_ingest_with_the_engine_in_the_conversion_actor(ray_runtime, tiny_vlm, samples_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("clean")
    out, since = tmp / "run", time.time()
    cfg = _cfg(tiny_vlm, tmp / "m.db")
    watcher = Watcher(_raylet_pid(), ray_runtime)
    s = _watched_ingest(watcher, cfg, samples_dir, out)

    inputs = sorted(p.name for p in samples_dir.glob("*.pdf"))
    assert s.documents == len(inputs) == 4 and s.failed == 0 and s.skipped == 0, s.problems
    assert sorted(_outcomes(out)) == inputs, "every document has an outcome: nothing lost"
    # The random model writes noise: every page fell back to the text layer, visibly, with the reason.
    assert s.fallback_pages == s.pages == 12
    assert s.partial == 4 and len(s.problems) == 4
    assert all(p["status"] == "partial" and "fell back" in p["reason"] for p in s.problems), s.problems
    batches = pq.read_table(out / "batches").to_pylist()
    assert all(b["model"] == MODEL_NAME and b["input_tokens"] > 0 and b["fallback"] for b in batches), \
        "the engine really answered every batch"
    chunks = _doc_chunks(out)
    assert sorted(chunks) == inputs and s.chunks == sum(map(len, chunks.values()))
    assert _store_ids(cfg) == {i for ids in chunks.values() for i in ids} and s.collection_rows == s.chunks

    # Shutdown: the actor is let go at the end of the run, and its engine core goes with it. (The core was seen
    # while the run went on: the check below, and the next test's kills, look for the process that was there.)
    if not watcher.seen or watcher.error is not None:
        print("watcher report:", json.dumps(watcher.report(), default=str, indent=1))  # in full (pytest cuts it)
    assert watcher.seen and watcher.error is None, watcher.report()
    assert not _wait_no_engine_core(watcher, SHUTDOWN_WAIT_S), "an engine core outlived the run"
    logs = _actor_logs(ray_runtime, since)
    assert "[shutdown] MPClient: complete" in logs, "the engine was not shut down:\n" + logs[-4000:]
    assert "leaving the process" not in logs, "the engine died in the clean run:\n" + logs[-6000:]
    pytest.engine_clean = (s, chunks)  # type: ignore[attr-defined] - the reference of the next tests
    pytest.engine_clean_logs = logs  # type: ignore[attr-defined]


@pytest.mark.xfail(strict=False, reason=(
    "Ray's core worker kills an actor's child processes (the engine core) as soon as it lets the actor go "
    "(core_worker_shutdown_executor.cc: 'Try killing all child processes'), before any Python hook of ours: the "
    "UDF is not collected at __ray_shutdown__ (something still holds it), so VllmBackend's shutdown never runs "
    "first, and vLLM's output handler logs the dead core as an EngineDeadError traceback (not always: it races)"))
def test_the_conversion_actor_exits_without_a_traceback():
    logs = getattr(pytest, "engine_clean_logs", None)
    if logs is None:
        pytest.skip("needs the clean run of test_ingest_with_the_engine_in_the_conversion_actor")
    # (Python's multiprocessing resource tracker may print a KeyError traceback while the engine starts inside a
    # Ray worker; that is start-up noise of the tracker, not the exit this checks.)
    at_exit = logs[logs.index("[shutdown]"):]
    for sign in ("Traceback", "Exception ignored", "TypeError", "ERROR"):
        assert sign not in at_exit, f"{sign!r} in the conversion actor's log at exit:\n{at_exit[-6000:]}"


def test_engine_killed_at_start_up_and_mid_run_the_run_ends_with_the_clean_rows(
        ray_runtime, tiny_vlm, samples_dir, tmp_path_factory):
    ref = getattr(pytest, "engine_clean", None)
    if ref is None:
        pytest.skip("needs the clean run of test_ingest_with_the_engine_in_the_conversion_actor")
    clean, clean_chunks = ref
    tmp = tmp_path_factory.mktemp("killed")
    out, since = tmp / "run", time.time()
    cfg = _cfg(tiny_vlm, tmp / "m.db")
    killer = Killer(_raylet_pid(), ray_runtime, out)
    s = _watched_ingest(killer, cfg, samples_dir, out)
    if [w for w, _ in killer.killed] != ["start-up", "mid-run"]:
        # In full: pytest cuts a long assertion message, and this is what a recurrence has to say.
        print("killer report:", json.dumps({"killed": killer.killed, **killer.report()}, default=str, indent=1))
        print(_actor_logs(ray_runtime, since)[-6000:])
    assert [w for w, _ in killer.killed] == ["start-up", "mid-run"], (killer.killed, killer.report())
    # The actor saw its engine die and left at once: its requests in flight did not wait out their batch timeout
    # (page_timeout_s x batch_pages, 960 s here), which is what a request that vLLM never wakes would do.
    batch_budget_s = cfg.converter.page_timeout_s * cfg.intake.batch_pages
    assert killer.actor_left_after_s is not None and killer.actor_left_after_s < batch_budget_s / 4, \
        (killer.actor_left_after_s, batch_budget_s)

    # The run completed with the clean run's rows: same outcomes, same chunk IDs per document, all indexed.
    assert (s.documents, s.ok, s.partial, s.failed) == (clean.documents, clean.ok, clean.partial, clean.failed)
    # (Problems come in the order documents finish, and the killed run finishes its re-run segment last.)
    assert _by_source(s.problems) == _by_source(clean.problems) and s.fallback_pages == clean.fallback_pages
    assert _doc_chunks(out) == clean_chunks
    assert _store_ids(cfg) == {i for ids in clean_chunks.values() for i in ids}

    # The start-up death was retried inside the actor; the mid-run death replaced the actor (a new process, a new
    # engine) and its in-flight segments ran again.
    starts = Counter(p.parent.name for p in (out / "attempts").rglob("*") if p.is_file())
    assert len(starts) == 4 and max(starts.values()) >= 2, starts
    assert not _wait_no_engine_core(killer, SHUTDOWN_WAIT_S), "an engine core outlived the run"
    logs = _actor_logs(ray_runtime, since)
    assert "vLLM engine start 1 of 2" in logs, logs[-6000:]
    assert "leaving the process" in logs, logs[-6000:]
