"""The job's autoscaler request beside Ray Data's coordinator, on a real Ray runtime: a request made on its own is
wiped at the coordinator's next tick (every 20 s, ``[]`` when no requester is registered); the job's claim is
registered with the coordinator and outlives it; two jobs' claims add up and one withdrawing leaves the other; a job
killed outright loses its claim when the expiry passes; and the fit does not count GPUs another job's actors hold.

What the autoscaler reads is checked where it reads it: the GCS key the v1 autoscaler polls
(``AUTOSCALER_RESOURCE_REQUEST_CHANNEL``, written by ray/autoscaler/_private/commands.py ``request_resources``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[1]
TICK_S = 20.0  # _AutoscalingCoordinatorActor.TICK_INTERVAL_S in Ray 2.60


@pytest.fixture(scope="module")
def ray_with_coordinator():
    import ray

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=2, num_gpus=2, include_dashboard=False, ignore_reinit_error=True, log_to_driver=False)
    ray.data.range(8).map_batches(lambda b: b).materialize()  # a first pipeline: the coordinator is alive now
    ray.get_actor("AutoscalingCoordinator", namespace="AutoscalingCoordinator")
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


def requested() -> list[dict[str, float]]:
    from ray._private.ray_constants import AUTOSCALER_RESOURCE_REQUEST_CHANNEL
    from ray.experimental.internal_kv import _internal_kv_get

    return json.loads(_internal_kv_get(AUTOSCALER_RESOURCE_REQUEST_CHANNEL) or b"[]")


def wait_for(check, timeout_s: float) -> bool:  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.5)
    return check()


def test_a_standing_claim_outlives_the_coordinators_ticks_and_is_withdrawn(ray_with_coordinator):
    from jobs.claim import Claim

    bundle = {"CPU": 0.25, "GPU": 1.0}
    with Claim("outlives") as claim:
        claim.ask([bundle])
        assert wait_for(lambda: requested() == [bundle], 5)
        seen = []
        deadline = time.monotonic() + TICK_S + 5  # past at least one tick of the coordinator
        while time.monotonic() < deadline:
            seen.append(requested())
            time.sleep(1)
        assert all(r == [bundle] for r in seen), seen
    assert wait_for(lambda: requested() == [], 5), "withdrawn on the way out"


def test_two_jobs_claims_add_up_and_one_withdrawing_leaves_the_other(ray_with_coordinator):
    from jobs.claim import Claim

    a, b = Claim("shard-1"), Claim("shard-2")
    a.ask([{"CPU": 0.5, "GPU": 1.0}])
    b.ask([{"CPU": 0.5, "GPU": 1.0}, {"CPU": 0.5}])
    try:
        assert wait_for(lambda: len(requested()) == 3, 5), requested()
        b.withdraw()  # the shard that finishes first
        assert wait_for(lambda: requested() == [{"CPU": 0.5, "GPU": 1.0}], 5), requested()
        time.sleep(TICK_S + 2)
        assert requested() == [{"CPU": 0.5, "GPU": 1.0}], "the other shard's request is still there after a tick"
    finally:
        a.withdraw()
        b.withdraw()


KILLED = """
import sys, time
import ray
import jobs.claim as claim
claim.EXPIRE_S = 5.0  # what a killed job's claim lives on
ray.init(address=sys.argv[1], log_to_driver=False)
claim.Claim("killed").ask([{"CPU": 0.75}])
print("asked", flush=True)
time.sleep(600)
"""


def test_the_claim_of_a_job_killed_outright_expires(ray_with_coordinator):
    proc = subprocess.Popen([sys.executable, "-c", KILLED, ray_with_coordinator], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, env=dict(os.environ, PYTHONPATH=str(REPO)))
    try:
        assert proc.stdout.readline().strip() == "asked"
        assert wait_for(lambda: requested() == [{"CPU": 0.75}], 10), requested()
        proc.send_signal(signal.SIGKILL)  # no finally, no withdraw
        proc.wait(timeout=30)
        assert wait_for(lambda: requested() == [], 5 + TICK_S + 5), requested()
    finally:
        if proc.poll() is None:
            proc.kill()


def test_gpus_another_jobs_actor_holds_are_not_counted_free(ray_with_coordinator):
    """A fixed cluster of two GPUs, one held by an actor of another job (another shard): this run's two GPU actors
    fit the cluster but not beside it, and the fit says they will wait for it, rather than nothing."""
    import ray

    from chunker.config import load_config
    from jobs.claim import Claim
    from jobs.common import alive_nodes, fit_to_cluster

    @ray.remote(num_gpus=1, num_cpus=0)
    class Holder:
        def ready(self) -> bool:
            return True

    holder = Holder.remote()
    try:
        assert ray.get(holder.ready.remote(), timeout=60)
        assert wait_for(lambda: alive_nodes()[0].get("GPU_free") == 1.0, 10), alive_nodes()
        cfg = load_config(None, ["ray.convert_actors=2", "ray.convert_num_gpus=1", "ray.stage_num_cpus=0.1",
                                 "milvus.uri=http://127.0.0.1:1"])
        with Claim("held") as claim:
            fit = fit_to_cluster(cfg, "file:///tmp/held-run", "", claim)
        assert fit.waiting and "1 of the cluster's GPUs are held by other jobs' actors" in fit.summary()
    finally:
        ray.kill(holder)
