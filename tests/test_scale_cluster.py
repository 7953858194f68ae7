"""The pipeline on a real multi-node Ray cluster in one host (``ray.cluster_utils.Cluster``: a head and three
nodes with one logical GPU each), the simulated converter, and Milvus served over HTTP (``milvus-lite server``,
as a cluster would use a Milvus server):

* the pre-start check refuses what cannot be placed and one-machine settings (a local --input among them: the inputs
  below are file:// URIs, the explicit word for a folder every node sees), with one line;
* large input blocks do not stall (a no-progress timeout shorter than one block's work, longer than a segment's);
* a re-run with only runtime knobs changed (max_num_seqs, embed.batch_size) skips every finished document;
* a node removed mid-document: the run completes with no duplicate or missing rows, in Milvus or in the Parquet
  parts, and every ledger entry is written after its document's last segment;
* two input roots holding the same relative file name are two documents; a changed file replaces only its own.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sys
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from chunker.config import load_config
from jobs.stages import ConvertStage, PlanStage
from milvus_lite_server import server_fixture

pytestmark = [pytest.mark.ray, pytest.mark.slow]

DOCS = 12
PAGES = 6  # three segments of two pages each


@pytest.fixture(scope="module")
def ray_cluster():
    import ray
    import ray.cloudpickle
    from ray.cluster_utils import Cluster

    os.environ["RAY_AUTH_MODE"] = "disabled"
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    # The test's stage subclass travels by value: Ray workers cannot import this test module.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    cluster = _start_cluster(Cluster)
    try:
        ray.init(address=cluster.address, log_to_driver=False)
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


def _start_cluster(cluster_cls: type, attempts: int = 3):  # noqa: ANN202
    # Ray waits a fixed 30 s for a node to register; on a loaded CI machine that can pass, so try again.
    for attempt in range(attempts):
        cluster = cluster_cls(initialize_head=False)
        try:
            cluster.add_node(num_cpus=2, include_dashboard=False)
            for _ in range(3):
                cluster.add_node(num_cpus=2, num_gpus=1)
            cluster.wait_for_nodes(timeout=120)
            return cluster
        except Exception:
            cluster.shutdown()
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


milvus_uri = server_fixture("milvus-srv")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from chunker.eval.synthetic import write_document

    root = tmp_path_factory.mktemp("corpus")
    for k in range(DOCS):
        write_document(root / f"doc-{k:02d}.pdf", PAGES, seed=k, title=f"Manual {k}")
    return root


class SlowSimulatedStage(ConvertStage):
    """The simulated engine (compressed in time) behind a fixed delay per segment, leaving a start and an end marker
    per segment attempt with the node it ran on."""

    DELAY_S = 5.0

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        import ray

        from chunker.backends.simulated import SimulatedBackend
        from chunker.convert.factory import make_converter

        cfg = self.cfg
        backend = SimulatedBackend(cfg.converter.model, max_images=cfg.intake.batch_pages,
                                   max_side_px=cfg.render.max_side_px, time_scale=0.01)
        self.converter = make_converter(cfg, self.cfg_hash, backend=backend)
        self.node = ray.get_runtime_context().get_node_id()
        self.markers = Path(self.store.root) / "markers"
        self.markers.mkdir(exist_ok=True)

    async def _one(self, row):  # noqa: ANN001, ANN202
        job = row.job
        name = f"{job.doc_id}-{job.segment_index}-{self.node}-{os.getpid()}-{time.time_ns()}"
        (self.markers / f"{name}.start").write_text(str(time.time()))
        await asyncio.sleep(self.DELAY_S)
        await super()._one(row)
        (self.markers / f"{name}.end").write_text(str(time.time()))


class RecordingPlanStage(PlanStage):
    """The planning stage, noting when each segment reaches it (the first stage after conversion). Per segment, not
    per call: a call takes a bundle of converted segments (ray.post_convert_batch)."""

    async def _one(self, row):  # noqa: ANN001, ANN202
        marks = Path(self.store.root) / "markers"
        marks.mkdir(exist_ok=True)
        (marks / f"plan-{row.job.doc_id}-{row.job.segment_index}-{time.time_ns()}.recv").write_text(str(time.time()))
        return await super()._one(row)


def _cfg(milvus_uri: str, collection: str, *extra: str):
    return load_config("configs/local.yaml", [
        f"milvus.uri={milvus_uri}", f"milvus.collection={collection}", "converter.backend=simulated",
        "render.max_side_px=448", "intake.segment_pages=2", "intake.segment_overlap_pages=0",
        "ray.convert_actors=2", "ray.convert_num_gpus=1", "ray.convert_concurrency=4", "ray.status_interval_s=5",
        "converter.page_timeout_s=10", "ray.document_timeout_s=30", *extra])


def _milvus_rows(cfg) -> list[dict]:  # noqa: ANN001
    from chunker.index.store import ChunkStore

    with ChunkStore(cfg.milvus, 384) as store:
        return store.client.query(store.collection, filter="", output_fields=["chunk_id", "doc_id"], limit=16384,
                                  consistency_level="Strong")


def _milvus_ids(cfg) -> list[str]:  # noqa: ANN001
    return [r["chunk_id"] for r in _milvus_rows(cfg)]


def _milvus_docs(cfg) -> set[str]:  # noqa: ANN001
    return {r["doc_id"] for r in _milvus_rows(cfg)}


def _parquet_ids(run: Path) -> list[str]:
    return pq.read_table(run / "chunks", columns=["chunk_id"]).column("chunk_id").to_pylist()


def test_demand_that_cannot_be_placed_is_one_line_before_any_actor_starts(ray_cluster, milvus_uri, corpus, tmp_path):
    from chunker.run.cluster import ClusterFitError
    from jobs.ingest import run_ingest

    cfg = _cfg(milvus_uri, "fit", "ray.convert_actors=3", "ray.embed_num_gpus=0.5")
    with pytest.raises(ClusterFitError) as err:
        run_ingest(cfg, f"file://{corpus}", f"file://{tmp_path}/run")
    msg = str(err.value)
    assert "\n" not in msg and "embed stage cannot be placed" in msg and "3 GPU on 4 nodes" in msg
    # One-machine settings on a four-node cluster: a local output path and Milvus Lite.
    lite = _cfg(milvus_uri, "fit", f"milvus.uri={tmp_path}/m.db")
    with pytest.raises(ClusterFitError) as err:
        run_ingest(lite, str(corpus), str(tmp_path / "run"))
    msg = str(err.value)
    assert "4 nodes" in msg and "Milvus Lite" in msg and "--input" in msg and "\n" not in msg


def test_no_stall_when_input_blocks_are_large(ray_cluster, milvus_uri, corpus, tmp_path_factory, monkeypatch):
    """All 12 documents (36 segments) arrive as one block. Before, that block went to one intake task and then to one
    conversion call running 4 segments at a time, and nothing left the call until all 36 were done (~27 s of
    silence here, ~30 min at scale: past Ray Data's no-progress timeout, ExecutionTimeoutError; reproduced on the
    old code with a 20 s timeout). Now every segment is a block of its own: the driver has rows while most segments
    have not even started, whatever the machine's load."""
    import ray

    import jobs.ingest as ingest

    files = [{"path": str(p), "source": p.name} for p in sorted(corpus.glob("*.pdf"))]
    monkeypatch.setattr(ingest, "input_dataset", lambda *a: ray.data.from_items(files, override_num_blocks=1))
    monkeypatch.setattr(ingest, "PlanStage", RecordingPlanStage)
    run = tmp_path_factory.mktemp("stall") / "run"
    cfg = _cfg(milvus_uri, "scale", "ray.no_progress_timeout_s=120")
    ds = ingest.build_dataset(cfg, files, f"file://{run}", "h")
    assert ds.context.execution_no_progress_timeout_s == 120  # the configured guard, above the document timeout
    s = ingest.run_ingest(cfg, f"file://{corpus}", f"file://{run}", convert_stage=SlowSimulatedStage)
    assert (s.ok, s.failed, s.documents) == (DOCS, 0, DOCS), s.problems
    starts = sorted(float(p.read_text()) for p in (run / "markers").glob("*.start"))
    planned = sorted(float(p.read_text()) for p in (run / "markers").glob("*.recv"))
    assert len(starts) == len(planned) == DOCS * PAGES // 2
    # Streaming: the first converted segment reached planning before the last third of the segments started
    # converting (8 run at once, 5 s each). With the whole block in one call it came after the last one ended.
    assert planned[0] < starts[2 * len(starts) // 3], (planned[0] - starts[0], [t - starts[0] for t in starts])
    ids = _milvus_ids(cfg)
    assert len(ids) == len(set(ids)) == s.collection_rows == s.chunks > 0
    assert sorted(_parquet_ids(run)) == sorted(ids)
    pytest.scale_run = (run, set(ids))  # type: ignore[attr-defined] - for the tests below


def test_rerun_with_only_runtime_knobs_changed_skips_everything(ray_cluster, milvus_uri, corpus):
    prior = getattr(pytest, "scale_run", None)
    if prior is None:
        pytest.skip("needs the run of test_no_stall_when_input_blocks_are_large")
    from jobs.ingest import run_ingest

    run, ids = prior
    cfg = _cfg(milvus_uri, "scale", "converter.model.max_num_seqs=8", "embed.batch_size=16",
               "converter.model.gpu_memory_utilization=0.8")
    s = run_ingest(cfg, f"file://{corpus}", f"file://{run}", convert_stage=SlowSimulatedStage)
    assert (s.skipped, s.ok, s.documents) == (DOCS, 0, DOCS), s.problems
    assert s.settings["converter.model.max_num_seqs"] == 8 and s.settings["embed.batch_size"] == 16
    assert set(_milvus_ids(cfg)) == ids


def test_a_node_removed_mid_document_loses_and_duplicates_nothing(ray_cluster, milvus_uri, corpus,
                                                                  tmp_path_factory):
    prior = getattr(pytest, "scale_run", None)
    if prior is None:
        pytest.skip("needs the run of test_no_stall_when_input_blocks_are_large (the clean chunk IDs)")
    from jobs.ingest import run_ingest

    clean_ids = prior[1]
    run = tmp_path_factory.mktemp("node-loss") / "run"
    cfg = _cfg(milvus_uri, "nodeloss")
    result: dict[str, object] = {}

    def ingest() -> None:
        try:
            result["summary"] = run_ingest(cfg, f"file://{corpus}", f"file://{run}",
                                           convert_stage=SlowSimulatedStage)
        except BaseException as exc:  # noqa: BLE001 - reported by the test thread
            result["error"] = exc

    t = threading.Thread(target=ingest, daemon=True)
    t.start()
    victims = {n.node_id: n for n in ray_cluster.worker_nodes}
    removed = None
    deadline = time.time() + 120
    while removed is None and time.time() < deadline and t.is_alive():
        ends = {p.name.split("-")[0] for p in (run / "markers").glob("*.end")} if (run / "markers").exists() else set()
        for p in (run / "markers").glob("*.start") if ends else []:
            doc, seg, node = p.name.split("-")[:3]
            if doc in ends and node in victims and not p.with_suffix(".end").exists():
                removed = node  # a document with a segment done and another converting on this node
                break
        if removed is None:
            time.sleep(0.2)
    assert removed is not None, f"no document was mid-way on a worker node: {result}"
    ray_cluster.remove_node(victims[removed], allow_graceful=False)
    t.join(timeout=300)
    assert not t.is_alive(), "the run did not finish after the node went"
    assert "error" not in result, result.get("error")
    s = result["summary"]
    assert (s.ok, s.failed, s.documents) == (DOCS, 0, DOCS), s.problems
    ids = _milvus_ids(cfg)
    parts = _parquet_ids(run)
    assert len(ids) == len(set(ids)) and len(parts) == len(set(parts)), "duplicates"
    assert set(ids) == set(parts) == clean_ids, "missing or extra rows"
    # The ledger entry of every document comes after the end of its last segment (every attempt's).
    ended: dict[str, float] = {}
    for p in (run / "markers").glob("*.end"):
        doc = p.name.split("-")[0]
        ended[doc] = max(ended.get(doc, 0.0), float(p.read_text()))
    ledger = {p.stem: json.loads(p.read_text()) for p in (run / "ledger" / s.config_hash).glob("*.json")}
    assert set(ledger) == set(ended) and len(ledger) == DOCS
    assert all(ledger[d]["finished_at"] >= ended[d] for d in ended)


def test_two_roots_with_the_same_relative_name_stay_two_documents(ray_cluster, milvus_uri, tmp_path):
    from chunker.eval.synthetic import write_document
    from jobs.ingest import run_ingest

    r1, r2 = tmp_path / "root1", tmp_path / "root2"
    write_document(r1 / "manual.pdf", 2, seed=1, title="First manual")
    write_document(r2 / "manual.pdf", 2, seed=2, title="Second manual")
    cfg = _cfg(milvus_uri, "tworoots", "converter.backend=pdf-text")
    s1 = run_ingest(cfg, f"file://{r1}", f"file://{tmp_path}/run1")
    s2 = run_ingest(cfg, f"file://{r2}", f"file://{tmp_path}/run2")
    assert (s1.ok, s2.ok) == (1, 1)
    first = _milvus_docs(cfg)
    assert len(first) == 2, "both documents stay"

    # root1/manual.pdf changes in place: its old version goes, the other root's document stays.
    shutil.move(r1 / "manual.pdf", tmp_path / "old.pdf")
    write_document(r1 / "manual.pdf", 3, seed=3, title="First manual, revised")
    s3 = run_ingest(cfg, f"file://{r1}", f"file://{tmp_path}/run1")
    assert s3.ok == 1
    docs = _milvus_docs(cfg)
    second = {json.loads(p.read_text())["doc_id"] for p in (tmp_path / "run2" / "ledger").glob("*/*.json")}
    assert len(docs) == 2 and second < docs and not (docs & (first - second)), \
        "the old version of root1's file is gone, root2's document stays"


def test_a_shard_of_a_file_uri_output_runs_on_a_multi_node_cluster(ray_cluster, milvus_uri, corpus, tmp_path):
    """``--shard I/N`` with ``--output file:///mount/...`` (the explicit word for a filesystem every node mounts):
    the shard's run folder is ``file:///mount/.../shard-I-of-N``, accepted like the job's own output. It used to lose
    its scheme on the way (a bare path) and be refused as a local folder on every multi-node cluster."""
    from chunker.run.listing import Shard
    from jobs.ingest import run_ingest

    cfg = _cfg(milvus_uri, "fileshard", "converter.backend=pdf-text")
    out = f"file://{tmp_path}/run"
    halves = [run_ingest(cfg, f"file://{corpus}", out, shard=Shard(i, 2)) for i in (1, 2)]
    assert [s.output for s in halves] == [f"{tmp_path}/run/shard-1-of-2", f"{tmp_path}/run/shard-2-of-2"]
    assert sum(s.ok for s in halves) == DOCS and all(s.failed == 0 for s in halves)
    assert all(s.documents for s in halves), "both shards took a part"
