"""A run that fails after it has asked the autoscaler still withdraws the request: the store, the sink (its bulk
bucket probe) and the ledger are built inside the same ``try``/``finally`` as the rest of the run. Before, they were
built between the wait and that block, and a failure there left the nodes asked for standing.

A real local Ray runtime with no pipeline run on it yet (so nothing else writes the request slot), node types
declared as ``ray.node_types`` (a two-GPU node this runtime will never get: the run asks, waits its short
``ray.autoscale_wait_s`` and goes on, its actors left to wait), a ``milvus-lite server``, and a run folder whose
``ledger`` is a file, so the ledger cannot be made."""

from __future__ import annotations

import json

import pytest

from chunker.config import load_config
from ray_support import ray_runtime_fixture

pytestmark = [pytest.mark.ray, pytest.mark.slow]


ray_runtime = ray_runtime_fixture(num_cpus=2)


def requested() -> list[dict[str, float]]:
    from ray._private.ray_constants import AUTOSCALER_RESOURCE_REQUEST_CHANNEL
    from ray.experimental.internal_kv import _internal_kv_get

    return json.loads(_internal_kv_get(AUTOSCALER_RESOURCE_REQUEST_CHANNEL) or b"[]")


def test_a_failure_after_the_wait_withdraws_the_request(ray_runtime, samples_dir, tmp_path):
    from milvus_lite_server import lite_server

    from jobs.ingest import run_ingest

    one = tmp_path / "in"
    one.mkdir()
    first = sorted(samples_dir.glob("*.pdf"))[0]
    (one / first.name).write_bytes(first.read_bytes())
    run = tmp_path / "run"
    run.mkdir()
    (run / "ledger").write_text("a file where the ledger's folder goes")
    with lite_server(tmp_path / "milvus") as (uri, _proc):
        cfg = load_config("configs/local.yaml", [
            f"milvus.uri={uri}", "ray.autoscaler=always", "ray.node_types=[{name: gpu2, cpus: 2, gpus: 2, "
            "max_nodes: 1}]", "ray.convert_actors=1", "ray.convert_num_gpus=2", "ray.autoscale_wait_s=2"])
        with pytest.raises(OSError):
            run_ingest(cfg, f"file://{one}", f"file://{run}")
    assert requested() == [], "the request was left standing"
