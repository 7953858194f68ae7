"""Run one benchmark step in a fresh Python process and bring back its JSON result, or why it failed.

Steps that start Ray or Milvus Lite must not share a process: Milvus Lite's gRPC client keeps threads that make a
later ``ray.init`` in the same process time out waiting for the GCS port file (its fork of the GCS server sees
"Other threads are currently calling into gRPC, skipping fork() handlers"), and a Ray runtime or a Lite data-dir lock
left over by one step would be measured by the next. So each such step runs as

    python -m jobs.bench.isolate SPEC.json RESULT.json

in a child that imports ``module:function``, calls it with the spec's keyword arguments and writes what it returns
as JSON. The parent never raises for a step: a crash, a non-zero exit or a timeout becomes ``{"failed": ...}`` with
the last line the child wrote to stderr and the path of its full log, and the benchmark goes on with the next step.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]


def run_step(name: str, target: str, kwargs: dict[str, Any], workdir: Path, timeout_s: float = 1800.0,
             echo: bool = True) -> dict[str, Any]:
    """``target`` (``"package.module:function"``) called with ``kwargs`` (JSON values) in a child process.

    Returns the function's result (a JSON object; any other value comes as ``{"result": value}``), with ``step_wall_s`` (the child's whole life, interpreter start
    and imports included) added; or ``{"failed": reason, "log": path}``. The child's stdout passes through when
    ``echo`` (progress lines); its stderr goes to ``workdir/logs/<name>.log``."""
    logs = workdir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    spec, result, log = logs / f"{name}.spec.json", logs / f"{name}.result.json", logs / f"{name}.log"
    spec.write_text(json.dumps({"target": target, "kwargs": kwargs}))
    result.unlink(missing_ok=True)
    env = dict(os.environ)
    # The child imports this checkout's jobs/ and chunker/ whatever the current folder is.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    t0 = time.perf_counter()
    try:
        with log.open("wb") as err:
            proc = subprocess.run([sys.executable, "-m", "jobs.bench.isolate", str(spec), str(result)],
                                  stdout=None if echo else subprocess.DEVNULL, stderr=err, env=env,
                                  timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return {"failed": f"{name}: no result after {timeout_s:.0f} s (killed)", "log": str(log)}
    wall = round(time.perf_counter() - t0, 2)
    if proc.returncode != 0 or not result.is_file():
        return {"failed": f"{name}: exit code {proc.returncode}: {_last_line(log)}", "log": str(log)}
    out = json.loads(result.read_text())
    if not isinstance(out, dict):
        out = {"result": out}
    out["step_wall_s"] = wall
    return out


def _last_line(log: Path) -> str:
    """The last line a failed child wrote to stderr that says something (usually the exception)."""
    try:
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "no log"
    return lines[-1][:500] if lines else "nothing on stderr"


def _main(spec_path: str, result_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    module, _, func = spec["target"].partition(":")
    fn = getattr(importlib.import_module(module), func)
    out = fn(**spec["kwargs"])
    tmp = Path(result_path).with_suffix(".tmp")
    tmp.write_text(json.dumps(out, default=str))
    tmp.replace(result_path)
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(*sys.argv[1:3]))
