"""The first cluster run, second look: a real Ray autoscaler (fake multi-node provider) whose GPU workers start at 0
and whose node types the job cannot read (KubeRay's case: the config is moved away once the autoscaler has read it),
a Ray Data pipeline run on it first so Ray Data's autoscaling coordinator is alive, a ``milvus-lite server``, file://
paths, and ``jobs.ingest`` processes as a user would start them:

* one-machine settings (a local output folder, Milvus Lite) are refused at once although only the head is up;
* the job's request outlives the coordinator's ticks while the job waits, and ``SIGTERM`` (``ray job stop``) during
  the wait withdraws it;
* ``--drivers 2``: one job, two driver processes over disjoint shards, the input listed once, one request (the wait
  ends when the GPU workers are up), one collection made once, every document exactly once, one summary.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from autoscaling_cluster import REPO, VENV_BIN, autoscaling_cluster
from milvus_lite_server import server_fixture

pytestmark = [pytest.mark.ray, pytest.mark.slow]

GPU_WORKERS = {"gpu": {"resources": {"CPU": 2, "GPU": 1}, "node_config": {}, "min_workers": 0, "max_workers": 2}}
DOCS = 12


@pytest.fixture(scope="module")
def cluster():
    env = {"PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    with autoscaling_cluster(GPU_WORKERS, env=env, hide_config=True) as c:
        # A first pipeline: Ray Data's coordinator (a detached actor) is alive from now on, and ticks every 20 s.
        probe = ("import ray; from chunker.config import load_config; from jobs.common import autoscaler_node_types; "
                 "ray.init(log_to_driver=False, logging_level='ERROR'); "
                 "ray.data.range(8).map_batches(lambda b: b).materialize(); "
                 "ray.get_actor('AutoscalingCoordinator', namespace='AutoscalingCoordinator'); "
                 "print(autoscaler_node_types(load_config(None)))")
        out = _python(c, probe)
        assert out.returncode == 0, out.stderr[-3000:]
        assert out.stdout.strip().splitlines()[-1] == "[]", "the node types must be unknown to the job"
        yield c


milvus = server_fixture("milvus-drivers")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from chunker.eval.synthetic import write_document

    root = tmp_path_factory.mktemp("drivers-corpus")
    titles = [f"Handbook {k}" for k in range(DOCS)]
    for k, title in enumerate(titles):
        write_document(root / f"handbook-{k:02d}.pdf", 3, seed=200 + k, title=title)
    return root


def _python(cluster, code: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(VENV_BIN / "python"), "-c", code], cwd=REPO, capture_output=True, text=True,
                          env=dict(cluster.env, RAY_ADDRESS=cluster.address), timeout=300)


def _ingest_cmd(*args: str) -> list[str]:
    return [str(VENV_BIN / "python"), "-m", "jobs.ingest", "--config", "configs/local.yaml", "--set",
            "converter.backend=simulated", "--set", "converter.model.simulated_time_scale=0.05", "--set",
            "render.max_side_px=448", "--set", "ray.status_interval_s=10",
            *args]


def _requested(cluster) -> list[dict[str, float]]:
    code = ("import json, ray; from ray.experimental.internal_kv import _internal_kv_get; "
            "from ray._private.ray_constants import AUTOSCALER_RESOURCE_REQUEST_CHANNEL as K; "
            "ray.init(log_to_driver=False, logging_level='ERROR'); print(json.dumps(json.loads(_internal_kv_get(K) "
            "or b'[]')))")
    out = _python(cluster, code)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_local_paths_and_milvus_lite_are_refused_with_the_head_alone_and_unknown_node_types(cluster, corpus,
                                                                                            tmp_path):
    res = subprocess.run(_ingest_cmd("--input", f"file://{corpus}", "--output", str(tmp_path / "run"),
                                     "--set", f"milvus.uri={tmp_path / 'm.db'}", "--set", "ray.convert_num_gpus=1"),
                         cwd=REPO, env=dict(cluster.env, RAY_ADDRESS=cluster.address), capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 3, res.stdout[-2000:] + res.stderr[-3000:]
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "output.dir" in errors[0] and "Milvus Lite" in errors[0], errors
    assert "asked its autoscaler" not in res.stderr


def test_the_request_outlives_ray_datas_coordinator_and_sigterm_withdraws_it(cluster, milvus, corpus, tmp_path):
    """Two-GPU actors: no node type holds them, which the job cannot know, so it asks and waits. Meanwhile the
    coordinator ticks (every 20 s); the request must be there at every look. Then ray job stop's SIGTERM."""
    proc = subprocess.Popen(_ingest_cmd("--input", f"file://{corpus}", "--output", f"file://{tmp_path / 'run'}",
                                        "--set", f"milvus.uri={milvus}", "--set", "ray.convert_num_gpus=2",
                                        "--set", "ray.convert_actors=1", "--set", "ray.autoscale_wait_s=300"),
                            cwd=REPO, env=dict(cluster.env, RAY_ADDRESS=cluster.address), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        want = {"CPU": 0.5, "GPU": 2.0}
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and want not in _requested(cluster):
            assert proc.poll() is None, proc.communicate()[1][-3000:]
            time.sleep(1)
        seen = []
        until = time.monotonic() + 30  # past at least one tick of the coordinator
        while time.monotonic() < until:
            seen.append(want in _requested(cluster))
        assert seen and all(seen), f"the request was gone at {seen.count(False)} of {len(seen)} looks"
        assert proc.poll() is None, "still waiting for nodes"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, err[-3000:]
    assert want not in _requested(cluster), "withdrawn on the way out"
    assert "withdrawing the autoscaler request" in err


def test_two_drivers_in_one_job_run_every_document_once_with_one_request_and_one_summary(cluster, milvus, corpus,
                                                                                        tmp_path):
    assert _gpu_nodes(cluster) == 0, "the GPU workers start at zero"
    out = tmp_path / "run"
    t0 = time.monotonic()
    # Two drivers sharing both GPU workers. (CPU reservations scaled to the last fraction of a CPU would leave the
    # intake tasks, a whole CPU each, no node with room wherever Ray puts the actors: the fit packs its way, Ray
    # its own. Here the stages leave 3 of the 6 CPUs free.)
    res = subprocess.run(_ingest_cmd("--input", f"file://{corpus}", "--output", f"file://{out}", "--drivers", "2",
                                     "--set", f"milvus.uri={milvus}", "--set", "milvus.collection=drivers",
                                     "--set", "ray.convert_actors=2", "--set", "ray.convert_num_gpus=1",
                                     "--set", "ray.autoscale_wait_s=400"),
                         cwd=REPO, env=dict(cluster.env, RAY_ADDRESS=cluster.address), capture_output=True,
                         text=True, timeout=900)
    took = time.monotonic() - t0
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-4000:]
    assert res.stderr.count("asked its autoscaler") == 1, "one request for both drivers"
    assert res.stderr.count("listed 12 inputs once for 2 drivers") == 1, res.stderr[-3000:]
    assert took < 400, f"the wait ran its full ray.autoscale_wait_s ({took:.0f} s)"
    s = json.loads((out / "summary.json").read_text())
    assert (s["documents"], s["ok"], s["failed"]) == (DOCS, DOCS, 0), s["problems"]
    assert [Path(d["output"]).name for d in s["drivers"]] == ["shard-1-of-2", "shard-2-of-2"]
    assert all(d["documents"] for d in s["drivers"]), "both drivers had a part"
    assert s["collection_rows"] == s["chunks"] > DOCS, "every chunk once in the one collection"
    assert "autoscaler added the nodes" in s["cluster"] and "one per driver" in s["cluster"], s["cluster"]
    docs = [json.loads(p.read_text())["doc_id"] for p in out.glob("shard-*/ledger/*/*.json")]
    assert len(docs) == len(set(docs)) == DOCS, "each document done by exactly one driver"
    assert "== ingest summary" in res.stdout and res.stdout.count("== ingest summary") == 1, "one summary printed"
    assert _requested(cluster) == [], "nothing left asked of the autoscaler"


def _gpu_nodes(cluster) -> int:
    out = _python(cluster, "import ray; ray.init(log_to_driver=False, logging_level='ERROR'); "
                           "print(sum(1 for n in ray.nodes() if n['Alive'] and n['Resources'].get('GPU')))")
    return int(out.stdout.strip().splitlines()[-1])
