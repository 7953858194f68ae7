"""What every job shares beyond :mod:`chunker.cli`: starting Ray, logging, and checks made before any actor starts."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from chunker.cli import ray_address, ray_init_options
from chunker.config import Config
from chunker.run.autoscale import fit_cluster
from chunker.run.cluster import ClusterFitError, Fit, NodeType, multi_node_problems, potential_nodes
from jobs.claim import Claim
from jobs.stderr_filter import RAY_CONSTRUCTOR_ARGS, drop_stderr_lines

log = logging.getLogger("jobs")


def init_ray(cfg: Config, verbose: bool = True) -> None:
    """Join the cluster a job was submitted to (RAY_ADDRESS) or start a local runtime sized for a laptop.

    ``verbose=False``: see :func:`chunker.cli.ray_init_options` and :func:`quiet_ray_data`."""
    import ray

    if not ray.is_initialized():
        ray.init(**ray_init_options(cfg, verbose))
    if not verbose:
        quiet_ray_data()
        drop_stderr_lines(RAY_CONSTRUCTOR_ARGS)  # after ray.init: the processes it starts never hold the filter's pipe


def quiet_ray_data() -> None:
    """No Ray Data progress bars (on a terminal) or progress log blocks (every ~10 s elsewhere), and only errors
    from Ray Data on the console: the job prints its own progress line. Ray Data's log file
    (``/tmp/ray/session_latest/logs/ray-data``) still gets everything."""
    from ray.data import DataContext

    DataContext.get_current().enable_progress_bars = False
    for handler in logging.getLogger("ray.data").handlers:
        if type(handler).__name__ != "SessionFileHandler":  # ray/data/_internal/logging.py: the console handler
            handler.setLevel(logging.ERROR)


def alive_nodes() -> list[dict[str, float]]:
    """The CPU and GPU count of every alive node of the joined cluster, and ``GPU_free``: the GPUs no actor holds
    now (other jobs' actors, another shard's; ``ray._private.state.available_resources_per_node``, a DeveloperAPI of
    Ray 2.60 that leaves out a resource with nothing available)."""
    import ray

    try:
        from ray._private.state import available_resources_per_node

        free = available_resources_per_node()
    except Exception:  # noqa: BLE001 - without it every GPU counts as free, as before
        free = None
    out = []
    for n in ray.nodes():
        if not n.get("Alive"):
            continue
        node = {"CPU": float(n["Resources"].get("CPU", 0.0)), "GPU": float(n["Resources"].get("GPU", 0.0))}
        if free is not None and node["GPU"]:
            node["GPU_free"] = float((free.get(n["NodeID"]) or {}).get("GPU", 0.0))
        out.append(node)
    return out


def node_types_of(config: dict[str, Any]) -> list[NodeType]:
    """The worker node types of a Ray autoscaling config (``available_node_types``; the head's type and types
    whose resources the config leaves to detection are left out: nothing can be fitted against them)."""
    head = config.get("head_node_type")
    cap = int(config.get("max_workers", -1)) if config.get("max_workers") is not None else -1
    out = []
    for name, spec in (config.get("available_node_types") or {}).items():
        res = spec.get("resources") or {}
        most = int(spec.get("max_workers", cap))
        if name == head or not res.get("CPU") or most == 0:
            continue
        out.append(NodeType(name, float(res["CPU"]), float(res.get("GPU", 0)), min(most, cap) if cap >= 0 else most))
    return out


def _gcs_node_types() -> list[NodeType] | None:
    """Node groups an autoscaler reported to the GCS (``ray._private.state.state.get_cluster_config``, Ray 2.60
    ray/_private/state.py; what Ray Data's own autoscaler reads, ray/data/_internal/cluster_autoscaler/util.py).
    Later releases' autoscaler v2 reports them; none in 2.60's v1 monitor."""
    try:
        from ray._private.state import state

        config = state.get_cluster_config()
    except Exception:  # noqa: BLE001 - an older GCS or no such call: nothing reported
        return None
    groups = list(getattr(config, "node_group_configs", None) or [])
    types = [NodeType(g.name or "worker", float(g.resources.get("CPU", 0)), float(g.resources.get("GPU", 0)),
                      int(g.max_count)) for g in groups if g.resources.get("CPU") and g.max_count != 0]
    return types or None


def _monitor_node_types() -> list[NodeType] | None:
    """The node types of the v1 autoscaler running beside this driver on the head (``ray up``, ``ray start --head
    --autoscaling-config``): its status in the GCS names the monitor process (``__autoscaling_status``, written by
    ray/autoscaler/_private/monitor.py with ``monitor_pid``), whose ``--autoscaling-config`` file holds
    ``available_node_types``. None where the monitor is elsewhere (KubeRay runs it in a sidecar container) or has
    no such file (a cluster started without one is fixed)."""
    import json

    import yaml
    from ray.experimental.internal_kv import _internal_kv_get

    try:
        status = json.loads(_internal_kv_get("__autoscaling_status") or b"{}")
        cmdline = Path(f"/proc/{int(status['monitor_pid'])}/cmdline").read_bytes().decode().split("\0")
    except (KeyError, ValueError, OSError):
        return None
    if not any(part.endswith("monitor.py") for part in cmdline):
        return None  # another process under that pid: the monitor runs in another container or machine
    path = next((a.split("=", 1)[1] for a in cmdline if a.startswith("--autoscaling-config=")), "")
    try:
        config = yaml.safe_load(Path(path).expanduser().read_text()) if path else None
    except (OSError, yaml.YAMLError):
        return None
    return node_types_of(config) if isinstance(config, dict) else None


def _autoscaler_running() -> bool:
    """Whether an autoscaler (not Ray's read-only mirror of a fixed cluster) manages the cluster, as its status in the
    GCS shows: autoscaler v2 says so in its own key; v1's report maps nodes to named node types, where the read-only
    provider of a cluster started without an autoscaling config names each node's type ``node_<id>``
    (ray/autoscaler/_private/util.py, ``format_readonly_node_type``). KubeRay's autoscaler, in its sidecar, shows
    here even though its node types cannot be read."""
    import json

    from ray.experimental.internal_kv import _internal_kv_get

    try:
        if (_internal_kv_get("__autoscaler_v2_enabled", namespace="__autoscaler") or b"") == b"1":
            return True
        report = json.loads(_internal_kv_get("__autoscaling_status") or b"{}").get("autoscaler_report") or {}
    except (ValueError, TypeError):
        return False
    return any(t != f"node_{node}" for node, t in (report.get("node_type_mapping") or {}).items())


def autoscaler_node_types(cfg: Config) -> list[NodeType] | None:
    """What the cluster's autoscaler can add: None for a fixed cluster (or ``ray.autoscaler=never``), an empty list
    for an autoscaler whose node types are unknown (KubeRay's, unless ``ray.node_types`` declares them; or
    ``ray.autoscaler=always`` with none found)."""
    r = cfg.ray
    if r.autoscaler == "never":
        return None
    if r.node_types:
        return [NodeType(t.name, t.cpus, t.gpus, t.max_nodes) for t in r.node_types]
    found = _gcs_node_types() or _monitor_node_types()
    if found:
        return found
    return [] if r.autoscaler == "always" or _autoscaler_running() else None


def fit_to_cluster(cfg: Config, out_uri: str, input_uri: str, claim: Claim, drivers: int = 1) -> Fit:
    """The config sized to the cluster and what its autoscaler can add (see :mod:`chunker.run.cluster` and
    :mod:`chunker.run.autoscale`), after waiting for the nodes the stages need (asked through ``claim``, which the
    caller withdraws on every way out); or :class:`ClusterFitError`, one line. ``drivers``: pipelines of one job
    side by side."""
    nodes = alive_nodes()
    types = autoscaler_node_types(cfg)
    problems = multi_node_problems(cfg, out_uri, potential_nodes(nodes, types, cfg, drivers), input_uri)
    if problems:
        raise ClusterFitError("; ".join(problems))
    fit = fit_cluster(cfg, nodes, types, get_nodes=alive_nodes, request=claim, say=log.warning,
                      timeout_s=cfg.ray.autoscale_wait_s, drivers=drivers)
    if fit.asked:  # judged again on the nodes that came: one-machine settings break once there are several
        problems = multi_node_problems(cfg, out_uri, len(alive_nodes()), input_uri)
        if problems:
            claim.withdraw()
            raise ClusterFitError("; ".join(problems))
    for line in [fit.note, *fit.notes]:
        if line:
            log.warning(line)
    return fit


def conversion_remote_args(cfg: Config) -> dict[str, Any]:
    """Ray options of the conversion actors beyond their resources. With ``converter.model.allow_download`` they get
    the Hugging Face hub back on: every worker of a local runtime, and every node of a cluster whose runtime env is
    cluster/runtime_env.yaml, has ``HF_HUB_OFFLINE=1``, under which a download the config asks for cannot work. An
    actor's own ``env_vars`` win over the job's (Ray merges runtime envs per key, the actor's last)."""
    if not cfg.converter.model.allow_download:
        return {}
    return {"runtime_env": {"env_vars": {"HF_HUB_OFFLINE": "0", "TRANSFORMERS_OFFLINE": "0"}}}


def on_every_node(fn: Callable[..., Any], *args: Any, timeout_s: float = 60.0) -> list[Any]:
    """Run ``fn(*args)`` once on each alive node (pinned there, no CPU reserved); results in node order."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    task = ray.remote(num_cpus=0)(fn)
    refs = [task.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote(*args)
            for n in ray.nodes() if n.get("Alive")]
    return ray.get(refs, timeout=timeout_s)


def setup_logging(verbose: bool = False) -> None:
    """Quiet unless ``verbose``: warnings and errors only, from every library (ours included).

    Call it before anything imports grpc. Milvus Lite runs its gRPC server in this process, so what it logs lands
    here: a call the Lite server does not implement is logged by grpc as an ERROR with a traceback (the client gets
    the error and decides), and grpc's C core prints its own lines (keepalive GOAWAYs between the Lite server and
    its client). Both stay off the terminal unless ``verbose``."""
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not verbose:
        logging.getLogger("grpc._server").setLevel(logging.CRITICAL)
        os.environ.setdefault("GRPC_VERBOSITY", "NONE")


def preflight(cfg: Config) -> None:
    """Checks worth making in the driver before any actor starts, where the driver shares the machine with the
    actors (a local runtime): model weights for in-process model backends. On a cluster the workers check."""
    if ray_address(cfg):
        return
    if cfg.converter.backend in ("vllm", "transformers"):
        from chunker.backends.weights import resolve_model_dir

        resolve_model_dir(cfg.converter.model)  # raises BackendUnavailable saying what to fetch or set
