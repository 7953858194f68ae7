"""Ray's constructor-argument E-line kept off a job's stderr, and nothing else lost: lines written below Python (as
the C++ core worker writes them), Python's own, and a traceback printed as the process dies all come through in
order."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import os, sys
from jobs.stderr_filter import RAY_CONSTRUCTOR_ARGS, drop_stderr_lines
os.write(2, b"before the filter\n")
drop_stderr_lines(RAY_CONSTRUCTOR_ARGS)
drop_stderr_lines(b"first")  # a second call adds nothing
os.write(2, b"[2026-12-04 15:57:05,162 E 4868 4868] core_worker.cc:2465: Actor with class name: "
            b"'MapWorker(MapBatches(ConvertStage))' and ID: '1df4' " + RAY_CONSTRUCTOR_ARGS
            + b". If the arguments in the object store go out of scope or are lost, the actor restart will fail.\n")
os.write(2, b"first kept line\n[2026-12-04 15:57:06,000 E 1 1] core_worker.cc:1: a real error\n")
print("python's own stderr", file=sys.stderr)
os.write(2, b"no newline at the end, writ")
os.write(2, b"ten in two parts\n")
print("stdout is left alone")
raise SystemExit("error: the job stopped")  # printed by Python after the main module, as a real failure is
"""


def test_only_the_constructor_argument_line_is_dropped() -> None:
    res = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert res.returncode == 1
    assert res.stdout == "stdout is left alone\n"
    assert res.stderr.splitlines() == [
        "before the filter",
        "first kept line",
        "[2026-12-04 15:57:06,000 E 1 1] core_worker.cc:1: a real error",
        "python's own stderr",
        "no newline at the end, written in two parts",
        "error: the job stopped",
    ]
