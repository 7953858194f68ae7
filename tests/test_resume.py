"""Resumable, failure-isolated runs through real Ray Data: the done ledger, a worker killed mid-run, a document
past its timeout. One Ray runtime for the module."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from chunker.config import load_config
from jobs.stages import ConvertStage
from ray_support import ray_runtime_fixture

pytestmark = [pytest.mark.ray, pytest.mark.slow]
SLOW_DOC = "field-service-manual.pdf"


ray_runtime = ray_runtime_fixture(by_value=__name__)


class CrashOnceSlowStage(ConvertStage):
    """Kills its own worker process on its first call of the run (once, via a marker file), and takes far longer
    than the document timeout on one document."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        inner = self.converter.convert

        async def convert(job, images):  # noqa: ANN001, ANN202
            if job.source == SLOW_DOC:
                await asyncio.sleep(120)
            return await inner(job, images)

        self.converter.convert = convert  # type: ignore[method-assign]

    async def __call__(self, batch):  # noqa: ANN001, ANN204
        marker = Path(self.store.root) / "killed-once"
        if not marker.exists():
            marker.touch()
            os._exit(1)  # as an OOM kill or a node loss would: no exception, no cleanup
        return await super().__call__(batch)


def _cfg(db: Path, *extra: str):
    return load_config("configs/local.yaml", [f"milvus.uri={db}", "ray.status_interval_s=5", *extra])


def _ids(db: Path) -> set[str]:
    from chunker.index.store import ChunkStore

    with ChunkStore(_cfg(db).milvus, 384) as store:
        return store.chunk_ids()


def test_rerun_skips_finished_documents(ray_runtime, samples_dir, tmp_path_factory):
    from jobs.ingest import run_ingest

    tmp = tmp_path_factory.mktemp("resume")
    db, out = tmp / "m.db", tmp / "run"
    s1 = run_ingest(_cfg(db), str(samples_dir), str(out))
    assert (s1.ok, s1.skipped) == (4, 0)
    ledger = list((out / "ledger" / s1.config_hash).glob("*.json"))
    assert len(ledger) == 4
    ids = _ids(db)
    # A document whose ledger entry is gone (the job was killed before it finished) is done again; others skip.
    ledger[0].unlink()
    s2 = run_ingest(_cfg(db), str(samples_dir), str(out))
    assert (s2.ok, s2.skipped, s2.failed) == (1, 3, 0), s2.problems
    assert _ids(db) == ids and s2.collection_rows == s1.collection_rows
    outcomes = pq.read_table(out / "documents").to_pylist()
    assert sorted(o["status"] for o in outcomes) == ["ok", "skipped", "skipped", "skipped"]
    pytest.clean_ids = ids  # type: ignore[attr-defined] - the clean run's chunk IDs, for the next test
    pytest.clean_chunks = pq.read_table(tmp / "run" / "chunks").to_pylist()  # type: ignore[attr-defined]


def test_killed_worker_loses_nothing_and_a_slow_document_fails_alone(ray_runtime, samples_dir, tmp_path):
    from jobs.ingest import run_ingest

    clean = getattr(pytest, "clean_chunks", None)
    if clean is None:
        pytest.skip("needs the clean run of test_rerun_skips_finished_documents")
    db = tmp_path / "m.db"
    s = run_ingest(_cfg(db, "ray.document_timeout_s=25"), str(samples_dir), str(tmp_path / "run"),
                   convert_stage=CrashOnceSlowStage)
    assert (tmp_path / "run" / "killed-once").exists(), "the worker was never killed"
    assert (s.ok, s.failed) == (3, 1), s.problems
    assert s.problems == [{"source": SLOW_DOC, "status": "failed", "stage": "convert", "code": "timeout",
                           "reason": "conversion timed out after 25 s"}]
    expected = {c["chunk_id"] for c in clean if c["source"] != SLOW_DOC}
    assert _ids(db) == expected and s.collection_rows == len(expected)


class PoisonStage(ConvertStage):
    """Kills its worker whenever it converts one document, as a PDF that crashes pdfium would."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        inner = self.converter.convert

        async def convert(job, images):  # noqa: ANN001, ANN202
            if job.source == SLOW_DOC:
                os._exit(1)
            return await inner(job, images)

        self.converter.convert = convert  # type: ignore[method-assign]


def test_a_segment_that_kills_its_worker_every_time_is_quarantined(ray_runtime, samples_dir, tmp_path):
    """Task retries are unbounded (a lost node must not end the run); the per-segment start count is the bound. The
    other documents die with the poisoned one while they share its actor, then run apart from it and finish, also
    one whose hash shares the poisoned one's first bits (it once failed with it, one CI run in several)."""
    from jobs.ingest import run_ingest

    from chunker.run.suspects import depth

    cfg = _cfg(tmp_path / "m.db")
    s = run_ingest(cfg, str(samples_dir), str(tmp_path / "run"), convert_stage=PoisonStage)
    assert (s.ok, s.failed) == (3, 1), s.problems
    [p] = s.problems
    # Killed outright, a worker records nothing; the suspect groups from depth(chains) on run one segment at a time,
    # each start marked alone before it converts, so the poisoned one ends on the bound with a death of its own
    # (chunker.run.suspects): two shared deaths, one in its first group, one alone.
    assert depth(cfg.ray.convert_concurrency) == 2 and cfg.ray.segment_max_attempts == 4
    assert p["source"] == SLOW_DOC and "started 4 times" in p["reason"] and "the last 1 with it alone" in p["reason"], p


ONCE_DOC = "travel-expense-policy.pdf"


class DeadEngineStage(ConvertStage):
    """Its model engine dies, as :class:`~chunker.backends.vllm_backend.VllmBackend` reports it (``EngineDead``),
    whenever it converts one document, and once on another (a marker file in the run folder)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        inner = self.converter.convert
        marker = Path(self.store.root) / "engine-died-once"

        async def convert(job, images):  # noqa: ANN001, ANN202
            from chunker.backends.base import EngineDead

            if job.source == SLOW_DOC:
                raise EngineDead("vLLM engine is dead (test: this document kills every engine)")
            if job.source == ONCE_DOC and not marker.exists():
                marker.touch()
                raise EngineDead("vLLM engine is dead (test: once)")
            return await inner(job, images)

        self.converter.convert = convert  # type: ignore[method-assign]


def test_a_dead_engine_replaces_its_actor_and_a_document_that_kills_every_engine_is_quarantined(
        ray_runtime, samples_dir, tmp_path):
    """A raised EngineDead would be an application error that ends the whole Dataset; the actor leaves its process
    instead, Ray starts a new one and retries the segments it held: the document whose engine died once ends with the
    clean run's chunks, the one that kills every engine is quarantined, the run finishes."""
    from jobs.ingest import run_ingest

    clean = getattr(pytest, "clean_chunks", None)
    if clean is None:
        pytest.skip("needs the clean run of test_rerun_skips_finished_documents")
    from chunker.run.suspects import depth

    db, out = tmp_path / "m.db", tmp_path / "run"
    cfg = _cfg(db)
    s = run_ingest(cfg, str(samples_dir), str(out), convert_stage=DeadEngineStage)
    assert (out / "engine-died-once").exists(), "the engine never died on the document that dies once"
    assert (s.ok, s.failed) == (3, 1), s.problems
    [p] = s.problems
    assert p["source"] == SLOW_DOC and p["code"] == "quarantined", p
    # How many of its deaths find it alone on the engine depends on what else was converting then; the rule
    # (chunker.run.attempts.quarantine): at the bound with one death of its own, else at most the halvings past it.
    started = int(re.search(r"started (\d+) times", p["reason"]).group(1))
    bound = cfg.ray.segment_max_attempts
    assert bound <= started <= bound + depth(cfg.ray.convert_concurrency), p
    assert started == bound + depth(cfg.ray.convert_concurrency) or "with it alone on the engine" in p["reason"], p
    expected = {c["chunk_id"] for c in clean if c["source"] != SLOW_DOC}
    assert _ids(db) == expected and s.collection_rows == len(expected)
