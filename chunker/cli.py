"""What every command line shares: ``--config`` and ``--set`` parsing, and how to join or start Ray.

Ray itself is imported by the callers (``jobs``, ``serving``); this module only decides the options, so both
start Ray the same way without ``serving`` importing ``jobs``.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from enum import IntEnum
from pathlib import Path
from typing import Any

from chunker.config import Config, ConfigError, load_config

DEFAULT_CONFIG = "configs/local.yaml"


class ExitCode(IntEnum):
    """What every command's exit status means (README, "Exit codes"): scripts and schedulers branch on it."""

    OK = 0
    DEFECT = 1  # an unexpected error, with its traceback (Python's own status for an uncaught exception)
    USAGE = 2  # bad arguments, config or input (argparse's own status for a bad argument)
    SETUP = 3  # the run cannot start or go on: model weights, store, cluster, output bucket
    NOTHING_INDEXED = 4  # ingest: not one document succeeded; query: the collection holds no chunks


class JobParser(argparse.ArgumentParser):
    """A job's parser: ``--print-config`` prints the effective config (the file, ``--set`` overrides and every default)
    and exits, whatever else the command requires (``--input``, a question), so a user can check a config before a run."""

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:  # noqa: ANN401 - argparse's signature
        argv = list(sys.argv[1:] if args is None else args)
        if "--print-config" in argv and not {"-h", "--help"} & set(argv):
            known, _ = _config_options(self.prog).parse_known_args(argv)
            print(config_yaml(load_or_exit(known)), end="")
            raise SystemExit(ExitCode.OK)
        return super().parse_known_args(argv, namespace)


def _config_options(prog: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, add_help=False)
    p.add_argument("--config", default=DEFAULT_CONFIG if Path(DEFAULT_CONFIG).exists() else None)
    p.add_argument("--set", dest="overrides", action="append", default=[])
    return p


def config_yaml(cfg: Config) -> str:
    """The config as YAML, every field written out; secrets (``SECRET_FIELDS``) masked, as in a run summary."""
    import yaml

    from chunker.config import SECRET_FIELDS

    data = cfg.model_dump(mode="json")
    for path in SECRET_FIELDS:
        *parents, leaf = path.split(".")
        node = data
        for key in parents:
            node = node[key]
        if node.get(leaf) is not None:
            node[leaf] = "***"
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def base_parser(description: str, prog: str | None = None) -> argparse.ArgumentParser:
    """``prog`` is the command as the user typed it (``python -m jobs.ingest``, ``vision-chunker ingest``): argparse
    would otherwise name the file (``ingest.py``), which is not a command anyone can run."""
    p = JobParser(prog=prog, description=description)
    p.add_argument("--config", default=DEFAULT_CONFIG if Path(DEFAULT_CONFIG).exists() else None,
                   help="YAML config (default: configs/local.yaml)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override any config field, e.g. --set milvus.uri=/tmp/x.db (repeatable)")
    p.add_argument("--print-config", action="store_true",
                   help="print the effective config (the file, the --set overrides, every default) as YAML and exit")
    return p


def load_or_exit(args: argparse.Namespace) -> Config:
    try:
        return load_config(args.config, args.overrides)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(ExitCode.USAGE) from None


def ingest_exit_code(documents: int, ok: int, partial: int, skipped: int) -> ExitCode:
    """An ingest that saw documents and indexed none (nor found any done before) failed as a whole, however it went
    on document by document: a scheduler must not take it for a success. One good document makes the run a success;
    the summary lists the ones that failed."""
    if documents and not (ok or partial or skipped):
        return ExitCode.NOTHING_INDEXED
    return ExitCode.OK


def ray_address(cfg: Config) -> str | None:
    """The cluster to join: ``ray.address``, else ``RAY_ADDRESS`` (set by ``ray job submit``), else none (local)."""
    return cfg.ray.address or os.environ.get("RAY_ADDRESS") or None


def local_cpus(cfg: Config, cores: int | None = None) -> int:
    """Logical CPUs of a private local runtime: every stage's actors at once (the embedder loads while pages
    convert) plus two task slots (the listing read and one intake task), and never fewer than the cores.

    Not more: each logical CPU left free lets Ray Data start another intake task, each in a worker process of its
    own, and Ray prestarts workers by the logical count. On 2 cores the old default of 8 ran 6 task processes
    and 4 idle ones for 185 CloudWay files (their start-up and imports: ~19 CPU-seconds of a 94 CPU-second run);
    at 4, what configs/local.yaml needs, 2 and 2-3 (~7 CPU-seconds). Too few would leave actors pending or the
    read task waiting forever (see chunker.run.cluster)."""
    from chunker.run.cluster import stage_demands

    actors = sum(d.count * d.cpus for d in stage_demands(cfg) if d.actor)
    return max(cores or os.cpu_count() or 1, math.ceil(actors - 1e-9) + 2)


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
    cpus = cfg.ray.local_num_cpus or local_cpus(cfg)
    # "local": a runtime of our own. Without an address ray.init joins any `ray start` cluster running on this
    # machine (and then refuses num_cpus); the job's AWS_* and other variables reach the workers of a runtime it
    # starts itself, because they inherit its environment.
    return {"address": "local", "num_cpus": cpus, "include_dashboard": False, **quiet,
            "runtime_env": {"env_vars": {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}}}
