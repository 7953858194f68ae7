"""The first cluster run on an autoscaling cluster: a real Ray autoscaler (fake multi-node provider) whose GPU workers
start at 0. ``jobs.ingest`` with GPU conversion actors (the simulated engine, its time compressed) asks the
autoscaler for its stages' bundles, waits for the GPU workers, and converts a sample of the CloudWay documents
(tests/conftest.py); a demand no node type can hold is refused in one line before anything is asked for."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from autoscaling_cluster import REPO, VENV_BIN, autoscaling_cluster

pytestmark = [pytest.mark.ray, pytest.mark.slow]

GPU_WORKERS = {"gpu": {"resources": {"CPU": 2, "GPU": 1}, "node_config": {}, "min_workers": 0, "max_workers": 2}}


@pytest.fixture(scope="module")
def cluster():
    env = {"PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    with autoscaling_cluster(GPU_WORKERS, env=env) as c:
        yield c


@pytest.fixture(scope="module")
def milvus(tmp_path_factory: pytest.TempPathFactory):
    from milvus_lite_server import lite_server

    with lite_server(tmp_path_factory.mktemp("milvus-as")) as (uri, _proc):
        yield uri


def _ingest(cluster, input_uri: str, output: Path, milvus: str, *sets: str) -> subprocess.CompletedProcess:
    env = dict(cluster.env, RAY_ADDRESS=cluster.address)
    args = ["--input", input_uri, "--output", f"file://{output}", "--set", f"milvus.uri={milvus}",
            "--set", "converter.backend=simulated", "--set", "converter.model.simulated_time_scale=0.05",
            "--set", "render.max_side_px=448",
            "--set", "ray.convert_actors=2", "--set", "ray.convert_num_gpus=1", "--set", "ray.status_interval_s=10",
            "--set", "ray.autoscale_wait_s=240"]
    for s in sets:
        args += ["--set", s]
    return subprocess.run([str(VENV_BIN / "python"), "-m", "jobs.ingest", "--config", "configs/local.yaml", *args],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=900)


def _gpu_nodes(cluster) -> int:
    probe = ("import ray; ray.init(log_to_driver=False, logging_level='ERROR'); "
             "print(sum(1 for n in ray.nodes() if n['Alive'] and n['Resources'].get('GPU')))")
    out = subprocess.run([str(VENV_BIN / "python"), "-c", probe], env=dict(cluster.env, RAY_ADDRESS=cluster.address),
                         capture_output=True, text=True, timeout=120)
    return int(out.stdout.strip().splitlines()[-1])


def test_a_demand_no_node_type_can_hold_is_refused_in_one_line(cluster, milvus, cloudway_sample, tmp_path):
    pdfs = cloudway_sample
    res = _ingest(cluster, f"file://{pdfs}", tmp_path / "never", milvus, "ray.convert_num_gpus=2")
    assert res.returncode == 3, res.stdout[-2000:] + res.stderr[-3000:]
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, res.stderr[-3000:]
    assert "convert stage cannot be placed" in errors[0] and "gpu (2 CPU/1 GPU)" in errors[0], errors[0]
    assert "asked its autoscaler" not in res.stderr, "nothing is asked for a demand that can never fit"


def test_gpu_workers_from_zero_run_every_sampled_cloudway_document(cluster, milvus, cloudway_sample, tmp_path):
    pdfs = cloudway_sample
    n = len(list(pdfs.glob("*.pdf")))
    assert _gpu_nodes(cluster) == 0, "the GPU workers start at zero"
    out = tmp_path / "run"
    res = _ingest(cluster, f"file://{pdfs}", out, milvus)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert res.stderr.count("asked its autoscaler") == 1, res.stderr[-3000:]
    s = json.loads((out / "summary.json").read_text())
    assert (s["documents"], s["ok"], s["failed"]) == (n, n, 0), s["problems"]
    assert s["collection_rows"] == s["chunks"] > n
    assert "autoscaler added the nodes" in s["cluster"], s["cluster"]
    assert _gpu_nodes(cluster) == 2
    # Every batch came from the simulated engine on a GPU actor, none from the text-layer fallback.
    import pyarrow.parquet as pq

    batches = pq.read_table(out / "batches", columns=["model", "fallback"]).to_pylist()
    assert batches and all(b["model"].startswith("simulated") and not b["fallback"] for b in batches)
