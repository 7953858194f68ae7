"""``vision-chunker COMMAND [options]``: one console script for the jobs a user runs (``pip install`` puts it on PATH).

Each command is the job's own ``main`` (``python -m jobs.ingest`` and the others keep working, with the same options
and exit codes); this module only picks it, lazily, so ``vision-chunker --help`` imports no job.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# command -> (module whose main(argv, prog) runs it, what it does)
COMMANDS: dict[str, tuple[str, str]] = {
    "ingest": ("jobs.ingest", "PDFs (folder, glob, manifest, s3://...) -> chunks in Milvus, through Ray Data"),
    "query": ("jobs.query", "ask the indexed corpus from the command line"),
    "serve": ("serving.app", "the HTTP query endpoint (Ray Serve) until interrupted"),
    "evaluate": ("jobs.evaluate", "score retrieval on a corpus and questions, against fixed-size baselines"),
    "rechunk": ("jobs.rechunk", "re-plan the chunks of a finished run without converting again"),
    "health": ("jobs.health", "the chunk-health report of a finished run (fragments, lead-ins, table headers)"),
    "compare": ("jobs.compare", "questions won and lost between two evaluations, pooled over question sets"),
    "benchmark": ("jobs.benchmark", "throughput and CPU figures (its own subcommands: see its --help)"),
}
PROG = "vision-chunker"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG, description="Turn PDF corpora into retrieval-ready chunks in Milvus and answer queries over them.",
        epilog="commands:\n" + "\n".join(f"  {name:10s} {what}" for name, (_, what) in COMMANDS.items())
        + f"\n\n`{PROG} COMMAND --help` for a command's options; exit codes: README.md, \"Exit codes\".",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=list(COMMANDS), metavar="COMMAND", help="what to run (list below)")
    p.add_argument("args", nargs=argparse.REMAINDER, help="the command's own options")
    return p


def main(argv: list[str] | None = None) -> int:
    ns = parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    module, _ = COMMANDS[ns.command]
    code = importlib.import_module(module).main(ns.args, prog=f"{PROG} {ns.command}")
    return int(code or 0)


if __name__ == "__main__":
    raise SystemExit(main())
