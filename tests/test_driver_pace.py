"""What lets the driver and the plan stage keep pace with many GPUs, on the real stores (Milvus Lite, a local run
folder, the loopback S3 server): commits run beside the row intake and grow with what arrived meanwhile; a
commit's ledger entries are written side by side; the ledger asks object storage once per missing entry; the plan
stage writes its parts off its event loop; the fit check counts every planning actor."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import numpy as np
import pytest

from chunker.config import MilvusConfig, load_config
from chunker.errors import StoreUnavailable
from chunker.index.bulk import ChunkSink
from chunker.index.store import ChunkStore
from chunker.run.cluster import ClusterFitError, fit_stages, stage_demands
from chunker.run.layout import RunStore
from chunker.run.ledger import Ledger
from chunker.run.writer import Writer
from test_writer import DIM, seg_row

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture()
def lite(tmp_path: Path):
    store = ChunkStore(MilvusConfig(uri=str(tmp_path / "m.db")), DIM)
    yield store
    store.close()


def _writer(store: ChunkStore, tmp_path: Path, **kw: object) -> tuple[Writer, Ledger]:
    run = RunStore(str(tmp_path / "run"))
    ledger = Ledger(run.uri, "h", "m#chunks")
    return Writer(store, ChunkSink(store, store.cfg), ledger, run, "h", 0.25, **kw), ledger


def _gate_upserts(store: ChunkStore, monkeypatch: pytest.MonkeyPatch) -> tuple[threading.Event, list[int]]:
    """Upserts wait for the returned event; the list gets the rows of each upsert call."""
    gate, sizes = threading.Event(), []
    real = store.client.upsert

    def upsert(collection, rows, **kw):  # noqa: ANN001, ANN202
        assert gate.wait(60), "the test never opened the gate"
        sizes.append(len(rows))
        return real(collection, rows, **kw)

    monkeypatch.setattr(store.client, "upsert", upsert)
    return gate, sizes


def test_rows_keep_coming_while_a_commit_runs_and_the_next_commit_takes_all_of_them(lite, tmp_path, monkeypatch):
    writer, ledger = _writer(lite, tmp_path, commit_rows=2, commit_interval_s=3600, max_pending_rows=1000)
    gate, sizes = _gate_upserts(lite, monkeypatch)
    taken: list[str] = []

    def rows():  # noqa: ANN202
        for k in range(12):
            taken.append(f"d{k}")
            yield seg_row(f"d{k}", f"/r/{k}.pdf", 0, 1)  # 2 chunks each: the first row starts a commit
            if k == 11:
                # Every row went in while the first commit still waited on the store: none of it is done yet.
                assert not any(ledger.is_done(f"d{j}") for j in range(12))
                gate.set()

    writer.consume(rows())
    assert taken == [f"d{k}" for k in range(12)]
    assert all(ledger.is_done(f"d{k}") for k in range(12)) and writer.totals.documents == 12
    # The first commit held the first document; the rows that came meanwhile went in as one more commit.
    assert sizes == [2, 22], sizes
    assert len(lite.chunk_ids()) == 24


def test_the_driver_waits_for_a_running_commit_past_the_pending_bound(lite, tmp_path, monkeypatch):
    writer, ledger = _writer(lite, tmp_path, commit_rows=2, commit_interval_s=3600, max_pending_rows=4)
    gate, sizes = _gate_upserts(lite, monkeypatch)
    taken: list[int] = []

    def rows():  # noqa: ANN202
        for k in range(6):
            taken.append(k)
            yield seg_row(f"d{k}", f"/r/{k}.pdf", 0, 1)

    t = threading.Thread(target=writer.consume, args=(rows(),))
    t.start()
    # d0 starts a commit; d1 and d2 are pending (4 chunks): the driver waits before taking d3.
    for _ in range(200):
        if len(taken) >= 3:
            break
        threading.Event().wait(0.05)
    threading.Event().wait(0.5)
    assert taken == [0, 1, 2]
    gate.set()
    t.join(60)
    assert not t.is_alive() and all(ledger.is_done(f"d{k}") for k in range(6))


def test_a_store_outage_in_the_commit_thread_stops_the_run_from_the_driver(lite, tmp_path, monkeypatch):
    writer, ledger = _writer(lite, tmp_path, commit_rows=2, commit_interval_s=3600)

    def down(*a, **kw):  # noqa: ANN002, ANN003, ANN202
        raise ConnectionError("Milvus went away")

    monkeypatch.setattr(lite.client, "upsert", down)
    with pytest.raises(StoreUnavailable):
        writer.consume([seg_row(f"d{k}", f"/r/{k}.pdf", 0, 1) for k in range(4)])
    assert not any(ledger.is_done(f"d{k}") for k in range(4))


def test_a_commits_ledger_entries_are_written_side_by_side(tmp_path, monkeypatch):
    ledger = Ledger(str(tmp_path / "run"), "h", "m#chunks")
    together = threading.Barrier(4, timeout=30)  # breaks (and fails the test) unless 4 writes wait at once
    real = ledger.mark_done

    def mark_done(doc_id: str, **kw: object) -> None:
        together.wait()
        real(doc_id, **kw)

    monkeypatch.setattr(ledger, "mark_done", mark_done)
    ledger.mark_all([dict(doc_id=f"d{k}", source_uri=f"/r/{k}.pdf", source_version="1:1") for k in range(8)],
                    threads=4)
    assert all(ledger.is_done(f"d{k}") for k in range(8))
    assert ledger.done_by_uri("/r/3.pdf", "1:1") == "d3"


def test_the_ledger_asks_object_storage_once_for_a_missing_entry(s3):
    server, bucket = s3
    ledger = Ledger(f"s3://{bucket}/runs/r1", "cfg1", "milvus#chunks")
    server.clear()
    assert not ledger.is_done("nope")
    assert [r.op for r in server.ops(bucket)] == ["HeadObject"]
    ledger.mark_done("doc-a", source_uri="s3://in/a.pdf", source_version="3:4", status="ok")
    server.clear()
    assert ledger.done_by_uri("s3://in/a.pdf", "3:4") == "doc-a"
    # The URI's entry, then the document's: each a HeadObject (pyarrow's size check) and its GetObject.
    assert [r.op for r in server.ops(bucket)] == ["HeadObject", "GetObject"] * 2


def test_the_plan_stage_writes_its_parts_off_its_event_loop(tmp_path, monkeypatch):
    from chunker.types import DocumentRecord, SegmentJob
    from jobs.bench.instant import InstantConverter
    from jobs.stages import PlanStage
    from chunker.run.rows import SegmentRow, batch_of, rows_of

    cfg = load_config(str(REPO / "configs" / "local.yaml"))
    stage = PlanStage(cfg, "h", str(tmp_path / "run"))
    started, release = threading.Barrier(3, timeout=30), threading.Event()
    real = stage.store.write_segment

    def write_segment(*a, **kw):  # noqa: ANN002, ANN003, ANN202
        started.wait()  # both parts of the segment are being written at once, in threads
        assert release.wait(30)
        return real(*a, **kw)

    monkeypatch.setattr(stage.store, "write_segment", write_segment)
    doc = DocumentRecord("doc", "/r/doc.pdf", "doc.pdf", 4)
    job = SegmentJob("doc", "/r/doc.pdf", "doc.pdf", 4, 0, 1, 1, 4, 1, 4)
    row = SegmentRow(doc, job=job, batches=asyncio.run(InstantConverter().convert(job, None)))

    async def run() -> tuple[dict, int]:
        ticks = 0
        call = asyncio.ensure_future(stage(batch_of([row])))
        await asyncio.to_thread(started.wait)  # the parts are being written ...
        for _ in range(5):  # ... and the loop is free meanwhile
            await asyncio.sleep(0.01)
            ticks += 1
        release.set()
        return await call, ticks

    out, ticks = asyncio.run(run())
    (planned,) = rows_of(out)
    assert ticks == 5 and planned.chunks and not planned.facts.failed
    assert len(RunStore(str(tmp_path / "run")).parts("chunks")) == 1


def test_every_planning_actor_is_counted_by_the_fit_check():
    cfg = load_config(str(REPO / "configs" / "local.yaml"), ["ray.plan_actors=3", "ray.fit_to_cluster=false"])
    plan = next(d for d in stage_demands(cfg) if d.stage == "plan")
    assert (plan.count, plan.cpus) == (3, cfg.ray.stage_num_cpus)
    # 2 conversion + 3 planning + 1 embedding actors at 0.5 CPU, plus an intake task: 4 CPUs.
    fit_stages(cfg, [{"CPU": 4.0, "GPU": 0.0}])
    with pytest.raises(ClusterFitError, match="plan|ray.stage_num_cpus"):
        fit_stages(cfg, [{"CPU": 3.5, "GPU": 0.0}])


def test_vectors_of_the_wrong_shape_fail_their_document_alone(lite, tmp_path):
    writer, ledger = _writer(lite, tmp_path, commit_rows=100, commit_interval_s=3600)
    bad = seg_row("bad", "/r/bad.pdf", 0, 1)
    bad.vectors = np.zeros((1, DIM), dtype=np.float32)  # two chunks, one vector
    writer.consume([bad, seg_row("good", "/r/good.pdf", 0, 1)])
    assert ledger.is_done("good") and not ledger.is_done("bad")
    assert {p["code"] for p in writer.totals.problems} == {"error"}
    assert {i.split(":")[0] for i in lite.chunk_ids()} == {"good"}


def test_shards_split_the_inputs_disjointly_and_the_same_way_every_time(tmp_path):
    from chunker.intake.inputs import InputError
    from chunker.run.listing import Shard, manifest_batch, write_listing

    src = tmp_path / "in"
    src.mkdir()
    for k in range(30):
        (src / f"doc-{k:02d}.pdf").write_bytes(b"%PDF-1.4\n")
    cfg = load_config(str(REPO / "configs" / "local.yaml"))

    def listed(shard: Shard | None) -> list[str]:
        run = RunStore(str(tmp_path / f"run-{shard.name if shard else 'all'}"))
        parts = write_listing(str(src), cfg, run, shard)
        return [line for p in parts for line in Path(p.removeprefix("file://")).read_text().splitlines()]

    every = listed(None)
    shards = [listed(Shard(i, 3)) for i in (1, 2, 3)]
    assert sorted(x for s in shards for x in s) == sorted(every) and all(shards)  # each input in exactly one shard
    assert listed(Shard(2, 3)) == shards[1]  # and in the same one on a re-run
    # A manifest's lines are picked the same way (a direct manifest is read by Ray, not listed).
    picked = manifest_batch({"text": every}, "", Shard(2, 3))
    assert sorted(picked["path"]) == sorted(json.loads(x)["path"] for x in shards[1])
    assert Shard.parse("2/8") == Shard(2, 8) and Shard(2, 8).name == "shard-2-of-8"
    for bad in ("0/3", "4/3", "x", "1/0", "2"):
        with pytest.raises(InputError):
            Shard.parse(bad)


def test_a_sharded_run_wants_a_milvus_server(tmp_path):
    from chunker.intake.inputs import InputError
    from chunker.run.listing import Shard
    from jobs.ingest import run_ingest

    cfg = load_config(str(REPO / "configs" / "local.yaml"), [f"milvus.uri={tmp_path / 'm.db'}"])
    with pytest.raises(InputError, match="Milvus server"):
        run_ingest(cfg, str(tmp_path), str(tmp_path / "out"), shard=Shard(1, 2))


@pytest.mark.ray
@pytest.mark.slow
def test_two_shards_ingest_the_samples_once_into_one_collection(samples_dir, tmp_path):
    """Two jobs of one input (one after the other here, side by side on a cluster) load one Milvus server; each
    keeps its own run folder and ledger, and every document is in exactly one of them."""
    import json as _json
    import os

    import ray

    from chunker.run.listing import Shard
    from jobs.ingest import run_ingest
    from milvus_lite_server import lite_server

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    with lite_server(tmp_path / "milvus") as (uri, _proc):
        cfg = load_config(str(REPO / "configs" / "local.yaml"), [f"milvus.uri={uri}", "milvus.load_mode=upsert"])
        try:
            runs = [run_ingest(cfg, str(samples_dir), str(tmp_path / "out"), shard=Shard(i, 2), verbose=False)
                    for i in (1, 2)]
        finally:
            ray.shutdown()
        with ChunkStore(cfg.milvus, 384) as store:
            rows = store.count()
    assert sum(r.documents for r in runs) == 4 and sum(r.ok for r in runs) == 4
    assert rows == sum(r.chunks for r in runs) == runs[-1].collection_rows
    done = [_json.loads(p.read_text())["doc_id"] for i in (1, 2)
            for p in (tmp_path / "out" / f"shard-{i}-of-2" / "ledger").rglob("*.json") if "by-uri" not in str(p)]
    assert len(done) == len(set(done)) == 4
