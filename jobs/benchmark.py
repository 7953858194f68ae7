"""Throughput benchmark: pages/s, tokens/s, engine occupancy and per-stage CPU cost, as JSON, Markdown and PNG plots.

    python -m jobs.benchmark [--quick] [--output DIR]            # simulated engines: the pipeline's own overhead
    python -m jobs.benchmark stages [--quick] [--output DIR]     # CPU stages, embedding, ours vs naive end to end
    python -m jobs.benchmark serve [serve_bench args]            # query endpoint load (jobs.bench.serve)
    python -m jobs.benchmark serve-floor [--requests N]          # Ray Serve's own per-request floor here
    python -m jobs.benchmark lite-floor --db DIR                 # Milvus Lite's per-search floor, hybrid vs dense
    python -m jobs.benchmark cpu-compare --before REV --corpus GLOB  # CPU per page of the CPU stages, REV vs now
    python -m jobs.benchmark dryrun [--size quick]               # driver, ledger, plan stage, Milvus load ceilings
    python -m jobs.benchmark --config configs/qwen2.5-vl-7b.yaml --gpu-hour-usd 2.5   # real vLLM engines (GPU)

Targets are printed beside the figures; nothing is asserted. See BENCHMARKS.md for what the figures mean. Steps that
load models, start Ray or open Milvus Lite run in processes of their own (jobs.bench.isolate); a step that fails is
reported as failed and the report is still written.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import traceback
from pathlib import Path
from typing import Any

from chunker.backends.simulated import EngineSpec
from chunker.config import ConfigError, load_config
from chunker.errors import SetupError
from jobs.bench.experiments import SIZES, TARGETS, _sim_factory, experiments, stages_section
from jobs.bench.gpu_estimate import gpu_estimate, time_scale_for
from jobs.bench.report import markdown, plots

# The simulated engine's sequences without --config: what BENCHMARKS.md's simulated figures were measured with (the
# 7B config for a 48 GB card; it ships 64 for 80 GB cards).
SIMULATED_MAX_NUM_SEQS = 32

# Subcommands with options of their own, each run by its module's main(); the default ("report") and "stages" share
# the options below. Named here once, so --help lists every one and the dispatch cannot miss one.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("jobs.bench.serve", "query endpoint load, through Serve's proxy and straight to the replica"),
    "serve-floor": ("jobs.bench.serve_floor", "what any Ray Serve app costs per request on this machine"),
    "lite-floor": ("jobs.bench.lite_floor", "what one Milvus Lite search costs before it searches (--db DIR)"),
    "cpu-compare": ("jobs.bench.cpu_compare", "CPU per page of each CPU stage, an earlier commit (--before REV) "
                    "against this checkout"),
    "dryrun": ("jobs.bench.dryrun", "driver, ledger, plan stage and Milvus load ceilings (instant stand-in stages)"),
}
OWN_COMMANDS = {"report": "simulated engines: the pipeline's own overhead, scaling, long documents, CPU per stage "
                          "(the default)",
                "stages": "CPU stages, embedding, ours against a naive pipeline end to end"}


def _commands_help() -> str:
    rows = {**OWN_COMMANDS, **{name: what for name, (_, what) in SUBCOMMANDS.items()}}
    return "commands (each has its own --help):\n" + "\n".join(f"  {n:12s} {w}" for n, w in rows.items())


def parse_args(argv: list[str], prog: str = "python -m jobs.benchmark") -> argparse.Namespace:
    p = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0], epilog=_commands_help(),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", nargs="?", default="report", choices=[*OWN_COMMANDS, *SUBCOMMANDS],
                   help="what to measure (default: report; see the list below)")
    p.add_argument("--config", default=None, help="YAML config (a vllm config selects real mode)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--backend", default=None, choices=["simulated", "vllm"], help="engine kind (default: simulated)")
    p.add_argument("--output", default="output/benchmark", help="report folder")
    p.add_argument("--quick", action="store_true", help="a few minutes on 2 cores")
    p.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)  # smoke-test size
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--time-scale", type=float, default=None, help="wall seconds per simulated second")
    p.add_argument("--concurrency", type=int, default=None, help="chains per engine (default: max_num_seqs)")
    p.add_argument("--order", default="longest", choices=["longest", "arrival"],
                   help="segment order for (b); (a) reports both")
    p.add_argument("--calibration", default=None, metavar="FILE",
                   help="engine capacity from python -m jobs.calibrate --write-calibration FILE")
    p.add_argument("--gpu", default="h100", choices=["h100", "h200"],
                   help="GPU class the simulated engine's cost model stands for (no --calibration)")
    p.add_argument("--gpu-hour-usd", type=float, default=0.0, help="price of one GPU-hour, for cost per M pages")
    p.add_argument("--no-e2e", action="store_true", help="skip the end-to-end ingest run")
    p.add_argument("--no-embed", action="store_true", help="skip embedding and Milvus rates")
    p.add_argument("--no-naive", action="store_true", help="skip the naive pipeline beside the end-to-end run")
    p.add_argument("--copies", type=int, default=None,
                   help="CloudWay copies the end-to-end runs ingest (default: 5, --quick 1)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None, prog: str = "python -m jobs.benchmark") -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in SUBCOMMANDS:
        import importlib

        return int(importlib.import_module(SUBCOMMANDS[argv[0]][0]).main(argv[1:]) or 0)
    args = parse_args(argv, prog)
    try:
        cfg = load_config(args.config, args.overrides)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    real = args.backend == "vllm" or (args.backend is None and cfg.converter.backend == "vllm")
    size_name = "tiny" if args.tiny else "quick" if args.quick else "full"
    size = SIZES[size_name]
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    # The simulated engine stands for Qwen2.5-VL-7B on one H100. Without a config it runs SIMULATED_MAX_NUM_SEQS
    # sequences, not ModelConfig's generic default; --config configs/qwen2.5-vl-7b.yaml runs the shipped 64.
    spec = EngineSpec.for_model(cfg.converter.model, args.gpu,
                                max_num_seqs=cfg.converter.model.max_num_seqs if args.config else SIMULATED_MAX_NUM_SEQS)
    if args.calibration:  # measured on a GPU: replaces the cost model
        spec = EngineSpec.from_calibration(args.calibration)
    concurrency = args.concurrency or spec.max_num_seqs
    rep: dict[str, Any] = {"meta": {
        "mode": "real" if real else "simulated", "size": size_name, "seed": args.seed, "concurrency": concurrency, "order": args.order,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
        "engine": "vllm" if real else f"simulated, {spec.describe()}", "targets": TARGETS}}
    rep["gpu_estimate"] = gpu_estimate(args.calibration)
    if args.command == "report":
        if real:
            from jobs.bench.real import run_real

            try:
                rep["real"] = run_real(cfg, size, out, args.seed, args.gpu_hour_usd)
            except SetupError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 2
        else:
            cfg.converter.backend = "simulated"
            ts = args.time_scale or time_scale_for(spec, size["ts"])
            rep["meta"]["time_scale"] = ts
            try:
                rep.update(experiments(cfg, size, out, args.seed, lambda s: _sim_factory(cfg, spec, s, args.seed),
                                       ts, concurrency, args.order))
            except Exception as exc:  # noqa: BLE001 - the other sections still get reported
                rep["experiments_failed"] = _failure("simulated experiments", exc)
    try:
        rep["stages"] = stages_section(cfg, size, out, args.seed, e2e=not args.no_e2e, embed=not args.no_embed,
                                       copies=args.copies, naive=not args.no_naive)
    except Exception as exc:  # noqa: BLE001
        rep["stages"] = {"failed": _failure("CPU stages", exc)}
    try:
        rep["plots"] = plots(rep, out)
    except Exception as exc:  # noqa: BLE001
        rep["plots"] = {"failed": _failure("plots", exc)}
    (out / "report.json").write_text(json.dumps(rep, indent=2, default=str))
    md = markdown(rep)
    (out / "report.md").write_text(md)
    print(md)
    return 0


def _failure(what: str, exc: BaseException) -> str:
    traceback.print_exc()
    return f"{what}: {type(exc).__name__}: {exc}"


if __name__ == "__main__":
    raise SystemExit(main())
