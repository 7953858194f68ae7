"""What every command line shares: ``--config`` and ``--set`` parsing, and how to join or start Ray.

Ray itself is imported by the callers (``jobs``, ``serving``); this module only decides the options, so both
start Ray the same way without ``serving`` importing ``jobs``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from chunker.config import Config, ConfigError, load_config

DEFAULT_CONFIG = "configs/local.yaml"


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


def ray_address(cfg: Config) -> str | None:
    """The cluster to join: ``ray.address``, else ``RAY_ADDRESS`` (set by ``ray job submit``), else none (local)."""
    return cfg.ray.address or os.environ.get("RAY_ADDRESS") or None


def ray_init_options(cfg: Config, verbose: bool = True) -> dict[str, Any]:
    """Keyword arguments of ``ray.init``: join the cluster, or start a local runtime sized for a laptop.

    ``verbose=False`` keeps the terminal for the job's own lines: Ray's INFO lines ("Started a local Ray instance")
    and the workers' stdout/stderr stay in Ray's log files (``/tmp/ray/session_latest/logs``) instead of being echoed
    by the driver; errors that stop a stage still reach the driver as exceptions."""
    import logging

    quiet: dict[str, Any] = {"log_to_driver": verbose}
    if not verbose:
        quiet["logging_level"] = logging.WARNING
    address = ray_address(cfg)
    if address:
        return {"address": address, **quiet}
    # Token auth is on by default in recent Ray; a private local runtime does not need it.
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    # Logical CPUs, not cores: every stage's actors start at once (the embedder loads while pages convert);
    # the stages share the real cores anyway, and too few logical CPUs leave actors pending or deadlocked.
    cpus = cfg.ray.local_num_cpus or max(8, 4 * (os.cpu_count() or 1))
    # "local": a runtime of our own. Without an address ray.init joins any `ray start` cluster running on this
    # machine (and then refuses num_cpus); the job's AWS_* and other variables reach the workers of a runtime it
    # starts itself, because they inherit its environment.
    return {"address": "local", "num_cpus": cpus, "include_dashboard": False, **quiet,
            "runtime_env": {"env_vars": {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}}}
