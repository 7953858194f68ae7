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
