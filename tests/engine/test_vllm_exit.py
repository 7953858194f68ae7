"""The engine is shut down at process end with no traceback (vLLM's AsyncLLM.__del__ used to raise a TypeError).

The check runs in a fresh interpreter (:mod:`engine_exit_check`) started by the ``exit_check`` fixture before the
session's own engine, so the two engine start-ups overlap; this file runs last and collects the result.
"""

from __future__ import annotations

import json


def test_a_process_that_never_closes_the_backend_exits_cleanly(exit_check):
    rc, stdout, stderr = exit_check.result(timeout=600)
    both = stdout + stderr  # vLLM logs to stdout, Python's exit-time complaints go to stderr
    assert rc == 0, both[-4000:]
    [line] = [ln for ln in stdout.splitlines() if ln.startswith("{")]
    report = json.loads(line)
    assert report["input_tokens"] > 0 and report["output_tokens"] > 0 and report["kept"] == 1
    # (vLLM may still force-kill an engine core that is slow to exit on a starved box: that is a log line, not
    # an error. The TypeError of AsyncLLM.__del__ at teardown is what must not come back.)
    for sign in ("Traceback", "Exception ignored", "TypeError"):
        assert sign not in both, f"{sign!r} at exit:\n{both[-4000:]}"
    assert "[shutdown] MPClient: complete" in both, "the exit hook did not shut the engine down"
