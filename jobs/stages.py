"""Ray Data stage UDFs: thin wrappers that move rows in and out of the :mod:`chunker.run.segment` functions.

Rows are flat: small scalar columns plus JSON strings for nested payloads (segment job, document record, batches,
chunks) and raw float32 bytes for vectors, so no stage depends on Arrow inferring nested types from a few rows.
Every stage keeps a failing item on its row (status + error) and lets the run go on; only fatal engine errors raise.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np

from chunker.intake import sources
from chunker.backends.base import BackendUnavailable, EngineDead
from chunker.config import Config
from chunker.intake.files import InputFile, plan_segments, prepare
from chunker.intake.normalize import kind_of
from chunker.run.segment import convert_segment, make_converter, plan_segment, planner_for
from chunker.run.layout import RunStore
from chunker.schemas import CHUNK, CONVERTED_BATCH, ELEMENT, to_table
from chunker.types import Chunk, ConvertedBatch, DocumentRecord, SegmentJob

Batch = dict[str, Any]
DONE = ("failed", "skipped")  # rows in these states pass through the later stages untouched


def rows_of(batch: Batch) -> list[dict[str, Any]]:
    keys = list(batch)
    n = len(batch[keys[0]]) if keys else 0
    return [{k: _py(batch[k][i]) for k in keys} for i in range(n)]


def batch_of(rows: list[dict[str, Any]]) -> Batch:
    keys = list(rows[0]) if rows else []
    return {k: [r[k] for r in rows] for k in keys}


def _py(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def segment_key(job: SegmentJob) -> str:
    return f"{job.doc_id}-{job.segment_index:05d}"


def _doc_row(doc: DocumentRecord, **extra: Any) -> dict[str, Any]:
    return {"doc_json": json.dumps(asdict(doc)), "status": doc.status, "error": doc.error, "job_json": "",
            "batches_json": "[]", "convert_s": 0.0, "pdf_uri": "", "pages": 0, "tokens": 0, **extra}


def intake_rows(row: dict[str, Any], cfg_json: str, out_uri: str = "", cfg_hash: str = "", target: str = "",
                force: bool = True) -> list[dict[str, Any]]:
    """flat_map: one input -> one row per segment, or one failed / skipped row.

    Runs on a worker: object-store files are fetched here, hashed (the doc_id), checked against the done ledger
    and normalised to PDF in a worker-local temp folder that is removed before returning. A normalised PDF is
    kept in the run's output storage so the conversion actor (maybe on another node) can fetch it.
    """
    from chunker.run.ledger import Ledger

    cfg = Config.model_validate_json(cfg_json)
    source = row.get("source") or row.get("path") or ""
    if row.get("error"):  # a bad manifest line
        return [_doc_row(DocumentRecord("", row.get("path") or "", source, 0, "failed", row["error"]))]
    ledger = Ledger(out_uri, cfg_hash, target) if out_uri and cfg_hash and not force else None
    with tempfile.TemporaryDirectory(prefix="intake-") as tmp:
        doc, pdf = prepare(InputFile(path=row["path"], source=source), cfg.intake, Path(tmp),
                           skip=ledger.is_done if ledger else None)
        if doc.status in DONE:
            return [_doc_row(doc)]
        pdf_uri = doc.source_uri
        if kind_of(row["path"]) != "pdf":
            # Normalised from another format: the PDF becomes a run artefact that any node can fetch by URI.
            pdf_uri = sources.upload(Path(pdf), sources.join_uri(out_uri, f"normalized/{doc.doc_id}.pdf"))
    return [_doc_row(doc, job_json=json.dumps(asdict(job)), pdf_uri=pdf_uri,
                     pages=job.page_end - job.page_start + 1)
            for job in plan_segments(doc, cfg.intake)]


class ConvertStage:
    """The conversion actor: many segment chains in flight at once (async), each strictly in order."""

    def __init__(self, cfg_json: str, cfg_hash: str, out_uri: str, timeout_s: float | None = None) -> None:
        self.cfg = Config.model_validate_json(cfg_json)
        self.cfg_hash = cfg_hash
        self.converter = make_converter(self.cfg, cfg_hash)
        self.store = RunStore(out_uri)
        self.timeout_s = timeout_s

    async def __call__(self, batch: Batch) -> Batch:
        rows = rows_of(batch)
        await asyncio.gather(*(self._one(r) for r in rows))
        return batch_of(rows)

    async def _one(self, row: dict[str, Any]) -> None:
        row.setdefault("tokens", 0)
        if row["status"] in DONE or not row["job_json"]:
            return
        job = SegmentJob(**json.loads(row["job_json"]))
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="convert-") as tmp:
            try:
                local = await asyncio.to_thread(self._local_pdf, row.get("pdf_uri") or job.source_uri, Path(tmp))
            except OSError as exc:
                row["status"], row["error"] = "failed", f"fetch: {exc}"
                return
            # The converter reads the local copy; the job (and so every chunk) keeps the original URI.
            run_job = replace(job, source_uri=local)
            try:
                batches = await asyncio.wait_for(convert_segment(self.converter, run_job, self.cfg), self.timeout_s)
            except (BackendUnavailable, EngineDead):
                raise  # the actor must die (Ray restarts it); never a silent per-row failure
            except asyncio.TimeoutError:
                row["status"], row["error"] = "failed", f"conversion timed out after {self.timeout_s:.0f} s"
                return
            except Exception as exc:  # one broken document fails alone
                row["status"], row["error"] = "failed", f"conversion: {type(exc).__name__}: {exc}"
                return
        for b in batches:
            b.config_hash = self.cfg_hash
        self.store.write("batches", segment_key(job), to_table(batches, CONVERTED_BATCH))
        row["batches_json"] = json.dumps([asdict(b) for b in batches])
        row["convert_s"] = time.perf_counter() - t0
        row["tokens"] = int(sum(b.output_tokens or 0 for b in batches if not b.context_only))

    @staticmethod
    def _local_pdf(uri: str, tmp: Path) -> str:
        if not sources.is_remote(uri):
            return sources.local_path(uri)
        dest = tmp / "document.pdf"
        sources.fetch(uri, dest)
        return str(dest)


class PlanStage:
    """CPU stage: Markdown -> elements -> chunk plans -> chunk rows, persisted per segment."""

    def __init__(self, cfg_json: str, cfg_hash: str, out_uri: str) -> None:
        self.cfg = Config.model_validate_json(cfg_json)
        self.cfg_hash = cfg_hash
        self.store = RunStore(out_uri)
        # The LLM planner's backend loads once per actor, not once per segment (None: deterministic planner).
        self.planner = planner_for(self.cfg)

    def __call__(self, batch: Batch) -> Batch:
        rows = rows_of(batch)
        for row in rows:
            row["chunks_json"] = "[]"
            row["fallback_pages"] = 0
            row["plan_ms"] = 0.0
            if row["status"] in DONE or not row["job_json"]:
                continue
            job = SegmentJob(**json.loads(row["job_json"]))
            batches = [ConvertedBatch(**b) for b in json.loads(row["batches_json"])]
            res = plan_segment(job, batches, self.cfg, self.cfg_hash, planner=self.planner)
            key = segment_key(job)
            self.store.write("elements", key, to_table(res.elements, ELEMENT, config_hash=self.cfg_hash))
            self.store.write("chunks", key, to_table(res.chunks, CHUNK))
            row.update(status=res.status, error=res.error, fallback_pages=res.fallback_pages, plan_ms=res.plan_ms,
                       chunks_json=json.dumps([asdict(c) for c in res.chunks]))
            row["batches_json"] = "[]"  # persisted already; no need to carry Markdown further
        return batch_of(rows)


class EmbedStage:
    """Embedding actor: loads the model once; adds float32 vectors (raw bytes) for each row's chunks."""

    def __init__(self, cfg_json: str) -> None:
        from chunker.index.embed import Embedder

        self.embedder = Embedder(Config.model_validate_json(cfg_json).embed)

    def __call__(self, batch: Batch) -> Batch:
        rows = rows_of(batch)
        texts: list[str] = []
        counts: list[int] = []
        for row in rows:
            chunks = json.loads(row["chunks_json"])
            texts.extend(c["text"] for c in chunks)
            counts.append(len(chunks))
        t0 = time.perf_counter()
        vecs = self.embedder.encode(texts)
        dt = time.perf_counter() - t0
        start = 0
        for row, n in zip(rows, counts):
            row["vectors"] = vecs[start:start + n].astype(np.float32).tobytes()
            row["dim"] = self.embedder.dim
            row["embed_s"] = dt * (n / max(1, len(texts)))
            start += n
        return batch_of(rows)


def decode_chunks(row: dict[str, Any]) -> tuple[list[Chunk], np.ndarray]:
    chunks = [Chunk(**c) for c in json.loads(row["chunks_json"])]
    vecs = np.frombuffer(row["vectors"], dtype=np.float32).reshape(len(chunks), int(row["dim"])) if chunks else \
        np.zeros((0, int(row["dim"])), dtype=np.float32)
    return chunks, vecs


def decode_doc(row: dict[str, Any]) -> DocumentRecord:
    return DocumentRecord(**json.loads(row["doc_json"]))
