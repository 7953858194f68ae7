"""Cluster definitions parse; a real `ray start --head --num-cpus=2` cluster (a small real node: the stage actors
once took both CPUs and the job hung) runs `ray job submit ... jobs.ingest` with the default local config, on the
generated samples and on the CloudWay PDFs, survives a job stopped midway (the re-submitted job finishes the rest),
and is always stopped afterwards."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from autoscaling_cluster import REPO, VENV_BIN, stop_processes_naming  # tests/ is on sys.path under pytest


def test_cluster_files_parse():
    docs = {p.relative_to(REPO).as_posix(): list(yaml.safe_load_all(p.read_text()))
            for p in sorted((REPO / "cluster").rglob("*.yaml"))}
    assert set(docs) >= {"cluster/onprem.yaml", "cluster/runtime_env.yaml", "cluster/kuberay/raycluster.yaml",
                         "cluster/kuberay/rayjob.yaml"}
    onprem = docs["cluster/onprem.yaml"][0]
    assert onprem["provider"]["type"] == "local" and onprem["provider"]["worker_ips"]
    assert any("--require-hashes -r /opt/vision-chunker/requirements/gpu.lock.txt" in c
               for c in onprem["setup_commands"])
    assert "--port=6390" in onprem["head_start_ray_commands"][-1]
    rc = docs["cluster/kuberay/raycluster.yaml"][0]
    assert rc["kind"] == "RayCluster"
    gpu = rc["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert gpu["nvidia.com/gpu"] == "1"
    job = docs["cluster/kuberay/rayjob.yaml"][0]
    assert job["kind"] == "RayJob" and "python -m jobs.ingest --config /app/configs/qwen2.5-vl-7b.yaml" in \
        job["spec"]["entrypoint"] and "--input s3://" in job["spec"]["entrypoint"]
    yaml.safe_load(job["spec"]["runtimeEnvYAML"])
    assert "env_vars" in docs["cluster/runtime_env.yaml"][0]
    dockerfile = (REPO / "cluster" / "Dockerfile").read_text()
    assert "python3.11" in dockerfile and "--require-hashes -r requirements/gpu.lock.txt" in dockerfile


def test_cluster_path_problems_name_each_local_path():
    from chunker.config import load_config
    from chunker.deploy_checks import cluster_path_problems

    local = load_config(REPO / "configs" / "qwen2.5-vl-7b.yaml")  # ./output/run and a Lite ./output/milvus.db
    assert cluster_path_problems(local, 1) == []  # one machine: local folders are fine
    probs = cluster_path_problems(local, 3)
    assert [p.split()[0] for p in probs] == ["output.dir", "milvus.uri"]
    assert "3 nodes" in probs[0] and "Milvus server" in probs[1]
    ok = load_config(REPO / "configs" / "qwen2.5-vl-7b.yaml", [
        "output.dir=s3://corpus/runs/r1", "milvus.uri=http://milvus:19530", "milvus.bulk_uri=s3://milvus-bucket/bulk"])
    assert cluster_path_problems(ok, 3) == []
    shared = load_config(None, ["output.dir=file:///mnt/shared/run", "milvus.uri=http://milvus:19530",
                                "milvus.bulk_uri=/mnt/shared/bulk"])
    probs = cluster_path_problems(shared, 2)  # file:// is the explicit word for a shared mount; a bare path is not
    assert len(probs) == 1 and probs[0].startswith("milvus.bulk_uri '/mnt/shared/bulk' is a local folder")


def _free_ports(n: int) -> list[int]:
    """Free ports outside Ray's worker range (10002-19999), away from the defaults other runs use."""
    out: list[int] = []
    for port in range(23400, 29999):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        out.append(port)
        if len(out) == n:
            return out
    raise RuntimeError("no free ports")


def _env(dashboard: int) -> dict[str, str]:
    env = dict(os.environ)
    env.update(RAY_AUTH_MODE="disabled", PATH=f"{VENV_BIN}:{env.get('PATH', '')}",
               RAY_ADDRESS=f"http://127.0.0.1:{dashboard}")
    return env


@pytest.fixture(scope="module")
def cluster() -> Iterator[dict[str, str]]:
    gcs, dash, client, agent, agent_grpc, rtenv, metrics = _free_ports(7)
    temp = tempfile.mkdtemp(prefix="rayct", dir="/tmp")  # short: Ray's socket paths have a length limit
    env = _env(dash)
    env.pop("RAY_ADDRESS")
    cmd = [str(VENV_BIN / "ray"), "start", "--head", "--node-ip-address=127.0.0.1", f"--port={gcs}",
           f"--dashboard-port={dash}", "--dashboard-host=127.0.0.1", "--include-dashboard=true",
           f"--ray-client-server-port={client}", f"--dashboard-agent-listen-port={agent}",
           f"--dashboard-agent-grpc-port={agent_grpc}", f"--runtime-env-agent-port={rtenv}",
           f"--metrics-export-port={metrics}", f"--temp-dir={temp}", "--num-cpus=2", "--disable-usage-stats"]
    try:
        subprocess.run(cmd, env=env, check=True, capture_output=True, timeout=120)
        yield _env(dash)
    finally:
        # Always, even when start or a test failed half way. Only this cluster's processes (found by its temp
        # dir), never a blanket `ray stop --force`, which would also end other Ray runtimes on the machine.
        stop_processes_naming(temp)


def _submit(env: dict[str, str], sid: str, args: list[str], wait: bool = True) -> subprocess.CompletedProcess:
    env_vars = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    if os.environ.get("PYTHONPATH"):  # a worktree on the path of a shared venv: the job runs this checkout
        env_vars["PYTHONPATH"] = os.environ["PYTHONPATH"]
    runtime = json.dumps({"env_vars": env_vars})
    cmd = [str(VENV_BIN / "ray"), "job", "submit", "--submission-id", sid, "--working-dir", str(REPO),
           "--runtime-env-json", runtime, *([] if wait else ["--no-wait"]), "--",
           "python", "-m", "jobs.ingest", "--config", "configs/local.yaml", "--set", "ray.status_interval_s=5", *args]
    return subprocess.run(cmd, env=env, cwd=REPO, capture_output=True, text=True, timeout=480)


def _status(env: dict[str, str], sid: str) -> str:
    res = subprocess.run([str(VENV_BIN / "ray"), "job", "status", sid], env=env, capture_output=True, text=True,
                         timeout=60)
    out = (res.stdout + res.stderr).upper()
    for state in ("SUCCEEDED", "FAILED", "STOPPED", "RUNNING", "PENDING"):
        if state in out:
            return state
    return out


def _ids(db: Path) -> set[str]:
    from chunker.config import load_config
    from chunker.index.store import ChunkStore

    with ChunkStore(load_config("configs/local.yaml", [f"milvus.uri={db}"]).milvus, 384) as store:
        return store.chunk_ids()


@pytest.mark.ray
@pytest.mark.slow
def test_job_submit_stop_midway_and_resubmit(cluster, samples_dir, tmp_path):
    env = cluster
    # A clean run.
    db1, out1 = tmp_path / "clean.db", tmp_path / "clean"
    res = _submit(env, "ingest-clean", ["--input", str(samples_dir), "--output", str(out1),
                                        "--set", f"milvus.uri={db1}"])
    assert _status(env, "ingest-clean") == "SUCCEEDED", res.stdout[-3000:] + res.stderr[-2000:]
    s1 = json.loads((out1 / "summary.json").read_text())
    assert (s1["ok"], s1["failed"]) == (4, 0) and s1["collection_rows"] == s1["chunks"] > 0
    assert "== ingest summary" in res.stdout
    clean_ids = _ids(db1)
    assert len(clean_ids) == s1["collection_rows"]

    # Stopped as soon as its first document is done, then re-submitted with the same output. Commits (and so ledger
    # entries) as documents finish, not once a minute, so there is a midway to stop at.
    db2, out2 = tmp_path / "resumed.db", tmp_path / "resumed"
    args = ["--input", str(samples_dir), "--output", str(out2), "--set", f"milvus.uri={db2}",
            "--set", "milvus.commit_interval_s=0.5"]
    _submit(env, "ingest-killed", args, wait=False)
    deadline = time.time() + 480
    state = ""
    while time.time() < deadline and (state := _status(env, "ingest-killed")) in ("PENDING", "RUNNING"):
        if list(out2.glob("ledger/*/*.json")):
            subprocess.run([str(VENV_BIN / "ray"), "job", "stop", "ingest-killed"], env=env, capture_output=True,
                           timeout=120)
            break
        time.sleep(0.5)
    done_before = len(list(out2.glob("ledger/*/*.json")))
    if done_before < 1:
        logs = subprocess.run([str(VENV_BIN / "ray"), "job", "logs", "ingest-killed"], env=env, capture_output=True,
                              text=True, timeout=120)
        pytest.fail(f"no document finished before the job ended ({state}): {logs.stdout[-3000:]}")
    res = _submit(env, "ingest-resumed", args)
    assert _status(env, "ingest-resumed") == "SUCCEEDED", res.stdout[-3000:] + res.stderr[-2000:]
    s2 = json.loads((out2 / "summary.json").read_text())
    assert s2["skipped"] >= done_before and s2["ok"] + s2["skipped"] == 4 and s2["failed"] == 0
    assert _ids(db2) == clean_ids and s2["collection_rows"] == len(clean_ids)


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.shared_data
def test_job_submit_on_two_cpus_finishes_the_cloudway_pdfs(cluster, cloudway_sample, tmp_path):
    """The new user's first run: `ray start --head --num-cpus=2`, the default local config, a real corpus. It used to
    hang with "3/2 CPU" (four stage actors at 0.5 CPU and a read task at 1 CPU); the pre-start check now scales the
    actors' CPU reservations to fit and says so. A sample of the PDFs (tests/conftest.py): the hang came from the
    reservations, not from the corpus's size."""
    pdfs = cloudway_sample
    n = len(list(pdfs.glob("*.pdf")))
    db, out = tmp_path / "cw.db", tmp_path / "cw"
    res = _submit(cluster, "ingest-cloudway", ["--input", str(pdfs), "--output", str(out), "--set", f"milvus.uri={db}"])
    assert _status(cluster, "ingest-cloudway") == "SUCCEEDED", res.stdout[-3000:] + res.stderr[-2000:]
    s = json.loads((out / "summary.json").read_text())
    assert (s["documents"], s["ok"]) == (n, n), s["problems"]
    assert s["collection_rows"] == s["chunks"] > n
    assert "scaled" in s["cluster"] and "2 CPU" in s["cluster"]
