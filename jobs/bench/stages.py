"""CPU-stage experiment of the benchmark: cost per page of each CPU stage, and end-to-end ``run_ingest`` pages/s.

Every stage runs alone, one after the other, in one process, so each figure is the cost of that stage on one core
(pdfium and the Python stages are single-threaded here). The ``*_step`` functions are what the benchmark runs, each in
a process of its own (:mod:`jobs.bench.isolate`): they take and return JSON values.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from chunker.config import Config, config_hash
from chunker.intake.inputs import InputFile
from chunker.intake.prepare import inspect
from chunker.intake.segments import plan_segments
from chunker.contract import parse_batches
from chunker.plan.deterministic import build_chunks, plan
from chunker.convert.render import RenderedDocument


def _ms(seconds: float, pages: int) -> float:
    return round(1000 * seconds / pages, 2) if pages else 0.0


def stage_costs(cfg: Config, paths: list[str], embed: bool = True, milvus: bool = True,
                embed_sample: int = 256) -> dict[str, Any]:
    """ms per page of intake (hash, checks, the identity read from the text layer), render, encode, convert
    (pdf-text), parse, plan; chunks/s embedded; rows/s into Milvus Lite."""
    from chunker.convert.pdf_text import PdfTextConverter

    h = config_hash(cfg)
    conv = PdfTextConverter(cfg.converter, h)
    intake_s = render_s = encode_s = convert_s = parse_s = plan_s = 0.0
    pages = 0
    chunks = []
    for p in paths:
        t = time.perf_counter()
        doc = inspect(InputFile(path=p, source=Path(p).name), cfg.intake)
        intake_s += time.perf_counter() - t
        if doc.status == "failed":
            continue
        rd = RenderedDocument(doc.source_uri, cfg.render)
        try:
            for n in range(1, doc.num_pages + 1):
                r = rd.render(n)
                render_s += r.render_ms / 1000
                encode_s += r.encode_ms / 1000
                rd.drop([n])
        finally:
            rd.close()
        for job in plan_segments(doc, cfg.intake):
            t0 = time.perf_counter()
            batches = conv.convert_sync(job)
            t1 = time.perf_counter()
            elements = parse_batches(job.doc_id, batches, job.segment_index)
            t2 = time.perf_counter()
            plans = plan(elements, cfg.planner)
            chunks += build_chunks(elements, plans, cfg.planner, h, job.source, job.source_uri)
            t3 = time.perf_counter()
            convert_s, parse_s, plan_s = convert_s + t1 - t0, parse_s + t2 - t1, plan_s + t3 - t2
        pages += doc.num_pages
    out: dict[str, Any] = {
        "documents": len(paths), "pages": pages, "chunks": len(chunks),
        "ms_per_page": {"intake": _ms(intake_s, pages), "render": _ms(render_s, pages),
                        "encode": _ms(encode_s, pages), "convert_pdf_text": _ms(convert_s, pages),
                        "parse": _ms(parse_s, pages),
                        "plan": _ms(plan_s, pages)},
    }
    ms = out["ms_per_page"]
    out["render_encode_parse_plan_ms"] = round(ms["render"] + ms["encode"] + ms["parse"] + ms["plan"], 2)
    vecs = None
    if embed and chunks:
        from chunker.index.embed import Embedder

        emb = Embedder(cfg.embed)
        chunks = chunks[:embed_sample]  # a sample: MiniLM on 2 cores runs at tens of chunks per second
        texts = [c.text for c in chunks]
        emb.encode(texts[:8])  # warm-up: the first call pays for lazy initialisation
        t0 = time.perf_counter()
        vecs = emb.encode(texts)
        dt = time.perf_counter() - t0
        out["embed_chunks_per_s"] = round(len(texts) / dt, 1)
        out["embed_sample"] = len(texts)
        out["embed_mean_chars"] = round(sum(len(t) for t in texts) / len(texts))
    if milvus and chunks and vecs is not None:
        out["milvus_rows_per_s"] = _milvus_rate(cfg, chunks, vecs)
    return out


def _milvus_rate(cfg: Config, chunks: list[Any], vecs: Any) -> float:
    from chunker.index.store import ChunkStore

    tmp = Path(tempfile.mkdtemp(prefix="bench-milvus-"))
    mcfg = cfg.milvus.model_copy(update={"uri": str(tmp / "bench.db"), "collection": "bench"})
    try:
        with ChunkStore(mcfg, int(vecs.shape[1])) as store:
            t0 = time.perf_counter()
            store.upsert(chunks, vecs)
            store.flush()
            return round(len(chunks) / (time.perf_counter() - t0), 1)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def end_to_end(cfg: Config, input_dir: Path, workdir: Path) -> dict[str, Any]:
    """``jobs.ingest.run_ingest`` on a folder (pdf-text, MiniLM, Milvus Lite), Ray started and stopped here."""
    import ray

    from jobs.ingest import run_ingest

    if not input_dir.is_dir():
        return {"skipped": f"{input_dir} not found"}
    out = workdir / "e2e-run"
    shutil.rmtree(out, ignore_errors=True)
    cfg = cfg.model_copy(deep=True)
    cfg.milvus.uri = str(workdir / "e2e-milvus.db")
    shutil.rmtree(cfg.milvus.uri, ignore_errors=True)
    from jobs.bench.cpu import CpuSampler

    t0 = time.perf_counter()
    with CpuSampler() as cpu:
        try:
            summary = run_ingest(cfg, str(input_dir), str(out))
            cpu.sample()  # before shutdown ends the workers
        finally:
            ray.shutdown()
    shutil.rmtree(cfg.milvus.uri, ignore_errors=True)
    return {"pipeline": "ours (jobs.ingest)", "input": str(input_dir.resolve()), "documents": summary.documents,
            "pages": summary.pages, "chunks": summary.chunks, "collection_rows": summary.collection_rows,
            "seconds": summary.seconds, "pages_per_s": summary.pages_per_s, "failed_documents": summary.failed,
            "partial": summary.partial, "timing": summary.timing, "cpu": cpu.report(),
            "settings": {k: v for k, v in summary.settings.items() if k.startswith(("ray.", "embed."))},
            "wall_with_shutdown_s": round(time.perf_counter() - t0, 2)}


def stage_costs_step(cfg: dict[str, Any], paths: list[str], embed: bool, milvus: bool,
                     embed_sample: int) -> dict[str, Any]:
    return stage_costs(Config.model_validate(cfg), paths, embed=embed, milvus=milvus, embed_sample=embed_sample)


def end_to_end_step(cfg: dict[str, Any], input_dir: str, workdir: str) -> dict[str, Any]:
    return end_to_end(Config.model_validate(cfg), Path(input_dir), Path(workdir))


def prepare_step(cfg: dict[str, Any]) -> dict[str, Any]:
    """The embedder's ONNX export, made before anything is timed (a first run on a fresh machine builds it once)."""
    from chunker.index.embed import Embedder

    t0 = time.perf_counter()
    backend = Embedder.prepare(Config.model_validate(cfg).embed)
    return {"backend": backend, "seconds": round(time.perf_counter() - t0, 2)}
