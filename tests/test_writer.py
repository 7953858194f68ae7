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


def _statuses(run: RunStore) -> dict[str, dict]:
    import pyarrow.parquet as pq

    return {r["doc_id"] or r["source"]: r for r in pq.read_table(run.uri + "/documents").to_pylist()}


def _refuse(store: ChunkStore, monkeypatch, bad: str) -> None:
    """Milvus refusing any upsert that holds a row of document ``bad`` (as a server refuses a batch with one row it
    cannot take: a MilvusException with its code), and taking everything else."""
    from pymilvus.exceptions import MilvusException

    real = store.client.upsert

    def upsert(collection, rows, **kw):
        if any(r["doc_id"] == bad for r in rows):
            raise MilvusException(code=1100, message=f"invalid input for field text of {bad}")
        return real(collection, rows, **kw)

    monkeypatch.setattr(store.client, "upsert", upsert)


def test_rows_the_store_refuses_fail_their_document_alone_at_the_write_stage(setup, monkeypatch, tmp_path):
    store, ledger, writer = setup
    # "bad" has two segments: the first is committed before the store starts refusing it, the second is refused.
    writer.add(seg_row("bad", "/r/bad.pdf", 0, 2))
    writer.add(seg_row("a", "/r/a.pdf", 0, 1))
    writer.commit()
    assert ledger.is_done("a") and any(i.startswith("bad:") for i in store.chunk_ids())
    _refuse(store, monkeypatch, "bad")
    writer.consume([seg_row("bad", "/r/bad.pdf", 1, 2), seg_row("b", "/r/b.pdf", 0, 1)])
    assert ledger.is_done("b") and not ledger.is_done("bad")
    assert {i.split(":")[0] for i in store.chunk_ids()} == {"a", "b"}, "nothing of the failed document stays indexed"
    rows = _statuses(RunStore(str(tmp_path / "run")))
    assert [rows[d]["status"] for d in ("a", "b", "bad")] == ["ok", "ok", "failed"]
    (problem,) = rows["bad"]["problems"]
    assert (problem["stage"], problem["code"]) == ("write", "store_refused") and "invalid input" in problem["message"]
    assert [(p["source"], p["stage"], p["code"]) for p in writer.totals.problems] == [("x.pdf", "write", "store_refused")]


def test_a_row_the_writer_cannot_take_fails_its_document_and_a_lost_segment_is_still_reported(setup, tmp_path):
    store, ledger, writer = setup
    broken = seg_row("nov", "/r/nov.pdf", 0, 1)
    broken.vectors = None  # chunks without vectors: a stage skipped
    unplanned = seg_row("unp", "/r/unp.pdf", 0, 1)
    unplanned.facts = None  # a segment that never went through planning
    lost = seg_row("lost", "/r/lost.pdf", 0, 2)  # its segment 1 never arrives
    writer.consume([broken, unplanned, lost, seg_row("fine", "/r/fine.pdf", 0, 1)])
    rows = _statuses(RunStore(str(tmp_path / "run")))
    assert rows["fine"]["status"] == "ok" and ledger.is_done("fine")
    assert [p["stage"] for p in rows["nov"]["problems"]] == ["write"] and rows["nov"]["status"] == "failed"
    assert [p["stage"] for p in rows["unp"]["problems"]] == ["write"] and rows["unp"]["status"] == "failed"
    assert rows["lost"]["status"] == "partial" and [p["code"] for p in rows["lost"]["problems"]] == ["segment_missing"]
    assert not any(ledger.is_done(d) for d in ("nov", "unp", "lost"))
    assert {i.split(":")[0] for i in store.chunk_ids()} == {"fine", "lost"}, "the partial one keeps what it has"


def test_two_files_with_the_same_bytes_are_two_documents_and_summary_lines_are_one_line(setup, tmp_path):
    store, ledger, writer = setup
    writer.consume([seg_row("same", "/r/one.pdf", 0, 1, source="one.pdf"),
                    seg_row("same", "/r/two\nlines.pdf", 0, 1, source="two\nlines\udcff.pdf", failed=True)])
    import pyarrow.parquet as pq

    rows = pq.read_table(tmp_path / "run" / "documents").to_pylist()
    assert sorted((r["source"], r["status"]) for r in rows) == [("one.pdf", "ok"), ("two\nlines\ufffd.pdf", "failed")]
    (p,) = writer.totals.problems
    assert p["source"] == "two\\nlines\ufffd.pdf" and "\n" not in p["reason"]
