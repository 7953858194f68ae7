"""The driver's single writer: takes the pipeline's rows, loads chunks into Milvus, and closes documents.

A document is closed only after its chunks are committed (upsert or bulk import): then its stale chunks from
earlier versions or settings are deleted, its done-ledger entry is written and its status row goes out. Memory
stays bounded on any corpus size: per document in flight, the chunk IDs; otherwise only counters and a block of
status rows flushed every ``DOC_PART_ROWS`` documents.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from chunker.index.bulk import ChunkSink
from chunker.run.layout import RunStore
from chunker.schemas import DOCUMENT, to_table
from chunker.types import DocumentRecord
from chunker.run.ledger import Ledger
from jobs.progress import Progress
from jobs.stages import decode_chunks, decode_doc

DOC_PART_ROWS = 1000
MAX_PROBLEMS = 1000  # in summary.json; the full list is documents/*.parquet


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
        if rec.status not in ("failed", "skipped") and self.statuses:
            if all(s == "failed" for s in self.statuses):
                rec.status = "failed"
            elif any(s != "ok" for s in self.statuses):
                rec.status = "partial"
        errs = [e for e in self.errors if e]
        if errs:
            rec.error = "; ".join(dict.fromkeys(errs))[:4000]
        return rec


@dataclass
class Totals:
    documents: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    pages: int = 0
    chunks: int = 0
    fallback_pages: int = 0
    problems: list[dict[str, str]] = field(default_factory=list)
    problems_total: int = 0


class Writer:
    def __init__(self, store: Any, sink: ChunkSink, ledger: Ledger, progress: Progress, runstore: RunStore,
                 cfg_hash: str, commit_rows: int, commit_interval_s: float) -> None:
        self.store = store
        self.sink = sink
        self.ledger = ledger
        self.progress = progress
        self.runstore = runstore
        self.cfg_hash = cfg_hash
        self.commit_rows = commit_rows
        self.commit_interval_s = commit_interval_s
        self.docs: dict[str, DocState] = {}
        self.waiting: list[DocState] = []  # finished in the pipeline, chunks not yet committed
        self.doc_rows: list[dict[str, Any]] = []
        self.parts = 0
        self.totals = Totals()
        self.last_commit = time.monotonic()
        runstore.fs.delete_dir_contents(runstore.path("documents"), missing_dir_ok=True)

    def consume(self, rows: Any) -> None:
        for row in rows:
            self.add(row)
            if self.sink.pending >= self.commit_rows or (
                    self.waiting and time.monotonic() - self.last_commit >= self.commit_interval_s):
                self.commit()
        self.commit()
        self.flush_doc_rows()

    def add(self, row: dict[str, Any]) -> None:
        rec = decode_doc(row)
        key = rec.doc_id or rec.source
        job = json.loads(row["job_json"]) if row["job_json"] else {}
        st = self.docs.get(key)
        if st is None:
            st = self.docs[key] = DocState(record=rec, num_segments=job.get("num_segments", 1))
        st.segments += 1
        st.statuses.append(row["status"])
        st.errors.append(row["error"] if row["status"] != "skipped" else "")
        st.fallback_pages += int(row.get("fallback_pages") or 0)
        self.progress.segment(int(row.get("pages") or 0) if row["status"] not in ("failed", "skipped") else 0,
                              int(row.get("tokens") or 0))
        chunks, vecs = decode_chunks(row)
        if chunks:
            self.sink.add(chunks, vecs)
            st.chunks += len(chunks)
            st.chunk_ids.extend(c.chunk_id for c in chunks)
        if st.segments >= st.num_segments:
            del self.docs[key]
            if st.chunks:
                self.waiting.append(st)
            else:
                self.close(st)

    def commit(self) -> None:
        self.sink.commit()
        self.last_commit = time.monotonic()
        waiting, self.waiting = self.waiting, []
        for st in waiting:
            self.close(st)

    def close(self, st: DocState) -> None:
        rec = st.final()
        if rec.doc_id and rec.status in ("ok", "partial"):
            # A changed file gets a new doc_id, and new settings a new plan: chunks of either must not linger.
            self.store.delete_other_versions(rec.source, rec.doc_id)
            self.store.delete_doc_except(rec.doc_id, set(st.chunk_ids))
            self.ledger.mark_done(rec.doc_id, status=rec.status, chunks=st.chunks, source=rec.source)
        t = self.totals
        t.documents += 1
        t.by_status[rec.status] = t.by_status.get(rec.status, 0) + 1
        if rec.status in ("ok", "partial"):
            t.pages += rec.num_pages
            t.chunks += st.chunks
            self.progress.written(st.chunks)
        t.fallback_pages += st.fallback_pages
        if rec.status in ("partial", "failed"):
            t.problems_total += 1
            if len(t.problems) < MAX_PROBLEMS:
                t.problems.append({"source": rec.source, "status": rec.status, "reason": rec.error})
        self.progress.document(rec.status)
        self.doc_rows.append({**asdict(rec), "num_chunks": st.chunks, "fallback_pages": st.fallback_pages})
        if len(self.doc_rows) >= DOC_PART_ROWS:
            self.flush_doc_rows()

    def flush_doc_rows(self) -> None:
        if not self.doc_rows:
            return
        self.runstore.write("documents", f"documents-{self.parts:05d}",
                            to_table(self.doc_rows, DOCUMENT, config_hash=self.cfg_hash))
        self.parts += 1
        self.doc_rows = []
