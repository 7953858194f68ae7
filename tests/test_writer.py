"""The driver's writer on Milvus Lite: a ledger entry only after a document's last segment is in, its chunks are
committed and its stale chunks are deleted; stale deletes batched per commit with no count queries; versions keyed
on the absolute source URI."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from chunker.config import MilvusConfig
from chunker.index.bulk import ChunkSink
from chunker.index.store import ChunkStore
from chunker.run.layout import RunStore
from chunker.run.ledger import Ledger
from chunker.run.rows import SegmentRow
from chunker.run.verdict import SegmentFacts
from chunker.run.writer import Writer
from chunker.types import Chunk, DocumentRecord, Problem, SegmentJob, Stage

DIM = 8


def chunks(doc: str, seg: int, n: int, uri: str, source: str) -> list[Chunk]:
    return [Chunk(f"{doc}:{seg}:{i}", doc, [f"{doc}:{seg * 100 + i}"], f"text {doc} {seg} {i}", "", 1, 1, "text",
                  "deterministic", "h", source=source, source_uri=uri) for i in range(n)]


def seg_row(doc: str, uri: str, seg: int, of: int, n: int = 2, source: str = "x.pdf", failed: bool = False,
            version: str = "10:1") -> SegmentRow:
    rec = DocumentRecord(doc, uri, source, of * 10)
    job = SegmentJob(doc, uri, source, of * 10, seg, of, seg * 10 + 1, seg * 10 + 10, seg * 10 + 1, 4)
    if failed:
        facts = SegmentFacts(seg, 10, failed=True, problems=[Problem(Stage.CONVERT, "timeout", "timed out")])
        return SegmentRow(rec, job=job, facts=facts, source_version=version)
    cs = chunks(doc, seg, n, uri, source)
    return SegmentRow(rec, job=job, facts=SegmentFacts(seg, 10), chunks=cs,
                      vectors=np.random.default_rng(seg).normal(size=(n, DIM)).astype(np.float32),
                      source_version=version)


@pytest.fixture()
def setup(tmp_path: Path):
    store = ChunkStore(MilvusConfig(uri=str(tmp_path / "m.db")), DIM)
    run = RunStore(str(tmp_path / "run"))
    ledger = Ledger(run.uri, "h", "m#chunks")
    writer = Writer(store, ChunkSink(store, store.cfg), ledger, run, "h", 0.25, commit_rows=10_000,
                    commit_interval_s=3600)
    yield store, ledger, writer
    store.close()


def test_ledger_entry_only_after_last_segment_commit_and_stale_delete(setup, monkeypatch):
    store, ledger, writer = setup
    # Already in the collection: an earlier version of /root1/x.pdf, and the same relative name under /root2.
    writer.consume([seg_row("old", "/root1/x.pdf", 0, 1, n=3), seg_row("other", "/root2/x.pdf", 0, 1)])
    assert ledger.is_done("old") and ledger.is_done("other")

    calls: list[tuple[str, str]] = []
    for name in ("delete", "query"):
        real = getattr(store.client, name)
        monkeypatch.setattr(store.client, name, lambda *a, _n=name, _r=real, **kw: calls.append((_n, kw.get(
            "filter", ""))) or _r(*a, **kw))
    for seg in (2, 0):  # segments arrive in any order
        writer.add(seg_row("new", "/root1/x.pdf", seg, 3))
        assert not ledger.is_done("new")
    writer.add(seg_row("new", "/root1/x.pdf", 1, 3))
    assert not ledger.is_done("new"), "complete, but its chunks are not committed yet"
    assert calls == []
    writer.commit()
    assert ledger.is_done("new")
    assert [c[0] for c in calls] == ["delete"], "one delete for the commit, no count queries"
    ids = store.chunk_ids()
    assert {i.split(":")[0] for i in ids} == {"new", "other"}, "old version gone, the other root's document stays"
    assert ledger.done_by_uri("/root1/x.pdf", "10:1") == "new"


def test_a_document_with_a_failed_segment_keeps_its_old_chunks_and_gets_no_entry(setup):
    store, ledger, writer = setup
    writer.consume([seg_row("v1", "/r/y.pdf", 0, 2), seg_row("v1", "/r/y.pdf", 1, 2)])
    writer.consume([seg_row("v2", "/r/y.pdf", 0, 2), seg_row("v2", "/r/y.pdf", 1, 2, failed=True)])
    assert ledger.is_done("v1") and not ledger.is_done("v2") and writer.kept_old == ["v2"]
    assert {i.split(":")[0] for i in store.chunk_ids()} == {"v1", "v2"}


def test_one_delete_call_per_commit_for_many_documents(setup, monkeypatch):
    store, ledger, writer = setup
    deletes: list[str] = []
    real = store.client.delete
    monkeypatch.setattr(store.client, "delete", lambda *a, **kw: deletes.append(kw.get("filter", "")) or real(*a, **kw))
    writer.consume([seg_row(f"d{k}", f"/r/{k}.pdf", 0, 1) for k in range(40)])
    assert len(deletes) == 1 and all(ledger.is_done(f"d{k}") for k in range(40))
