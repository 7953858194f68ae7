"""Ingest: intake -> render -> convert -> parse -> plan -> embed -> Milvus, as one streaming Ray Data pipeline.

    python -m jobs.ingest --config configs/local.yaml --input samples/ [--output DIR] [--set key=value ...]
    ray job submit --working-dir . -- python -m jobs.ingest --config configs/local.yaml --input /data/pdfs

Each stage's rows are persisted as Parquet under the output folder (batches/, elements/, chunks/, documents.parquet),
with summary.json at the end. The driver is the one Milvus writer (Milvus Lite allows one process per data dir).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from chunker.config import Config, config_hash
from chunker.intake import InputError, iter_inputs
from chunker.runstore import RunStore
from chunker.schemas import DOCUMENT, to_table
from chunker.types import DocumentRecord
from jobs.common import base_parser, init_ray, load_or_exit, setup_logging
from jobs.stages import ConvertStage, EmbedStage, PlanStage, decode_chunks, decode_doc, intake_rows


@dataclass
class DocState:
    record: DocumentRecord
    num_segments: int = 1
    segments: int = 0
    chunks: int = 0
    fallback_pages: int = 0
    statuses: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    chunk_ids: list[str] = field(default_factory=list)

    def final(self) -> DocumentRecord:
        rec = self.record
        if rec.status != "failed" and self.statuses:
            if all(s == "failed" for s in self.statuses):
                rec.status = "failed"
            elif any(s != "ok" for s in self.statuses):
                rec.status = "partial"
        errs = [e for e in self.errors if e]
        if errs:
            rec.error = "; ".join(dict.fromkeys(errs))[:4000]
        return rec


@dataclass
class RunSummary:
    documents: int = 0
    ok: int = 0
    partial: int = 0
    failed: int = 0
    skipped: int = 0
    pages: int = 0
    chunks: int = 0
    fallback_pages: int = 0
    seconds: float = 0.0
    pages_per_s: float = 0.0
    collection_rows: int = 0
    config_hash: str = ""
    output: str = ""
    problems: list[dict[str, str]] = field(default_factory=list)


def build_dataset(cfg: Config, files: list[dict[str, str]], out_uri: str, cfg_hash: str):  # noqa: ANN201
    import ray
    from ray.data import ActorPoolStrategy

    cj = cfg.model_dump_json()
    cpu = cfg.ray.stage_num_cpus
    ds = ray.data.from_items(files)
    ds = ds.flat_map(intake_rows, fn_kwargs={"cfg_json": cj}, num_cpus=cpu)
    ds = ds.map_batches(
        ConvertStage, fn_constructor_kwargs={"cfg_json": cj, "cfg_hash": cfg_hash, "out_uri": out_uri},
        batch_size=1, num_cpus=cpu, num_gpus=cfg.ray.convert_num_gpus or None,
        compute=ActorPoolStrategy(size=cfg.ray.convert_actors,
                                  max_concurrent_calls_per_actor=cfg.ray.convert_concurrency),
    )
    ds = ds.map_batches(
        PlanStage, fn_constructor_kwargs={"cfg_json": cj, "cfg_hash": cfg_hash, "out_uri": out_uri},
        batch_size=1, num_cpus=cpu, compute=ActorPoolStrategy(size=1),
    )
    ds = ds.map_batches(
        EmbedStage, fn_constructor_kwargs={"cfg_json": cj}, batch_size=4, num_cpus=cpu,
        num_gpus=cfg.ray.embed_num_gpus or None, compute=ActorPoolStrategy(size=cfg.ray.embed_actors),
    )
    return ds


def consume(rows: Any, store: Any, docs: dict[str, DocState]) -> None:
    """The single writer: upsert each segment's chunks as it arrives; track per-document outcome."""
    for row in rows:
        rec = decode_doc(row)
        key = rec.doc_id or rec.source
        job = json.loads(row["job_json"]) if row["job_json"] else {}
        st = docs.get(key)
        if st is None:
            st = docs[key] = DocState(record=rec, num_segments=job.get("num_segments", 1))
            if rec.doc_id and rec.status != "failed":
                # A changed file gets a new doc_id: its old version's chunks go.
                store.delete_other_versions(rec.source, rec.doc_id)
        st.segments += 1
        st.statuses.append(row["status"])
        st.errors.append(row["error"])
        st.fallback_pages += int(row.get("fallback_pages") or 0)
        chunks, vecs = decode_chunks(row)
        if chunks:
            store.upsert(chunks, vecs)
            st.chunks += len(chunks)
            st.chunk_ids.extend(c.chunk_id for c in chunks)
        if st.segments == st.num_segments and rec.doc_id and rec.status != "failed":
            # Chunks of this document from an earlier run with other settings must not linger.
            store.delete_doc_except(rec.doc_id, set(st.chunk_ids))


def run_ingest(cfg: Config, input_path: str, output: str | None = None) -> RunSummary:
    from chunker.embed import Embedder
    from chunker.store import ChunkStore

    t0 = time.perf_counter()
    out_uri = output or cfg.output.dir
    runstore = RunStore(out_uri)
    h = config_hash(cfg)
    files = [{"path": f.path, "source": f.source} for f in iter_inputs(input_path, cfg.intake)]
    init_ray(cfg)
    dim = Embedder.dimension(cfg.embed)
    store = ChunkStore(cfg.milvus, dim)
    docs: dict[str, DocState] = {}
    try:
        if files:
            ds = build_dataset(cfg, files, out_uri, h)
            consume(ds.iter_rows(), store, docs)
        store.flush()
        collection_rows = store.count()
    finally:
        store.close()
    records = [st.final() for st in docs.values()]
    table_rows = [{**asdict(r), "num_chunks": docs[r.doc_id or r.source].chunks,
                   "fallback_pages": docs[r.doc_id or r.source].fallback_pages} for r in records]
    runstore.write("documents", "documents", to_table(table_rows, DOCUMENT, config_hash=h))
    dt = time.perf_counter() - t0
    pages = sum(r.num_pages for r in records if r.status != "failed")
    summary = RunSummary(
        documents=len(records), ok=sum(r.status == "ok" for r in records),
        partial=sum(r.status == "partial" for r in records), failed=sum(r.status == "failed" for r in records),
        pages=pages, chunks=sum(st.chunks for st in docs.values()),
        fallback_pages=sum(st.fallback_pages for st in docs.values()), seconds=round(dt, 2),
        pages_per_s=round(pages / dt, 3) if dt else 0.0, collection_rows=collection_rows, config_hash=h,
        output=runstore.root,
        problems=[{"source": r.source, "status": r.status, "reason": r.error} for r in records if r.status != "ok"],
    )
    runstore.write_json("summary.json", asdict(summary))
    return summary


def print_summary(s: RunSummary) -> None:
    print(f"\n== ingest summary ({s.output}) ==")
    print(f"documents: {s.documents}  ok: {s.ok}  partial: {s.partial}  failed: {s.failed}")
    print(f"pages: {s.pages}  chunks: {s.chunks}  fallback pages: {s.fallback_pages}  "
          f"collection rows: {s.collection_rows}")
    print(f"time: {s.seconds:.1f} s  throughput: {s.pages_per_s:.2f} pages/s  config hash: {s.config_hash}")
    for p in s.problems:
        print(f"  {p['status']:8s} {p['source']}: {p['reason']}")


def main(argv: list[str] | None = None) -> int:
    p = base_parser("Ingest PDFs into Milvus through the Ray Data pipeline.")
    p.add_argument("--input", required=True, help="a directory, glob, single PDF or manifest (.txt/.jsonl)")
    p.add_argument("--output", default=None, help="run output folder (default: output.dir from the config)")
    args = p.parse_args(argv)
    setup_logging()
    cfg = load_or_exit(args)
    try:
        summary = run_ingest(cfg, args.input, args.output)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print_summary(summary)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
