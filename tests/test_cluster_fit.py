"""The pre-start check of every stage's CPU/GPU demand against the cluster's nodes, and the settings refused on a
multi-node cluster (pure functions; the Ray tests run them against real clusters)."""

from __future__ import annotations

from pathlib import Path

import pytest

from chunker.config import load_config
from chunker.run.cluster import ClusterFitError, fit_stages, multi_node_problems, stage_demands

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
