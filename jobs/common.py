"""What every job shares beyond :mod:`chunker.cli`: starting Ray, logging, and checks made before any actor starts."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from chunker.cli import ray_address, ray_init_options
from chunker.config import Config

log = logging.getLogger("jobs")


def init_ray(cfg: Config, verbose: bool = True) -> None:
    """Join the cluster a job was submitted to (RAY_ADDRESS) or start a local runtime sized for a laptop.

    ``verbose=False``: see :func:`chunker.cli.ray_init_options` and :func:`quiet_ray_data`."""
    import ray

    if not ray.is_initialized():
        ray.init(**ray_init_options(cfg, verbose))
    if not verbose:
        quiet_ray_data()


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
    """The CPU and GPU count of every alive node of the joined cluster."""
    import ray

    return [{"CPU": float(n["Resources"].get("CPU", 0.0)), "GPU": float(n["Resources"].get("GPU", 0.0))}
            for n in ray.nodes() if n.get("Alive")]


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
