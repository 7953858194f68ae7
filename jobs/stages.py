"""Ray Data stage UDFs: each decodes its rows with :mod:`chunker.run.rows`, calls :mod:`chunker.run.segment`, and
encodes them again. Nothing here decides anything about a document; that lives in ``chunker.run``.

Every stage keeps a failing segment on its row (typed facts with the stage and reason) and lets the run go on; only
setup errors (no model, no store, a dead engine) raise.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from chunker.config import Config
from chunker.errors import SetupError
from chunker.intake import sources
from chunker.intake.inputs import InputFile
from chunker.intake.normalize import kind_of
from chunker.intake.prepare import prepare
from chunker.intake.segments import plan_segments
from chunker.run.layout import BATCHES, CHUNKS, ELEMENTS, RunStore
from chunker.run.ledger import Ledger
from chunker.run.rows import SegmentRow, batch_of, rows_of
from chunker.run.segment import convert_segment, plan_segment, problem_of
from chunker.schemas import CHUNK, CONVERTED_BATCH, ELEMENT, to_table
from chunker.types import DocumentRecord, Problem, Stage, Status

Batch = dict[str, Any]


def intake_rows(row: dict[str, Any], cfg: Config, out_uri: str = "", cfg_hash: str = "", target: str = "",
                force: bool = True) -> list[dict[str, Any]]:
    """flat_map: one input -> one row per segment, or one row for a document that failed or was skipped.

    Runs on a worker: object-store files are fetched here, hashed (the doc_id), checked against the done ledger
    and normalised to PDF in a worker-local temp folder that is removed before returning. A normalised PDF is
    kept in the run's output storage so the conversion actor (maybe on another node) can fetch it.
    """
    source = row.get("source") or row.get("path") or ""
    if row.get("error"):  # a bad manifest line
        doc = DocumentRecord("", row.get("path") or "", source, 0, Status.FAILED,
                             [Problem(Stage.INTAKE, "manifest", row["error"])])
        return [SegmentRow(doc).encode()]
    ledger = Ledger(out_uri, cfg_hash, target) if out_uri and cfg_hash and not force else None
    try:
        with tempfile.TemporaryDirectory(prefix="intake-") as tmp:
            doc, pdf = prepare(InputFile(path=row["path"], source=source), cfg.intake, Path(tmp),
                               skip=ledger.is_done if ledger else None)
            if not pdf:
                return [SegmentRow(doc).encode()]
            pdf_uri = doc.source_uri
            if kind_of(row["path"]) != "pdf":
                # Normalised from another format: the PDF becomes a run artefact that any node can fetch by URI.
                pdf_uri = sources.upload(Path(pdf), RunStore(out_uri).normalized_uri(doc.doc_id))
    except SetupError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever one input does, it fails alone
        problem = problem_of(exc, Stage.INTAKE, "intake")
        return [SegmentRow(DocumentRecord("", row.get("path") or "", source, 0, Status.FAILED, [problem])).encode()]
    return [SegmentRow(doc, job=job, pdf_uri=pdf_uri).encode() for job in plan_segments(doc, cfg.intake)]


class ConvertStage:
    """The conversion actor: many segment chains in flight at once (async), each strictly in order."""

    def __init__(self, cfg: Config, cfg_hash: str, out_uri: str) -> None:
        from chunker.convert.factory import make_converter

        self.cfg = cfg
        self.cfg_hash = cfg_hash
        self.converter = make_converter(cfg, cfg_hash)
        self.store = RunStore(out_uri)
        self.timeout_s = cfg.ray.document_timeout_s

    async def __call__(self, batch: Batch) -> Batch:
        rows = rows_of(batch)
        await asyncio.gather(*(self._one(r) for r in rows if r.active))
        return batch_of(rows)

    async def _one(self, row: SegmentRow) -> None:
        job = row.job
        assert job is not None
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="convert-") as tmp:
            try:
                local = await asyncio.to_thread(self._local_pdf, row.pdf_uri or job.source_uri, Path(tmp))
            except OSError as exc:
                row.fail(Problem(Stage.CONVERT, "fetch", f"fetch: {exc}"))
                return
            batches = await convert_segment(self.converter, job, self.cfg, source_path=local, timeout_s=self.timeout_s)
        if isinstance(batches, Problem):
            row.fail(batches)
            return
        for b in batches:
            b.config_hash = self.cfg_hash
        await asyncio.to_thread(self.store.write_segment, BATCHES, job.doc_id, job.segment_index,
                                to_table(batches, CONVERTED_BATCH))
        row.batches = batches
        row.convert_s = time.perf_counter() - t0
        row.tokens = int(sum(b.output_tokens or 0 for b in batches if not b.context_only))

    @staticmethod
    def _local_pdf(uri: str, tmp: Path) -> str:
        if not sources.is_remote(uri):
            return sources.local_path(uri)
        dest = tmp / "document.pdf"
        sources.fetch(uri, dest)
        return str(dest)


class PlanStage:
    """CPU stage: Markdown -> elements -> chunk plans -> chunk rows, persisted per segment."""

    def __init__(self, cfg: Config, cfg_hash: str, out_uri: str) -> None:
        from chunker.plan import make_planner

        self.cfg_hash = cfg_hash
        self.store = RunStore(out_uri)
        # The LLM planner's backend loads once per actor, not once per segment.
        self.planner = make_planner(cfg)

    async def __call__(self, batch: Batch) -> Batch:
        rows = rows_of(batch)
        for row in rows:
            if not row.active:
                continue
            job = row.job
            assert job is not None
            res = await plan_segment(job, row.batches, self.planner, self.cfg_hash)
            self.store.write_segment(ELEMENTS, job.doc_id, job.segment_index,
                                     to_table(res.elements, ELEMENT, config_hash=self.cfg_hash))
            self.store.write_segment(CHUNKS, job.doc_id, job.segment_index, to_table(res.chunks, CHUNK))
            row.facts, row.chunks, row.plan_ms = res.facts, res.chunks, res.plan_ms
            row.batches = []  # persisted already; no need to carry Markdown further
        return batch_of(rows)


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
            vecs = self.embedder.encode([c.text for r in todo for c in r.chunks])
        except SetupError:
            raise
        except Exception:  # noqa: BLE001 - find the row that cannot be embedded; the others go on
            vecs = None
        start = 0
        for row in todo:
            n = len(row.chunks)
            if vecs is not None:
                row.vectors = np.asarray(vecs[start:start + n], dtype=np.float32)
            else:
                try:
                    row.vectors = np.asarray(self.embedder.encode([c.text for c in row.chunks]), dtype=np.float32)
                except SetupError:
                    raise
                except Exception as exc:  # noqa: BLE001
                    row.fail(problem_of(exc, Stage.EMBED, "embedding"))
            start += n
        dt = time.perf_counter() - t0
        total = max(1, sum(len(r.chunks) for r in todo))
        for row in todo:
            row.embed_s = dt * len(row.chunks) / total
        return batch_of(rows)
