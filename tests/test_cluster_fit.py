"""The pre-start check of every stage's CPU/GPU demand against the cluster's nodes, and the settings refused on a
multi-node cluster (pure functions; the Ray tests run them against real clusters)."""

from __future__ import annotations

from pathlib import Path

import pytest

from chunker.config import load_config
from chunker.run.cluster import ClusterFitError, NodeType, fit_stages, multi_node_problems, stage_demands

REPO = Path(__file__).resolve().parents[1]


def test_default_local_config_is_scaled_to_fit_two_cpus():
    # Today's hang: 4 actors x 0.5 CPU hold both CPUs of `ray start --num-cpus=2`, the intake task waits forever.
    cfg = load_config(REPO / "configs" / "local.yaml")
    fit = fit_stages(cfg, [{"CPU": 2.0}])
    actors = sum(d.count * d.cpus for d in fit.demands if d.actor)
    assert actors + 1.0 <= 2.0 and fit.scale < 1.0
    assert fit.cfg.ray.stage_num_cpus <= 0.25 and fit.cfg.ray.convert_cpus() <= 0.25
    assert "scaled" in fit.note and "2 CPU" in fit.note
    # Plenty of CPUs: nothing changes.
    roomy = fit_stages(cfg, [{"CPU": 8.0}])
    assert roomy.scale == 1.0 and roomy.cfg == cfg and not roomy.note


def test_cpu_shortage_without_fitting_is_one_line_naming_the_demand():
    cfg = load_config(REPO / "configs" / "local.yaml", ["ray.fit_to_cluster=false"])
    with pytest.raises(ClusterFitError) as err:
        fit_stages(cfg, [{"CPU": 2.0}])
    msg = str(err.value)
    assert "\n" not in msg and "convert 2 actors x (0.5 CPU)" in msg and "2 CPU and 0 GPU on 1 node" in msg


@pytest.mark.parametrize("size", ["3b", "7b", "32b", "72b"])
def test_shipped_gpu_configs_fit_their_stated_nodes(size: str):
    cfg = load_config(REPO / "configs" / f"qwen2.5-vl-{size}.yaml")
    tp = cfg.converter.model.tensor_parallel_size
    # One node with exactly the GPUs one replica needs and a typical CPU count.
    fit = fit_stages(cfg, [{"CPU": 16.0, "GPU": float(tp)}])
    assert fit.scale == 1.0
    convert = next(d for d in fit.demands if d.stage == "convert")
    assert convert.gpus == tp and convert.cpus >= 4  # the GPU actor gets real cores for rendering/preprocessing


def test_embedder_asking_for_a_gpu_share_conversion_holds_is_refused():
    # The shipped configs used to do this: conversion takes the whole GPU, the embedder 0.25 more; Ray waits forever.
    cfg = load_config(REPO / "configs" / "qwen2.5-vl-7b.yaml", ["ray.embed_num_gpus=0.25", "embed.device=cuda"])
    with pytest.raises(ClusterFitError) as err:
        fit_stages(cfg, [{"CPU": 16.0, "GPU": 1.0}])
    msg = str(err.value)
    assert "\n" not in msg and "embed stage cannot be placed" in msg and "0.25 GPU" in msg and "1 GPU on 1 node" in msg
    # The same config fits when a second GPU exists.
    assert fit_stages(cfg, [{"CPU": 16.0, "GPU": 2.0}]).scale == 1.0


def test_an_actor_must_fit_on_one_node():
    cfg = load_config(None, ["ray.convert_actors=1", "ray.convert_num_gpus=2"])
    with pytest.raises(ClusterFitError, match="convert stage cannot be placed"):
        fit_stages(cfg, [{"CPU": 8.0, "GPU": 1.0}, {"CPU": 8.0, "GPU": 1.0}])
    assert fit_stages(cfg, [{"CPU": 8.0, "GPU": 1.0}, {"CPU": 8.0, "GPU": 2.0}]).scale == 1.0


def test_gpu_actor_cpus_are_configurable_and_default_to_the_stage_share():
    cfg = load_config(None)
    assert stage_demands(cfg)[0].cpus == cfg.ray.stage_num_cpus
    cfg = load_config(None, ["ray.convert_num_cpus=6"])
    assert stage_demands(cfg)[0].cpus == 6


def test_far_too_small_a_cluster_is_refused():
    cfg = load_config(None, ["ray.convert_actors=40"])
    with pytest.raises(ClusterFitError, match="even with their CPU reservations scaled down"):
        fit_stages(cfg, [{"CPU": 1.5}])


def test_one_machine_settings_are_refused_on_a_multi_node_cluster():
    cfg = load_config(None)  # ./output/run and Milvus Lite
    assert multi_node_problems(cfg, "./output/run", nodes=1) == []
    problems = multi_node_problems(cfg, "./output/run", nodes=3)
    assert len(problems) == 2 and "3 nodes" in problems[0] and "Milvus Lite" in problems[1]
    assert "'./output/run'" in problems[0], "the run's actual output is judged, not the config default"
    server = load_config(None, ["milvus.uri=http://milvus:19530"])
    assert multi_node_problems(server, "s3://b/run", nodes=3) == []
    assert multi_node_problems(server, "file:///mnt/shared/run", nodes=3) == []
    bulk = multi_node_problems(load_config(None, ["milvus.uri=http://milvus:19530", "milvus.bulk_uri=/tmp/bulk"]),
                               "s3://b/run", nodes=3)
    assert len(bulk) == 1 and "bulk_uri" in bulk[0]


# ------------------------------------------------------------------ GPUs per device


def test_gpu_shares_are_packed_per_device_not_summed_per_node():
    # 8 conversion actors at 0.9 GPU and an embedder at 0.5 on one 8-GPU node: 7.7 GPUs "fit" by the sum, but every
    # GPU has 0.1 left, and Ray places a share on one GPU: the embedder would wait forever.
    cfg = load_config(None, ["ray.convert_actors=8", "ray.convert_num_gpus=0.9", "ray.embed_num_gpus=0.5",
                             "ray.stage_num_cpus=0.5"])
    with pytest.raises(ClusterFitError) as err:
        fit_stages(cfg, [{"CPU": 64.0, "GPU": 8.0}])
    msg = str(err.value)
    assert "\n" not in msg and "embed stage cannot be placed" in msg and "a share below 1 must fit on one GPU" in msg
    # At 0.1 the embedder fits beside any one of them; with a ninth GPU the 0.5 fits too.
    assert fit_stages(load_config(None, ["ray.convert_actors=8", "ray.convert_num_gpus=0.9",
                                         "ray.embed_num_gpus=0.1"]), [{"CPU": 64.0, "GPU": 8.0}]).scale == 1.0
    assert fit_stages(cfg, [{"CPU": 64.0, "GPU": 9.0}]).scale == 1.0
    # Two half shares share one GPU; three do not fit on one.
    halves = load_config(None, ["ray.convert_actors=2", "ray.convert_num_gpus=0.5", "ray.embed_num_gpus=0.5"])
    with pytest.raises(ClusterFitError):
        fit_stages(halves, [{"CPU": 8.0, "GPU": 1.0}])
    assert fit_stages(halves, [{"CPU": 8.0, "GPU": 2.0}]).scale == 1.0


def test_a_gpu_share_above_one_must_be_whole():
    cfg = load_config(None, ["ray.convert_actors=1", "ray.convert_num_gpus=1.5"])
    with pytest.raises(ClusterFitError, match="a whole number of GPUs"):
        fit_stages(cfg, [{"CPU": 8.0, "GPU": 4.0}])


# ------------------------------------------------------------------ what an autoscaler can add

GPU_WORKER = NodeType("gpu", 2.0, 1.0, 2)
HEAD = {"CPU": 2.0, "GPU": 0.0}


def _gpu_cfg(*extra: str):
    return load_config(None, ["converter.backend=simulated", "ray.convert_actors=2", "ray.convert_num_gpus=1",
                              *extra])


def test_an_autoscaling_cluster_is_fitted_against_what_it_can_become():
    cfg = _gpu_cfg()
    with pytest.raises(ClusterFitError, match="0 GPU on 1 node"):
        fit_stages(cfg, [HEAD])  # a fixed cluster: refused, as before
    fit = fit_stages(cfg, [HEAD], [GPU_WORKER])
    assert fit.waiting and fit.scale == 1.0, "fits once the autoscaler adds its two GPU workers"
    assert not fit_stages(cfg, [HEAD, {"CPU": 2.0, "GPU": 1.0}, {"CPU": 2.0, "GPU": 1.0}], [GPU_WORKER]).waiting
    # Alive workers of a type count against its maximum: two there already, none more to add.
    three = _gpu_cfg("ray.convert_actors=3")
    with pytest.raises(ClusterFitError) as err:
        fit_stages(three, [HEAD, {"CPU": 2.0, "GPU": 1.0}, {"CPU": 2.0, "GPU": 1.0}], [GPU_WORKER])
    assert "adds no more nodes" in str(err.value)
    with pytest.raises(ClusterFitError) as err:
        fit_stages(three, [HEAD], [GPU_WORKER])
    msg = str(err.value)
    assert "\n" not in msg and "convert stage cannot be placed" in msg and "can add 2 x gpu (2 CPU/1 GPU)" in msg
    # No node type with two GPUs: a two-GPU actor can never be placed.
    with pytest.raises(ClusterFitError, match="convert stage cannot be placed"):
        fit_stages(_gpu_cfg("ray.convert_actors=1", "ray.convert_num_gpus=2"), [HEAD], [GPU_WORKER])
    # A type without a maximum adds what the stages need.
    assert fit_stages(_gpu_cfg("ray.convert_actors=6"), [HEAD], [NodeType("gpu", 4.0, 1.0, -1)]).waiting


def test_the_autoscaler_is_asked_and_waited_for_then_the_stages_are_fitted_to_the_nodes_that_came():
    from chunker.run.autoscale import fit_cluster

    cfg = _gpu_cfg()
    worker = {"CPU": 2.0, "GPU": 1.0}
    arrivals = [[HEAD, worker], [HEAD, worker, worker]]
    asked, said, now = [], [], [0.0]

    def get_nodes():
        return arrivals.pop(0) if len(arrivals) > 1 else arrivals[0]

    def sleep(s: float) -> None:
        now[0] += s

    fit = fit_cluster(cfg, [HEAD], [GPU_WORKER], get_nodes=get_nodes, request=asked.append, say=said.append,
                      timeout_s=60, sleep=sleep, clock=lambda: now[0], poll_s=2)
    assert asked == [[{"CPU": 0.5, "GPU": 1.0}] * 2 + [{"CPU": 0.5}] * 2 + [{"CPU": 1.0}]]
    assert len(said) == 1 and "waiting up to 60 s" in said[0] and "2 GPU" in said[0]
    assert not fit.waiting and fit.asked and "added the nodes the stages need in 4 s" in fit.summary()
    # Already there: nothing is asked.
    asked.clear()
    assert not fit_cluster(cfg, [HEAD, worker, worker], [GPU_WORKER], get_nodes=get_nodes, request=asked.append,
                           say=said.append, timeout_s=60, sleep=sleep, clock=lambda: now[0]).asked and not asked


def test_a_slow_autoscaler_starts_the_run_when_its_node_types_can_hold_it_and_unknown_types_are_refused():
    from chunker.run.autoscale import fit_cluster

    cfg = _gpu_cfg()
    now = [0.0]
    asked: list = []

    def sleep(s: float) -> None:
        now[0] += s

    kw = dict(get_nodes=lambda: [HEAD], request=asked.append, say=lambda s: None, timeout_s=10, sleep=sleep,
              clock=lambda: now[0])
    fit = fit_cluster(cfg, [HEAD], [GPU_WORKER], **kw)
    assert fit.waiting and "has not added every node" in fit.summary()
    # ray.autoscaler=always with node types nobody could read: asked and waited for, then refused with what was seen.
    now[0] = 0.0
    with pytest.raises(ClusterFitError) as err:
        fit_cluster(cfg, [HEAD], [], **kw)
    msg = str(err.value)
    assert "\n" not in msg and "node types are unknown" in msg and "after waiting 10 s" in msg
    assert asked[-1] == [], "the request is withdrawn when the run is refused"


def test_autoscaling_config_node_types_are_read_like_the_autoscaler_reads_them():
    from jobs.common import node_types_of

    config = {"max_workers": 3, "head_node_type": "ray.head.default", "available_node_types": {
        "ray.head.default": {"resources": {"CPU": 2}, "max_workers": 0},
        "gpu": {"resources": {"CPU": 16, "GPU": 1}, "min_workers": 0, "max_workers": 8},
        "cpu": {"resources": {"CPU": 8}, "max_workers": 2},
        "detected": {"resources": {}, "max_workers": 4},  # resources left to detection: nothing to fit against
    }}
    assert node_types_of(config) == [NodeType("gpu", 16.0, 1.0, 3), NodeType("cpu", 8.0, 0.0, 2)]


def test_declared_node_types_and_the_autoscaler_switch():
    from jobs.common import autoscaler_node_types

    assert autoscaler_node_types(load_config(None, ["ray.autoscaler=never"])) is None
    cfg = load_config(None, ["ray.node_types=[{name: gpu, cpus: 16, gpus: 1, max_nodes: 8}]"])
    assert autoscaler_node_types(cfg) == [NodeType("gpu", 16.0, 1.0, 8)]


def test_a_local_input_is_refused_on_a_cluster_of_several_nodes():
    cfg = load_config(None, ["milvus.uri=http://milvus:19530"])
    assert multi_node_problems(cfg, "s3://b/run", nodes=1, input_uri="./pdfs") == []
    [problem] = multi_node_problems(cfg, "s3://b/run", nodes=3, input_uri="./pdfs")
    assert problem.startswith("--input './pdfs' is a local path") and "3 nodes" in problem
    assert multi_node_problems(cfg, "s3://b/run", nodes=3, input_uri="s3://corpus/pdfs/") == []
    assert multi_node_problems(cfg, "s3://b/run", nodes=3, input_uri="file:///mnt/shared/pdfs") == []


def test_an_autoscaler_is_told_from_rays_read_only_mirror_of_a_fixed_cluster(monkeypatch):
    import json

    import ray.experimental.internal_kv as kv

    from jobs.common import _autoscaler_running

    def status(mapping: dict[str, str]) -> None:
        values = {"__autoscaling_status": json.dumps({"autoscaler_report": {"node_type_mapping": mapping}}).encode(),
                  "__autoscaler_v2_enabled": b"0"}
        monkeypatch.setattr(kv, "_internal_kv_get", lambda key, namespace=None: values.get(key))

    status({"ab12": "node_ab12", "cd34": "node_cd34"})  # `ray start` without an autoscaling config
    assert not _autoscaler_running()
    status({"ab12": "headgroup", "cd34": "gpu"})  # KubeRay's autoscaler names its groups
    assert _autoscaler_running()
    status({"ab12": "node_pool"})  # a group that happens to be called node_...
    assert _autoscaler_running()


# ------------------------------------------------------------------ node types unknown (KubeRay without ray.node_types)


def test_an_autoscaler_with_unknown_node_types_is_judged_a_multi_node_cluster():
    """The head alone, GPU group at 0 and its types unknown: the workers will come, so the one-machine settings of
    the 7B config (local output folder, Milvus Lite) are refused at once, not found out on the workers."""
    from chunker.run.cluster import potential_nodes

    cfg = load_config(REPO / "configs" / "qwen2.5-vl-7b.yaml")
    nodes = potential_nodes([HEAD], [], cfg)
    assert nodes > 1
    problems = multi_node_problems(cfg, cfg.output.dir, nodes, "./pdfs")
    assert len(problems) == 3 and "output.dir" in problems[0] and "Milvus Lite" in problems[1]
    assert potential_nodes([HEAD], None, cfg) == 1, "a fixed one-node cluster stays one machine"


def _clock():
    now = [0.0]

    def sleep(s: float) -> None:
        now[0] += s

    return now, sleep


def test_unknown_node_types_stop_waiting_once_the_scaled_stages_fit_the_nodes_that_came():
    """The stages reserve more CPU than head + GPU workers have (scaled down to fit, ray.fit_to_cluster): the wait
    ends when the GPU workers are there at 2 s, not after the whole ray.autoscale_wait_s."""
    from chunker.run.autoscale import fit_cluster

    cfg = _gpu_cfg("ray.stage_num_cpus=1.5")  # 2 x (1.5 CPU, 1 GPU) + plan 1.5 + embed 1.5 + intake 1 > 6 CPU
    worker = {"CPU": 2.0, "GPU": 1.0}
    now, sleep = _clock()
    asked: list = []
    fit = fit_cluster(cfg, [HEAD], [], get_nodes=lambda: [HEAD, worker, worker], request=asked.append,
                      say=lambda s: None, timeout_s=900, sleep=sleep, clock=lambda: now[0], poll_s=2)
    assert now[0] <= 2 and fit.asked and not fit.waiting, now[0]
    assert fit.scale < 1 and "scaled" in fit.note
    # Only what no scaling can make fit is asked for: the GPU actors' bundles, no CPU-only bundle that could bring
    # a GPU pod of its own on a cluster whose only group has GPUs.
    assert asked == [[{"CPU": 1.5, "GPU": 1.0}] * 2], asked


def test_unknown_node_types_scale_a_cpu_shortfall_onto_the_gpu_nodes_there_instead_of_asking():
    from chunker.run.autoscale import fit_cluster

    cfg = _gpu_cfg("ray.stage_num_cpus=1.5")
    worker = {"CPU": 2.0, "GPU": 1.0}
    asked: list = []
    fit = fit_cluster(cfg, [HEAD, worker, worker], [], get_nodes=lambda: [HEAD, worker, worker],
                      request=asked.append, say=lambda s: None, timeout_s=900)
    assert asked == [] and fit.scale < 1 and not fit.waiting


def test_gpus_other_jobs_hold_are_waited_for_not_counted_free():
    """Another shard's actors hold the cluster's two GPUs: on an autoscaling cluster this run asks for its own
    nodes and waits for them; on a fixed cluster it says its actors wait for those GPUs."""
    from chunker.run.autoscale import fit_cluster

    cfg = _gpu_cfg()
    held = {"CPU": 2.0, "GPU": 1.0, "GPU_free": 0.0}
    now, sleep = _clock()
    asked: list = []
    arrivals = [[HEAD, held, held], [HEAD, held, held, {"CPU": 2.0, "GPU": 1.0, "GPU_free": 1.0},
                                     {"CPU": 2.0, "GPU": 1.0, "GPU_free": 1.0}]]
    fit = fit_cluster(cfg, [HEAD, held, held], [NodeType("gpu", 2.0, 1.0, 4)], get_nodes=lambda: arrivals.pop(0),
                      request=asked.append, say=lambda s: None, timeout_s=60, sleep=sleep, clock=lambda: now[0])
    assert asked and fit.asked and not fit.waiting
    fixed = fit_cluster(cfg, [HEAD, held, held], None, get_nodes=lambda: [], request=asked.append,
                        say=lambda s: None, timeout_s=60)
    assert fixed.waiting and "2 of the cluster's GPUs are held by other jobs' actors" in fixed.summary()


def test_the_drivers_of_one_job_are_fitted_together():
    from chunker.run.drivers import driver_configs, job_config

    cfg = _gpu_cfg("ray.convert_actors=4")
    job, notes = job_config(cfg, 2)
    assert (job.ray.convert_actors, job.ray.plan_actors, job.ray.embed_actors) == (4, 2, 2)
    assert len(notes) == 2 and "one per driver" in notes[0]
    demands = stage_demands(job, drivers=2)
    assert [d.count for d in demands] == [4, 2, 2, 2], "an intake slot per driver"
    four = [HEAD] + [{"CPU": 2.0, "GPU": 1.0}] * 4
    fit = fit_stages(job, four, drivers=2)
    parts = driver_configs(fit.cfg, 2)
    assert [p.ray.convert_actors for p in parts] == [2, 2] and [p.ray.plan_actors for p in parts] == [1, 1]
    assert all(p.ray.stage_num_cpus == fit.cfg.ray.stage_num_cpus for p in parts)
    with pytest.raises(Exception, match="ray.convert_actors=1 gives some driver no conversion actor"):
        job_config(_gpu_cfg("ray.convert_actors=1"), 2)
