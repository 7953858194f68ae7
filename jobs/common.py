"""What every job shares: the command line (--config, --set) and joining or starting Ray.

This is the one place that reads the environment for Ray settings.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from chunker.config import Config, ConfigError, load_config

DEFAULT_CONFIG = "configs/local.yaml"
log = logging.getLogger("jobs")


def base_parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--config", default=DEFAULT_CONFIG if Path(DEFAULT_CONFIG).exists() else None,
                   help="YAML config (default: configs/local.yaml)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override any config field, e.g. --set milvus.uri=/tmp/x.db (repeatable)")
    return p


def load_or_exit(args: argparse.Namespace) -> Config:
    try:
        return load_config(args.config, args.overrides)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def init_ray(cfg: Config) -> None:
    """Join the cluster a job was submitted to (RAY_ADDRESS) or start a local runtime sized for a laptop."""
    import ray

    if ray.is_initialized():
        return
    address = cfg.ray.address or os.environ.get("RAY_ADDRESS")
    if address:
        ray.init(address=address, log_to_driver=True)
        return
    # Token auth is on by default in recent Ray; a private local runtime does not need it.
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    # Logical CPUs, not cores: every stage's actors start at once (the embedder loads while pages convert);
    # the stages share the real cores anyway, and too few logical CPUs leave actors pending or deadlocked.
    cpus = cfg.ray.local_num_cpus or max(8, 4 * (os.cpu_count() or 1))
    ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=True,
             runtime_env={"env_vars": {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}})


def setup_logging(verbose: bool = False) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


# Errors that mean "the setup is wrong", raised inside actors; Ray wraps them several layers deep.
_SETUP_ERRORS = ("BackendUnavailable", "EngineDead", "StoreUnavailable", "SchemaMismatch", "StoreError")


def setup_error(exc: BaseException) -> str | None:
    """The message of a setup error (missing model, package, GPU, store) somewhere inside ``exc``, or None.

    Looks through the exception chain and, for errors Ray re-raised from an actor, through the text Ray kept
    (``module.Class: message`` lines), so the user gets one clear line instead of an actor's core dump.
    """
    seen: set[int] = set()
    stack: list[BaseException] = [exc]
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if type(e).__name__ in _SETUP_ERRORS:
            return str(e)
        stack.extend(x for x in (e.__cause__, e.__context__, getattr(e, "cause", None)) if isinstance(x, BaseException))
    for line in str(exc).splitlines():
        for name in _SETUP_ERRORS:
            marker = f"{name}: "
            if marker in line:
                return line.split(marker, 1)[1].strip()
    return None


def preflight(cfg: Config) -> None:
    """Checks worth making in the driver before any actor starts, where the driver shares the machine with the
    actors (a local runtime): model weights for in-process model backends. On a cluster the workers check."""
    if cfg.ray.address or os.environ.get("RAY_ADDRESS"):
        return
    if cfg.converter.backend in ("vllm", "transformers"):
        from chunker.backends.weights import resolve_model_dir

        resolve_model_dir(cfg.converter.model)  # raises BackendUnavailable saying what to fetch or set
