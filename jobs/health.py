"""Print the chunk-health report of a finished run (no Ray, no model, nothing re-run).

    python -m jobs.health output/run
    python -m jobs.health s3://bucket/runs/2026-12 --json

Reads the run folder's chunks/ and elements/ tables, prints the report (fragments, lead-in-only chunks, tables under
"Column N" or without a column path, the size histogram, the worst documents by each) and writes
chunk_health.json/.txt/.png into the run folder (``--no-write`` leaves the folder as it is). Exit codes: 0 the
report was made, 2 the folder holds no chunks or cannot be read.
"""

from __future__ import annotations

import argparse
import json
import sys

from chunker.errors import ChunkerError


def main(argv: list[str] | None = None, prog: str = "python -m jobs.health") -> int:
    p = argparse.ArgumentParser(prog=prog, description="The chunk-health report of a finished run.")
    p.add_argument("run", help="the run folder (a local path or a file://, s3://, gs:// URI)")
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of text")
    p.add_argument("--no-write", action="store_true", help="do not write chunk_health.* into the run folder")
    args = p.parse_args(argv)

    from chunker.run.layout import CHUNKS, RunStore
    from chunker.run.report import health_for_run, write_health
    from chunker.plan.health import format_health

    try:
        store = RunStore(args.run)
        if not store.parts(CHUNKS):
            print(f"error: {args.run}: no chunks/ parts in this folder (is it a run folder of jobs.ingest?)",
                  file=sys.stderr)
            return 2
        report = health_for_run(store)
        if not args.no_write:
            write_health(store, report)
    except (ChunkerError, OSError) as exc:
        print(f"error: {args.run}: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(report, indent=2) if args.json else format_health(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
