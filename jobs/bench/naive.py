"""The naive pipeline the benchmark sets ours against: what a user could write in an afternoon instead.

pypdfium2's text layer, page after page -> fixed windows of ``window`` characters overlapping by ``overlap`` ->
the same MiniLM through the same :class:`Embedder` with our defaults (``embed.backend`` as given, on every core;
onnx runs one passage per call, torch batches of ``batch_size``) -> Milvus Lite insert; one process, no Ray, no
Parquet, no ledger, no structure. It keeps nothing our chunks keep (headings, tables, page spans, element IDs), so it
is a floor on cost, not a rival in quality. Timed per step and whole; the caller runs it in its own process
(:mod:`jobs.bench.isolate`), so the process's wall time, imports included, is the whole-run figure.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any


def windows(text: str, window: int = 1000, overlap: int = 200) -> list[str]:
    """Fixed character windows, each starting ``window - overlap`` after the previous; the last may be short."""
    text = text.strip()
    if not text:
        return []
    step = max(1, window - overlap)
    out = []
    for start in range(0, len(text), step):
        out.append(text[start:start + window])
        if start + window >= len(text):
            break
    return out


def naive_ingest(paths: list[str], backend: str, milvus_uri: str, window: int = 1000, overlap: int = 200,
                 batch_size: int = 64, insert_batch: int = 1000) -> dict[str, Any]:
    """Ingest ``paths`` the naive way; returns pages, chunks and seconds per step (load is model load)."""
    t_start = time.perf_counter()
    import pypdfium2 as pdfium

    from chunker.config import EmbedConfig
    from chunker.index.embed import Embedder

    steps: dict[str, float] = {}
    t0 = time.perf_counter()
    emb = Embedder(EmbedConfig(backend=backend, batch_size=batch_size))  # type: ignore[arg-type]
    steps["model_load_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    texts, sources, pages = [], [], 0
    for p in paths:
        pdf = pdfium.PdfDocument(p)
        try:
            doc = []
            for page in pdf:
                tp = page.get_textpage()
                doc.append(tp.get_text_range())
                tp.close()
                page.close()
            pages += len(pdf)
        finally:
            pdf.close()
        for w in windows("\n".join(doc), window, overlap):
            texts.append(w)
            sources.append(p)
    steps["extract_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    vecs = emb.encode(texts)
    steps["embed_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    from pymilvus import MilvusClient

    shutil.rmtree(milvus_uri, ignore_errors=True)
    client = MilvusClient(milvus_uri)
    client.create_collection("naive", dimension=int(vecs.shape[1]), auto_id=True)
    steps["store_open_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    for i in range(0, len(texts), insert_batch):
        client.insert("naive", [{"vector": v.tolist(), "text": t, "source": s} for v, t, s in
                                zip(vecs[i:i + insert_batch], texts[i:i + insert_batch], sources[i:i + insert_batch])])
    client.flush("naive")
    rows = client.get_collection_stats("naive").get("row_count")
    steps["insert_s"] = time.perf_counter() - t0
    client.close()
    wall = time.perf_counter() - t_start
    return {"pipeline": f"naive ({emb.backend})", "backend": emb.backend, "documents": len(paths), "pages": pages,
            "chunks": len(texts), "collection_rows": rows,
            "mean_chunk_chars": round(sum(map(len, texts)) / max(1, len(texts))),
            "seconds": round(wall, 2), "pages_per_s": round(pages / wall, 2) if wall else 0.0,
            "steps_s": {k: round(v, 2) for k, v in steps.items()}}


def naive_step(paths: list[str], backend: str, workdir: str) -> dict[str, Any]:
    """:func:`naive_ingest` into a fresh Milvus Lite folder under ``workdir`` (removed afterwards)."""
    from jobs.bench.cpu import CpuSampler

    uri = str(Path(workdir) / f"naive-{backend}.db")
    try:
        with CpuSampler() as cpu:
            out = naive_ingest(paths, backend, uri)
        return {**out, "cpu": cpu.report()}
    finally:
        shutil.rmtree(uri, ignore_errors=True)
