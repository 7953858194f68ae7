"""A `milvus-lite server` on a loopback port for tests: a real gRPC Milvus endpoint (the server path of
``milvus.uri``) that several processes can share, and that a test may stop, freeze (SIGSTOP) or kill."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def lite_cli() -> str | None:
    """The ``milvus-lite`` command of this venv (or on PATH), None when milvus-lite is not installed."""
    cli = Path(sys.executable).with_name("milvus-lite")
    return str(cli) if cli.exists() else shutil.which("milvus-lite")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


@contextmanager
def lite_server(data_dir: Path, start_timeout_s: float = 60.0) -> Iterator[tuple[str, subprocess.Popen]]:
    """Start a server on ``data_dir``; yields its ``http://`` URI and process. Skips the test without the CLI, fails it
    when the server does not listen in time; stops it (thawing a frozen one first) whatever the test did."""
    cli = lite_cli()
    if cli is None:
        pytest.skip("milvus-lite CLI not installed")
    port = free_port()
    proc = subprocess.Popen([cli, "server", "--data-dir", str(data_dir), "--host", "127.0.0.1", "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + start_timeout_s
        while not listening(port):
            if time.monotonic() > deadline or proc.poll() is not None:
                pytest.fail(f"milvus-lite server did not start on port {port}")
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}", proc
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)  # a test that froze it and failed must not leave it stopped
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def server_fixture(folder: str):  # noqa: ANN201 - a pytest fixture
    """A module-scoped fixture: one server (data in a fresh ``folder`` under the session's temp root) that the module's
    tests share; it yields the server's URI."""

    @pytest.fixture(scope="module")
    def fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
        with lite_server(tmp_path_factory.mktemp(folder)) as (uri, _proc):
            yield uri

    return fixture
