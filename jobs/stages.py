"""Ray Data stage UDFs: each decodes its rows with :mod:`chunker.run.rows`, calls :mod:`chunker.run.segment`, and
encodes them again. Nothing here decides anything about a document; that lives in ``chunker.run``.

Every stage keeps a failing segment on its row (typed facts with the stage and reason) and lets the run go on; only
setup errors (no model, no store) raise. A dead engine ends the conversion actor's process instead, so that Ray
replaces the actor and retries its segments (:meth:`ConvertStage._leave`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import tempfile
import time
from contextlib import ExitStack, suppress
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from chunker.backends.base import EngineDead
from chunker.config import Config
from chunker.errors import SetupError
from chunker.intake import sources
from chunker.intake.cache import FetchCache, run_folder
from chunker.intake.inputs import InputFile
from chunker.intake.normalize import kind_of
from chunker.intake.prepare import prepare
from chunker.intake.segments import plan_segments
from chunker.run import faults
from chunker.run.attempts import (alone_deaths, await_copy, elect, prior_starts, quarantine, record_alone,
                                  record_failed, record_finish, record_start)
from chunker.run.suspects import Group, SuspectGate, depth, suspect_group
from chunker.run.layout import BATCHES, CHUNKS, ELEMENTS, RunStore, copy_key
from chunker.run.ledger import Ledger
from chunker.run.rows import COLUMNS, SegmentRow, batch_of, rows_of
from chunker.run.segment import convert_segment, guarded, plan_segment, problem_of, row_guard
from chunker.schemas import CHUNK, CONVERTED_BATCH, ELEMENT, to_table
from chunker.types import DocumentRecord, Problem, Stage, Status
from jobs.progress import PageTally, run_key

Batch = dict[str, Any]
log = logging.getLogger("jobs.stages")
# Exit status of a conversion actor that leaves because its engine died (any non-zero status is a crash to Ray).
ENGINE_DEAD_EXIT = 75
COPY_WAIT_MAX_S = 3600.0  # the longest a copy waits for another copy's batches when segments have no timeout


def fetch_cache(cfg: Config, out_uri: str) -> FetchCache | None:
    """This node's cache of the run's object-store inputs (None: turned off)."""
    if not out_uri or cfg.intake.fetch_cache_gb <= 0:
        return None
    return FetchCache(run_folder(out_uri), int(cfg.intake.fetch_cache_gb * 1e9))


def intake_rows(row: dict[str, Any], cfg: Config, out_uri: str = "", cfg_hash: str = "", target: str = "",
                force: bool = True) -> list[dict[str, Any]]:
    """One input -> one row per segment, or one row for a document that failed or was skipped.

    Runs on a worker. The done ledger is asked first by (absolute URI, size and modification time), so an unchanged
    file that is done costs no download; otherwise object-store files are fetched into this node's cache (which the
    conversion actors here reuse), hashed (the doc_id), checked against the ledger again by doc_id and normalised to
    PDF in a worker-local temp folder that is removed before returning. A normalised PDF is kept in the run's output
    storage so the conversion actor (maybe on another node) can fetch it.
    """
    source = row.get("source") or row.get("path") or ""
    if row.get("error"):  # a bad manifest line
        doc = DocumentRecord("", row.get("path") or "", source, 0, Status.FAILED,
                             [Problem(Stage.INTAKE, "manifest", row["error"])])
        return [SegmentRow(doc).encode()]
    t0 = time.perf_counter()
    ledger = Ledger(out_uri, cfg_hash, target) if out_uri and cfg_hash else None
    ask = ledger if not force else None
    version = sources.version_of(row["path"])
    try:
        faults.check("intake", source)
        file = InputFile(path=row["path"], source=source, matched=not row.get("unmatched"))
        with tempfile.TemporaryDirectory(prefix="intake-") as tmp:
            # Done as this copy (its absolute URI): another copy of the same bytes being done is not enough.
            copy = sources.absolute_uri(row["path"])
            doc, pdf = prepare(file, cfg.intake, Path(tmp),
                               skip=(lambda d: ask.is_done(d, copy)) if ask else None, version=version,
                               done=ask.done_by_uri if ask else None, cache=fetch_cache(cfg, out_uri))
            if pdf and force and ledger is not None:
                ledger.forget_copy(copy)  # redone: not done until its new rows are in (see Ledger.forget_copy)
            if not pdf:
                return [SegmentRow(doc, source_version=version).encode()]
            pdf_uri = doc.source_uri
            if file.matched and kind_of(row["path"]) != "pdf":
                # Normalised from another format: the PDF becomes a run artefact that any node can fetch by URI.
                pdf_uri = sources.upload(Path(pdf), RunStore(out_uri).normalized_uri(doc.doc_id))
        jobs = plan_segments(doc, cfg.intake)
    except SetupError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever one input does, it fails alone
        problem = problem_of(exc, Stage.INTAKE, "intake")
        return [SegmentRow(DocumentRecord("", row.get("path") or "", source, 0, Status.FAILED, [problem])).encode()]
    rows = [SegmentRow(doc, job=job, pdf_uri=pdf_uri, source_version=version) for job in jobs]
    if rows:
        rows[0].intake_s = time.perf_counter() - t0  # the document's intake, counted once
    return [r.encode() for r in rows]


def intake_batch(batch: Batch, **kwargs: Any) -> Batch:
    """:func:`intake_rows` as a ``map_batches`` UDF, so the streaming repartition after it fuses into the same
    task and every segment leaves as a block of its own (Ray 2.60 fuses only MapBatches -> StreamingRepartition)."""
    n = len(next(iter(batch.values()))) if batch else 0
    out = [r for i in range(n) for r in intake_rows({k: _str(v[i]) for k, v in batch.items()}, **kwargs)]
    return {c: [o[c] for o in out] for c in COLUMNS}


def _str(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


class ConvertStage:
    """The conversion actor: many segment chains in flight at once (async), each strictly in order."""

    def __init__(self, cfg: Config, cfg_hash: str, out_uri: str) -> None:
        from chunker.convert.factory import make_converter

        self.cfg = cfg
        self.cfg_hash = cfg_hash
        self.converter = make_converter(cfg, cfg_hash)
        self.store = RunStore(out_uri)
        self.timeout_s = cfg.ray.document_timeout_s
        self.cache = fetch_cache(cfg, out_uri)
        self.gate = SuspectGate(serial_from=depth(cfg.ray.convert_concurrency))
        self.tally = PageTally(run_key(out_uri, cfg_hash))  # pages for the progress line, as each batch is done
        # This actor's start markers in flight, and whether each is converting on the engine right now: what a
        # death is charged to (chunker.run.attempts).
        self.starts: dict[str, bool] = {}

    async def __call__(self, batch: Batch) -> Batch:
        # One segment per call in the pipeline (one per block, see jobs.ingest); several still work.
        rows = rows_of(batch)
        try:
            await asyncio.gather(*(guarded(r, Stage.CONVERT, "conversion", self._one(r)) for r in rows if r.active))
        except EngineDead as exc:
            self._leave(exc)
        return batch_of(rows)

    def _leave(self, exc: EngineDead) -> NoReturn:
        """The model engine died (its core process was killed, ran out of memory): shut it down and end this
        actor's process, so that Ray starts a new actor (a new engine) and runs this call and the others in flight
        again (``max_restarts`` / ``max_task_retries``, see jobs.ingest). The death is charged to the segments that
        were converting on the engine; the starts of the others are marked finished first (chunker.run.attempts),
        so a segment that kills every engine ends ``quarantined`` and its neighbours keep their counts; a death with
        one segment converting is marked as that segment's own.

        Raising instead would be an application error: Ray Data does not retry it, and the Dataset, the whole run,
        fails. ``ray.actor.exit_actor()`` is an intended exit, which Ray neither restarts nor retries; a process
        that exits on its own is a system failure, which it does. Ray's own vLLM stage does the same
        (ray/llm/_internal/batch/stages/vllm_engine_stage.py, Ray 2.60: ``os._exit(1)`` on ``EngineDeadError``).
        """
        charged = sum(1 for converting in self.starts.values() if converting)
        log.error("conversion actor (pid %d): %s; %d segments were converting on it and %d others are spared; "
                  "shutting the engine down and leaving the process, so that Ray restarts the actor and retries its "
                  "segments", os.getpid(), exc, charged, len(self.starts) - charged)
        for marker, converting in list(self.starts.items()):
            with suppress(Exception):  # best effort: unmarked, it counts as a death, as after an outright kill
                if not converting:
                    record_finish(self.store, marker)
                elif charged == 1:
                    record_alone(self.store, marker)  # alone on the engine: the death is its own
        self._close_engine()
        for stream in (sys.stdout, sys.stderr):
            with suppress(Exception):
                stream.flush()
        os._exit(ENGINE_DEAD_EXIT)

    def _close_engine(self) -> None:
        close = getattr(getattr(self.converter, "backend", None), "close_now", None)
        if close is None:
            return
        try:
            close()
        except Exception as err:  # noqa: BLE001 - the actor is ending anyway; say why the shutdown was not clean
            log.warning("engine shutdown failed: %s: %s", type(err).__name__, err)

    async def _io(self, row: SegmentRow, fn: Any, *args: Any) -> Any:
        """Run-folder I/O off the event loop, counted as the segment's write time."""
        t0 = time.perf_counter()
        try:
            return await asyncio.to_thread(fn, *args)
        finally:
            row.write_s += time.perf_counter() - t0

    async def _one(self, row: SegmentRow) -> None:
        """Convert one segment, counting its starts: a segment that kills its worker every time ends quarantined,
        one that has lost its worker twice runs in a suspect group (chunker.run.suspects), and a copy of bytes another
        copy is converting in this run takes that copy's batches instead of converting them again (see
        chunker.run.attempts)."""
        job = row.job
        assert job is not None
        prior = await self._io(row, prior_starts, self.store, job)
        r = self.cfg.ray
        alone = await self._io(row, alone_deaths, self.store, job) if prior >= r.segment_max_attempts else 0
        problem = quarantine(prior, r.segment_max_attempts, alone, depth(r.convert_concurrency))
        if problem is not None:
            await self._io(row, record_failed, self.store, job, problem)  # copies waiting for this one stop waiting
            row.fail(problem)
            return
        group = suspect_group(job, prior)  # None: an ordinary segment; else its suspect group (chunker.run.suspects)
        marker = ""
        dead = False
        try:
            async with self.gate.enter(group):
                marker = await self._io(row, record_start, self.store, job)
                self.starts[marker] = False
                leader = await self._io(row, elect, self.store, job)
                if leader == copy_key(job.source_uri):
                    await self._alone(row, group, marker)
                    await self._convert(row, marker)
                    await self._finished(row, marker, prior)
                    return
            # Another copy of these bytes converts them: wait outside the gate (that copy may be here, in a group).
            outcome = await await_copy(self.store, job, leader, self.timeout_s or COPY_WAIT_MAX_S)
            if outcome is not None:
                if isinstance(outcome, Problem):
                    row.fail(outcome)
                else:
                    row.batches = outcome  # the content's batches; the plan stage makes this copy's own chunks
                await self._finished(row, marker, prior)
                return
            log.warning("segment %d of %s: the copy converting the same bytes gave no result in time; converting it "
                        "here", job.segment_index, job.source)
            async with self.gate.enter(group):
                await self._alone(row, group, marker)
                await self._convert(row, marker)
                await self._finished(row, marker, prior)
        except EngineDead:
            dead = True
            raise
        finally:
            if not dead:  # a dead engine's starts stay for _leave, which runs once this has unwound
                self.starts.pop(marker, None)

    async def _alone(self, row: SegmentRow, group: Group | None, marker: str) -> None:
        """A suspect about to convert with nothing else on the engine says so first: a worker killed outright
        leaves no word, and without this mark a death it causes is shared with whoever died beside it before."""
        if self.gate.serial(group):
            await self._io(row, record_alone, self.store, marker)

    async def _finished(self, row: SegmentRow, marker: str, prior: int) -> None:
        """Close this start: a failed conversion says why (for the copies waiting on it); a finished one is marked
        only when the segment has lost a worker before (one more small file; a first start that finished and then
        lost its result counts once, and shared starts are bounded by SUSPECT_AFTER anyway)."""
        job = row.job
        assert job is not None
        if row.facts is not None and row.facts.failed:
            await self._io(row, record_failed, self.store, job, row.facts.problems[0], marker)
        elif prior:
            await self._io(row, record_finish, self.store, marker)

    async def _convert(self, row: SegmentRow, marker: str) -> None:
        job = row.job
        assert job is not None
        t0 = time.perf_counter()
        uri = row.pdf_uri or job.source_uri
        # The original at the version intake saw; a normalised copy is named by its doc_id, so it never changes.
        version = row.source_version if uri == job.source_uri else ""
        with ExitStack() as stack:
            try:
                local = await asyncio.to_thread(self._local_pdf, stack, uri, version)
            except OSError as exc:
                row.fail(Problem(Stage.CONVERT, "fetch", f"fetch: {exc}"))
                return
            self.starts[marker] = True  # on the engine: a death now is charged to this segment
            try:
                batches = await convert_segment(self.converter, job, self.cfg, source_path=local,
                                                timeout_s=self.timeout_s, on_batch=self.tally)
            except EngineDead:
                # The flag stays: _leave runs after this unwinds, and the segment whose request took the engine
                # down is the first to get here; clearing it would charge the death to everyone but that one.
                raise
            except BaseException:
                self.starts[marker] = False
                raise
            finally:
                self.tally.flush()
            self.starts[marker] = False
        if isinstance(batches, Problem):
            row.fail(batches)
            return
        for b in batches:
            b.config_hash = self.cfg_hash
        t1 = time.perf_counter()
        await asyncio.to_thread(self.store.write_segment, BATCHES, job.doc_id, job.segment_index,
                                to_table(batches, CONVERTED_BATCH))
        row.write_s += time.perf_counter() - t1
        row.batches = batches
        row.convert_s = t1 - t0
        row.tokens = int(sum(b.output_tokens or 0 for b in batches if not b.context_only))

    def _local_pdf(self, stack: ExitStack, uri: str, version: str) -> str:
        """A local path of the segment's PDF, valid until ``stack`` closes: fetched once per node and shared by
        every segment converting here (the node cache), or into a temp folder when the cache is off."""
        if not sources.is_remote(uri):
            return sources.local_path(uri)
        if self.cache is not None:
            path, _, _ = stack.enter_context(self.cache.open(uri, version))
            return str(path)
        dest = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="convert-"))) / "document.pdf"
        sources.fetch(uri, dest)
        return str(dest)


class PlanStage:
    """CPU stage: Markdown -> elements -> chunk plans -> chunk rows, persisted per segment.

    ``ray.plan_actors`` actors, each with ``ray.plan_concurrency`` calls in flight: parsing and planning run on the
    event loop, the two Parquet parts of a segment are written side by side in threads, so one segment's round trips
    to object storage overlap with the next one's planning instead of stalling the actor."""

    def __init__(self, cfg: Config, cfg_hash: str, out_uri: str) -> None:
        from chunker.plan import make_planner

        self.cfg_hash = cfg_hash
        self.store = RunStore(out_uri)
        # The LLM planner's backend loads once per actor, not once per segment.
        self.planner = make_planner(cfg)

    async def __call__(self, batch: Batch) -> Batch:
        rows = rows_of(batch)  # a bundle of segments (ray.post_convert_batch), each planned and written alone
        await asyncio.gather(*(guarded(row, Stage.PLAN, "planning", self._one(row)) for row in rows if row.active))
        return batch_of(rows)

    async def _one(self, row: SegmentRow) -> None:
        job = row.job
        assert job is not None
        res = await plan_segment(job, row.batches, self.planner, self.cfg_hash)
        t0 = time.perf_counter()
        await asyncio.gather(
            asyncio.to_thread(self.store.write_segment, ELEMENTS, job.doc_id, job.segment_index,
                              to_table(res.elements, ELEMENT, config_hash=self.cfg_hash)),
            asyncio.to_thread(self.store.write_segment, CHUNKS, job.doc_id, job.segment_index,
                              to_table(res.chunks, CHUNK), job.source_uri))
        row.write_s += time.perf_counter() - t0
        row.facts, row.chunks, row.plan_ms = res.facts, res.chunks, res.plan_ms
        row.batches = []  # persisted already; no need to carry Markdown further


def checked_vectors(vectors: Any, n: int) -> np.ndarray:
    """``n`` finite float32 vectors, or ValueError: a NaN vector would only fail later, at Milvus, for the batch."""
    out = np.asarray(vectors, dtype=np.float32)
    if out.ndim != 2 or out.shape[0] != n:
        raise ValueError(f"the embedder returned shape {out.shape} for {n} chunks")
    if not np.isfinite(out).all():
        raise ValueError("the embedder returned a non-finite vector")
    return out


class EmbedStage:
    """Embedding actor: loads the model once; adds float32 vectors for each row's chunks."""

    def __init__(self, cfg: Config) -> None:
        from chunker.index.embed import Embedder

        self.embedder = Embedder(cfg.embed)

    def __call__(self, batch: Batch) -> Batch:
        rows = rows_of(batch)
        todo = [r for r in rows if r.chunks]
        t0 = time.perf_counter()
        try:
            faults.check("embed", *(r.doc.source for r in todo))
            vecs = self.embedder.encode_chunks([c for r in todo for c in r.chunks])
        except SetupError:
            raise
        except Exception:  # noqa: BLE001 - find the row that cannot be embedded; the others go on
            vecs = None
        start = 0
        for row in todo:
            n = len(row.chunks)
            with row_guard(row, Stage.EMBED, "embedding"):
                faults.check("embed", row.doc.source)
                out = vecs[start:start + n] if vecs is not None else self.embedder.encode_chunks(row.chunks)
                row.vectors = checked_vectors(out, n)
            start += n
        dt = time.perf_counter() - t0
        total = max(1, sum(len(r.chunks) for r in todo))
        for row in todo:
            row.embed_s = dt * len(row.chunks) / total
        return batch_of(rows)
