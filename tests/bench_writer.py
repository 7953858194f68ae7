"""Micro benchmark of the driver's per-document cost when it closes documents (not a test; run by hand):

    PYTHONPATH=$PWD python tests/bench_writer.py [--docs 2000] [--commit 100] [--repeat 3]

On Milvus Lite: a collection holding ``--docs`` documents of 8 chunks (an earlier run), then commits of ``--commit``
new versions of some of them. Measures, per document, what the driver does after the chunks are upserted:

* before: what the writer did until this change, per document: ``count(*)`` at Strong consistency over the
  unindexed ``source`` field and a delete when it matched, the same for the document's own stale chunks, then the
  ledger entry;
* after: :class:`chunker.run.writer.Writer`'s commit: one delete expression for the commit over the indexed
  ``source_uri``/``doc_id`` fields, then the ledger entries.

The upsert of the new chunks is the same in both and timed apart. Prints one JSON line per repeat.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from chunker.config import MilvusConfig
from chunker.index.bulk import ChunkSink
from chunker.index.store import ChunkStore
from chunker.run.layout import RunStore
from chunker.run.ledger import Ledger
from chunker.run.rows import SegmentRow
from chunker.run.verdict import SegmentFacts
from chunker.run.writer import Writer
from chunker.types import Chunk, DocumentRecord, SegmentJob

DIM = 384
PER_DOC = 8


def _chunks(doc: str, uri: str) -> list[Chunk]:
    return [Chunk(f"{doc}:{i}", doc, [f"{doc}:{i}"], f"text of {doc} {i} " * 20, "A > B", 1, 1, "text",
                  "deterministic", "h", source=uri.rsplit("/", 1)[1], source_uri=uri) for i in range(PER_DOC)]


def _vecs(n: int, seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _old_close(store: ChunkStore, ledger: Ledger, rec: DocumentRecord, keep: list[str]) -> None:
    """The per-document sequence of the writer before this change (store calls spelled out)."""
    c = store.client

    def count_then_delete(expr: str) -> None:
        n = c.query(store.collection, filter=expr, output_fields=["count(*)"], consistency_level="Strong")
        if n and int(n[0]["count(*)"]):
            c.delete(store.collection, filter=expr)

    count_then_delete(f'source == "{rec.source}" and doc_id != "{rec.doc_id}"')
    count_then_delete(f'doc_id == "{rec.doc_id}" and chunk_id not in {json.dumps(sorted(keep))}')
    ledger.mark_done(rec.doc_id, status="ok", chunks=len(keep), source=rec.source)


def run(docs: int, commit: int, repeat: int) -> None:
    root = Path(tempfile.mkdtemp(prefix="bench-writer-"))
    try:
        store = ChunkStore(MilvusConfig(uri=str(root / "m.db"), upsert_batch=1000), DIM)
        base = [c for k in range(docs) for c in _chunks(f"v0-{k}", f"/corpus/{k}.pdf")]
        for i in range(0, len(base), 4000):
            store.upsert(base[i:i + 4000], _vecs(len(base[i:i + 4000]), i))
        store.flush()
        for r in range(repeat):
            for mode in ("before", "after"):
                ks = range((2 * r + (mode == "after")) * commit, (2 * r + (mode == "after") + 1) * commit)
                run_store = RunStore(str(root / f"run-{mode}-{r}"))
                ledger = Ledger(run_store.uri, "h", "m#chunks")
                new = {k: _chunks(f"v1-{k}", f"/corpus/{k}.pdf") for k in ks}
                if mode == "before":
                    allc = [c for cs in new.values() for c in cs]
                    t0 = time.perf_counter()
                    store.upsert(allc, _vecs(len(allc), r))
                    t1 = time.perf_counter()
                    for k, cs in new.items():
                        rec = DocumentRecord(f"v1-{k}", f"/corpus/{k}.pdf", f"{k}.pdf", 1)
                        _old_close(store, ledger, rec, [c.chunk_id for c in cs])
                else:
                    writer = Writer(store, ChunkSink(store, store.cfg), ledger, run_store, "h", 0.25, 10**9, 3600)
                    for k, cs in new.items():
                        rec = DocumentRecord(f"v1-{k}", f"/corpus/{k}.pdf", f"{k}.pdf", 1)
                        job = SegmentJob(rec.doc_id, rec.source_uri, rec.source, 1, 0, 1, 1, 1, 1, 4)
                        writer.add(SegmentRow(rec, job=job, facts=SegmentFacts(0, 1), chunks=cs,
                                              vectors=_vecs(len(cs), k), source_version="1:1"))
                    t0 = time.perf_counter()
                    writer.sink.commit()  # the upsert, timed apart
                    t1 = time.perf_counter()
                    writer.commit()  # nothing pending now: the deletes and the ledger entries
                t2 = time.perf_counter()
                left = store.client.query(store.collection, filter=f'doc_id like "v0-%" and source_uri in '
                                          f'{json.dumps([f"/corpus/{k}.pdf" for k in ks])}',
                                          output_fields=["count(*)"], consistency_level="Strong")[0]["count(*)"]
                print(json.dumps({"repeat": r, "mode": mode, "docs_in_collection": docs, "commit_docs": commit,
                                  "upsert_ms_per_doc": round((t1 - t0) * 1000 / commit, 2),
                                  "close_ms_per_doc": round((t2 - t1) * 1000 / commit, 2),
                                  "stale_left": int(left)}), flush=True)
        store.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--docs", type=int, default=2000)
    p.add_argument("--commit", type=int, default=100)
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args()
    run(a.docs, a.commit, a.repeat)


if __name__ == "__main__":
    main()
