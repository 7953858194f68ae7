"""Engine deaths: a death is charged once, to the segments that were converting on the engine, so a run whose engine
dies with 16 segments in flight finishes with nothing quarantined and its concurrency back; a restarted engine waits
(bounded, with backoff) until its GPU has the memory it asks for."""

from __future__ import annotations

import asyncio
import contextvars
import os
import sys
import time
from pathlib import Path

import pytest

from chunker.config import load_config
from jobs.stages import ConvertStage
from ray_support import ray_runtime_fixture

# ------------------------------------------------------------------ the restart waits for GPU memory


class Clock:
    def __init__(self) -> None:
        self.t = 0.0
        self.sleeps: list[float] = []

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.t += s


def test_a_restarted_engine_waits_for_the_memory_it_asks_for_with_backoff():
    from chunker.backends.vllm_backend import wait_for_gpu_memory

    said: list[str] = []

    gib = 2**30
    # The dead engine's core is still releasing its memory: 10 GiB free of 80, then 40, then 76.
    readings = [[(10 * gib, 80 * gib)]] * 3 + [[(40 * gib, 80 * gib)]] * 2 + [[(76 * gib, 80 * gib)]]
    clock = Clock()
    probe = lambda: readings.pop(0) if len(readings) > 1 else readings[0]  # noqa: E731
    # The lines go through ``say`` (log.warning in the engine): read here without the process's logging state, which
    # other tests of a long session share.
    assert wait_for_gpu_memory(0.9, 300, probe, sleep=clock.sleep, clock=lambda: clock.t,
                               say=lambda fmt, *args: said.append(fmt % args))
    assert clock.sleeps == [0.5, 1.0, 2.0, 4.0, 8.0], "backoff, doubling"
    waits = [m for m in said if "waiting up to 300 s for GPU memory" in m]
    assert len(waits) == 1 and "10.0 of 80.0 GiB free" in waits[0] and "90%" in waits[0]
    assert said[-1] == "GPU memory is free after 16 s; starting the engine"  # 15.5 s of sleeps


def test_the_wait_is_bounded_and_every_card_of_a_tensor_parallel_engine_counts():
    from chunker.backends.vllm_backend import wait_for_gpu_memory

    gib = 2**30
    clock = Clock()
    # Two cards: one free, one still held. The wait ends at its bound; the start goes ahead (vLLM says the rest).
    probe = lambda: [(79 * gib, 80 * gib), (5 * gib, 80 * gib)]  # noqa: E731
    assert not wait_for_gpu_memory(0.9, 30, probe, sleep=clock.sleep, clock=lambda: clock.t)
    assert 30 <= clock.t <= 30 + 1e-9 and max(clock.sleeps) == 10.0


def test_no_gpu_means_no_wait():
    from chunker.backends.vllm_backend import wait_for_gpu_memory

    clock = Clock()
    assert wait_for_gpu_memory(0.9, 300, None, sleep=clock.sleep, clock=lambda: clock.t) and not clock.sleeps
    assert wait_for_gpu_memory(0.9, 0, lambda: [(0, 80)], sleep=clock.sleep) and not clock.sleeps


def test_engine_starts_wait_before_each_attempt(monkeypatch):
    from chunker.backends import vllm_backend

    calls: list[str] = []

    class FakeArgs:
        def __init__(self, **kw: object) -> None:
            pass

    class FakeEngine:
        starts = 0

        @classmethod
        def from_engine_args(cls, args: object) -> object:
            calls.append("start")
            cls.starts += 1
            if cls.starts == 1:
                raise RuntimeError("Engine core initialization failed (test)")
            return cls()

    fake_vllm = type(sys)("vllm")
    fake_vllm.AsyncEngineArgs = FakeArgs
    fake_v1 = type(sys)("vllm.v1.engine.async_llm")
    fake_v1.AsyncLLM = FakeEngine
    for name, mod in {"vllm": fake_vllm, "vllm.v1": type(sys)("vllm.v1"), "vllm.v1.engine": type(sys)("vllm.v1.engine"),
                      "vllm.v1.engine.async_llm": fake_v1}.items():
        monkeypatch.setitem(sys.modules, name, mod)
    engine = vllm_backend.start_engine({"model": "m"}, attempts=2, wait=lambda: calls.append("wait"))
    assert isinstance(engine, FakeEngine) and calls == ["wait", "start", "wait", "start"]


# ------------------------------------------------------------------ a death is charged to who was converting


def test_a_death_spares_the_segments_that_were_not_on_the_engine(tmp_path, monkeypatch):
    from chunker.backends.base import EngineDead
    from chunker.run.attempts import prior_starts, record_start
    from chunker.types import SegmentJob

    stage = ConvertStage(load_config(None), "h", str(tmp_path / "run"))
    jobs = [SegmentJob(f"d{i}", f"/in/{i}.pdf", f"{i}.pdf", 4, 0, 1, 1, 4, 1, 4) for i in range(4)]
    for i, job in enumerate(jobs):
        stage.starts[record_start(stage.store, job)] = i < 2  # two converting on the engine, two waiting
    monkeypatch.setattr(os, "_exit", lambda code: (_ for _ in ()).throw(SystemExit(code)))
    with pytest.raises(SystemExit):
        stage._leave(EngineDead("test"))
    assert [prior_starts(stage.store, j) for j in jobs] == [1, 1, 0, 0]


class Killed(Exception):
    """The worker process died outright (an out-of-memory kill, pdfium crashing): nothing in it runs afterwards."""


def _sharing_hash_bits(poison, bits: int):  # noqa: ANN001, ANN202
    """A segment whose suspect groups are the poison segment's for ``bits`` levels: halving never parts them."""
    from chunker.run.suspects import SUSPECT_AFTER, suspect_group
    from chunker.types import SegmentJob

    for i in range(1 << 16):
        job = SegmentJob(f"x{i}", f"/in/x{i}.pdf", f"x{i}.pdf", 4, 0, 1, 1, 4, 1, 4)
        if all(suspect_group(job, d) == suspect_group(poison, d) for d in range(SUSPECT_AFTER, SUSPECT_AFTER + bits)):
            return job
    raise AssertionError("no such segment")


def test_a_neighbour_whose_hash_matches_the_poison_segments_is_not_quarantined(tmp_path):
    """Every worker that converts the poison segment is killed outright, so nothing says whose death it was. An
    innocent segment that shares the poison one's hash prefix lands in its suspect group at every level; it used to
    die beside it until both passed the bound and both failed. A deep group now converts one at a time, each start
    marked alone first: the poison one is quarantined on its own deaths, the other converts."""
    from chunker.run.rows import SegmentRow
    from chunker.types import DocumentRecord, SegmentJob

    cfg = load_config(None, ["ray.convert_concurrency=4"])
    poison = SegmentJob("p", "/in/p.pdf", "p.pdf", 4, 0, 1, 1, 4, 1, 4)
    jobs = [poison, _sharing_hash_bits(poison, 8)]
    converted: set[str] = set()
    outcome: dict[str, str] = {}

    async def life() -> None:  # one worker process, from its start to its death (or the end of its work)
        stage = ConvertStage(cfg, "h", str(tmp_path / "run"))

        async def convert(row, marker) -> None:  # noqa: ANN001
            await asyncio.sleep(0.02 if row.job is poison else 0.05)
            if row.job is poison:
                raise Killed
            converted.add(row.job.doc_id)

        stage._convert = convert  # type: ignore[method-assign]
        rows = [SegmentRow(DocumentRecord(j.doc_id, j.source_uri, j.source, 4), job=j) for j in jobs
                if j.doc_id not in outcome]
        tasks = [asyncio.create_task(stage._one(r)) for r in rows]
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
        for t in tasks:  # the process is gone: whatever else it held stops where it was
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for r in rows:
            if r.facts is not None and r.facts.failed:
                outcome[r.job.doc_id] = r.facts.problems[0].message
            elif r.job.doc_id in converted:
                outcome[r.job.doc_id] = "converted"

    lives = 0
    while len(outcome) < 2:
        asyncio.run(life())
        lives += 1
        assert lives <= 12, outcome
    assert outcome[jobs[1].doc_id] == "converted", outcome
    assert "started 4 times" in outcome["p"] and "the last 1 with it alone" in outcome["p"], outcome


DOCS, PAGES = 8, 4  # two segments of two pages each: 16 segments
IN_FLIGHT = 16


def busy_engine(cfg):  # noqa: ANN001, ANN201 - the simulated backend
    """The simulated engine at 0.25 s a request at most: requests pile up, as on a busy GPU."""
    from chunker.backends.simulated import EngineSpec, SimulatedBackend

    return SimulatedBackend(cfg.converter.model, max_images=cfg.intake.batch_pages, max_side_px=cfg.render.max_side_px,
                            spec=EngineSpec(seq_decode_tokens_per_s=4000.0, max_num_seqs=32), time_scale=0.5)


class DyingEngineStage(ConvertStage):
    """The simulated engine behind a wrapper that dies once (a marker file in the run folder), when 16 requests are in
    flight at once, as a vLLM engine core that is killed fails every request it holds. Each actor process notes the
    most requests it had in flight at once."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        from chunker.convert.factory import make_converter

        cfg = self.cfg
        inner = busy_engine(cfg)
        root = Path(self.store.root)
        marker = root / "engine-killed"
        peaks = root / "peaks"
        peaks.mkdir(exist_ok=True)
        state = {"in_flight": 0, "peak": 0, "dead": False}

        class Dying:
            name = "simulated"
            model = inner.model

            async def generate(self, request):  # noqa: ANN001, ANN202
                from chunker.backends.base import EngineDead

                if state["dead"]:
                    raise EngineDead("vLLM engine is dead (test)")
                state["in_flight"] += 1
                if state["in_flight"] > state["peak"]:
                    state["peak"] = state["in_flight"]
                    (peaks / str(os.getpid())).write_text(str(state["peak"]))
                try:
                    if state["in_flight"] >= IN_FLIGHT and not marker.exists():
                        marker.write_text(str(time.time()))
                        state["dead"] = True
                        raise EngineDead("vLLM engine is dead (test: killed with 16 requests in flight)")
                    await asyncio.sleep(2.0)  # time for the other chains to arrive
                    return await inner.generate(request)
                finally:
                    state["in_flight"] -= 1

            async def close(self) -> None:
                await inner.close()

        self.converter = make_converter(cfg, self.cfg_hash, backend=Dying())


ray_runtime = ray_runtime_fixture(by_value=__name__)


def _run_on_one_engine(tmp_path: Path, docs: int, seed: int, in_flight: int, stage: type):  # noqa: ANN202
    """``docs`` documents of two two-page segments through one conversion actor with ``in_flight`` chains, into
    ``tmp_path/run``."""
    from chunker.eval.synthetic import write_document
    from jobs.ingest import run_ingest

    corpus = tmp_path / "docs"
    for k in range(docs):
        write_document(corpus / f"doc-{k}.pdf", PAGES, seed=seed + k, title=f"Manual {k}")
    cfg = load_config("configs/local.yaml", [
        f"milvus.uri={tmp_path / 'm.db'}", "converter.backend=simulated", "render.max_side_px=448",
        "intake.segment_pages=2", "intake.segment_overlap_pages=0", "intake.batch_pages=1",
        "ray.convert_actors=1", f"ray.convert_concurrency={in_flight}", "ray.status_interval_s=5",
        "converter.page_timeout_s=60", "ray.document_timeout_s=300"])
    return run_ingest(cfg, str(corpus), str(tmp_path / "run"), convert_stage=stage)


@pytest.mark.ray
@pytest.mark.slow
def test_an_engine_killed_with_16_segments_in_flight(ray_runtime, tmp_path):
    from chunker.run.layout import ATTEMPTS

    run = tmp_path / "run"
    s = _run_on_one_engine(tmp_path, DOCS, 40, IN_FLIGHT, DyingEngineStage)
    assert (run / "engine-killed").exists(), "the engine never died"
    assert (s.documents, s.ok, s.failed) == (DOCS, DOCS, 0), s.problems  # nothing innocent is quarantined
    # Charged once: no segment's count reached the solo threshold, so none ran alone afterwards.
    counts = []
    for folder in (run / ATTEMPTS).iterdir():
        names = [p.name for p in folder.iterdir()]
        ended = {n.split(".", 1)[0] for n in names if "." in n}
        counts.append(sum(1 for n in names if "." not in n and n not in ended))
    assert len(counts) == DOCS * PAGES // 2 and max(counts) <= 1 and sum(counts) <= IN_FLIGHT, counts
    # Concurrency comes back: the actor Ray started after the death ran many chains at once again.
    peaks = {p.name: int(p.read_text()) for p in (run / "peaks").iterdir()}
    assert len(peaks) == 2, f"one actor before the death, one after: {peaks}"
    assert min(peaks.values()) >= 8, peaks


# ------------------------------------------------------------------ one poison segment among many


POISON = "doc-3.pdf"  # its first segment takes down whichever engine converts it
POISON_DOCS = 16  # 32 segments, all on the engine at once


class PoisonedEngine:
    """The engine in front of the simulated one: whatever it holds fails once the poison segment's request is on it."""

    name = "simulated"

    def __init__(self, inner, converting, marks: Path) -> None:  # noqa: ANN001
        self.inner, self.model, self.converting, self.marks = inner, inner.model, converting, marks
        self.dead = False

    async def generate(self, request):  # noqa: ANN001, ANN201
        from chunker.backends.base import EngineDead

        for wait in (0.4, 0.0):  # before and after a pause that lets the other chains onto the engine too
            if self.dead:
                raise EngineDead("vLLM engine is dead (test)")
            await asyncio.sleep(wait)
        if self.converting.get() == f"{POISON}#0":
            self.dead = True
            (self.marks / f"death-{time.time_ns()}").write_text("")
            raise EngineDead("vLLM engine is dead (test: a poison page)")
        return await self.inner.generate(request)

    async def close(self) -> None:
        await self.inner.close()


class PoisonEngineStage(ConvertStage):
    """The simulated engine behind a wrapper that dies whenever the poison segment's pages are on it (as a page that
    crashes vLLM would), failing every request it holds; the death marker of each death is a file. Each segment that
    converted with no other segment converting beside it leaves an ``alone`` marker."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        from chunker.convert.factory import make_converter

        cfg = self.cfg
        inner = busy_engine(cfg)
        root = Path(self.store.root)
        self.marks = root / "marks"
        self.marks.mkdir(exist_ok=True)
        # Made here, in the actor: the test module travels to it by value, and a ContextVar does not pickle.
        self.converting = contextvars.ContextVar("converting", default="")
        self.active = 0
        self.peak: dict[str, int] = {}
        self.converter = make_converter(cfg, self.cfg_hash, backend=PoisonedEngine(inner, self.converting, self.marks))

    async def _convert(self, row, marker):  # noqa: ANN001, ANN202
        key = f"{row.job.source}#{row.job.segment_index}"
        self.converting.set(key)
        self.active += 1
        self.peak = {k: max(v, self.active) for k, v in self.peak.items()}
        self.peak[key] = self.active
        try:
            await super()._convert(row, marker)
        finally:
            self.active -= 1
        if not (row.facts is not None and row.facts.failed) and self.peak.pop(key, 2) == 1:
            (self.marks / f"alone-{key}").write_text("")


@pytest.mark.ray
@pytest.mark.slow
def test_one_poison_segment_is_found_without_running_its_neighbours_one_by_one(ray_runtime, tmp_path):
    """32 segments converting on one engine, one of them poison. Two deaths make all of them suspects; they used to
    run one at a time from then on (every innocent one alone on the GPU) until the poison one was quarantined. Now
    the suspects run in halving groups: the poison one is isolated in a few deaths, the others convert together (a
    few end up alone: the innocent half of the poison's last groups, and stragglers at the end of the run)."""
    run = tmp_path / "run"
    s = _run_on_one_engine(tmp_path, POISON_DOCS, 60, 2 * POISON_DOCS, PoisonEngineStage)
    assert (s.documents, s.ok, s.partial, s.failed) == (POISON_DOCS, POISON_DOCS - 1, 1, 0), s.problems
    [problem] = s.problems
    assert problem["source"] == POISON and problem["code"] == "quarantined", problem
    deaths = len(list((run / "marks").glob("death-*")))
    alone = sorted(p.name for p in (run / "marks").glob("alone-*"))
    assert deaths <= 2 + 5 + 3, f"{deaths} engine deaths: two, then about log2(32) halvings"
    assert len(alone) <= 8, f"innocent segments converted one at a time: {alone}"
