"""The Makefile off this project's machines: where pip gets the lock's CPU torch, and what happens without Python 3.11.

Dry runs (``make -n``) print the commands with every variable expanded, so what pip would be given is read without
installing anything; pip's configuration is switched off (``PIP_CONFIG_FILE=/dev/null``) to stand for a machine whose
pip knows no folder holding the CPU wheel.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")

INDEX = "https://download.pytorch.org/whl/cpu"


def _make(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    # -B: every target out of date, so the install recipe is printed even where the venv is made already.
    return subprocess.run(["make", "--no-print-directory", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})})


def _bare_pip() -> dict[str, str]:
    """pip as on an ordinary machine: no configuration file and no find-links folder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    return {**env, "PIP_CONFIG_FILE": os.devnull}


def _lock_install_line(out: str, lock: str = "requirements/main.lock.txt") -> str:
    (line,) = [ln for ln in out.splitlines() if "--require-hashes" in ln and f"-r {lock}" in ln]
    return line


def test_without_a_local_wheel_pip_gets_pytorchs_cpu_index(tmp_path: Path) -> None:
    res = subprocess.run(["make", "--no-print-directory", "-n", "-B", f"VENV={tmp_path / 'v'}", "install"], cwd=REPO,
                         capture_output=True, text=True, timeout=120, env=_bare_pip())
    assert res.returncode == 0, res.stderr
    assert f"--extra-index-url {INDEX} " in _lock_install_line(res.stdout)
    mirror = "https://mirror.example/pytorch/whl/cpu"
    res = subprocess.run(["make", "--no-print-directory", "-n", "-B", f"VENV={tmp_path / 'v'}",
                          f"TORCH_INDEX={mirror}", "install"], cwd=REPO, capture_output=True, text=True, timeout=120,
                         env=_bare_pip())
    assert f"--extra-index-url {mirror} " in _lock_install_line(res.stdout)
    # The engine venv and the lock refresh take it from the same place.
    res = subprocess.run(["make", "--no-print-directory", "-n", "-B", f"ENGINE_VENV={tmp_path / 'e'}", "engine-venv",
                          "lock-main"], cwd=REPO, capture_output=True, text=True, timeout=120, env=_bare_pip())
    assert f"--extra-index-url {INDEX} " in _lock_install_line(res.stdout, "requirements/engine.lock.txt")
    assert any("lock.py lock requirements/main.lock.txt" in ln and ln.endswith(f"--extra-index-url {INDEX}")
               for ln in res.stdout.splitlines())


def test_where_pip_finds_the_wheel_itself_no_index_is_added(tmp_path: Path) -> None:
    probe = subprocess.run(["python3", "-m", "pip", "install", "--dry-run", "--no-deps", "--no-index",
                            "--ignore-installed", "-q", "torch==2.13.0+cpu"], capture_output=True, timeout=120)
    if probe.returncode != 0:
        pytest.skip("pip here has no local CPU torch wheel (the fallback case is the test above)")
    res = _make("-n", "-B", f"VENV={tmp_path / 'v'}", "install")
    assert "--extra-index-url" not in _lock_install_line(res.stdout)


def test_the_lock_pins_the_cpu_build_the_makefile_asks_for() -> None:
    text = (REPO / "requirements" / "main.lock.txt").read_text()
    make = (REPO / "Makefile").read_text()
    pin = next(ln.split()[0] for ln in text.splitlines() if ln.startswith("torch=="))
    assert f"TORCH_REQ := {pin}" in make  # the probe looks for the very file the lock's hash names


@pytest.mark.parametrize("py", ["", "/bin/false"])
def test_without_python_311_make_stops_with_one_line(py: str, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    res = _make("-B", f"PY={py}", f"VENV={venv}", "install")
    assert res.returncode != 0
    lines = [ln for ln in (res.stdout + res.stderr).splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "CPython 3.11" in lines[0] and "make PY=" in lines[0], res.stdout + res.stderr
    assert not venv.exists()  # stopped before anything was made
