"""The locked GPU environment (requirements/gpu.lock.txt, `make gpu-venv`, the image) as far as a CPU can check it:
the lock parses, pins the gpu extra's vLLM and the CUDA torch vLLM pins, satisfies the project's own requirements,
holds the versions the main lock tested, and is what the Makefile and the image install."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "requirements"))
from lock import canonical, read_lock  # noqa: E402 - requirements/lock.py is a script, not a package

GPU_LOCK = REPO / "requirements" / "gpu.lock.txt"
# What the gpu lock may pin otherwise than the main lock (Makefile, lock-gpu: --free): vLLM's CUDA torch, and numpy,
# which vLLM's stack caps below the main lock's.
FREED = {"torch", "numpy"}


def _pins(path: Path) -> dict[str, str]:
    return read_lock(path)[0]


def test_every_pin_is_by_hash() -> None:
    text = GPU_LOCK.read_text()
    entries = re.findall(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+) \\\n    --hash=sha256:([0-9a-f]{64})$", text, re.M)
    assert len(entries) == len(_pins(GPU_LOCK)) > 100


def test_it_pins_the_gpu_extras_vllm_and_the_cuda_torch_vllm_pins() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    [gpu] = project["optional-dependencies"]["gpu"]
    pins = _pins(GPU_LOCK)
    assert Requirement(gpu).specifier.contains(pins["vllm"])
    assert pins["torch"] == "2.14.0"  # vLLM 0.33.0's own pin: a CUDA 13 build, never the CPU one (+cpu)
    assert any(n.startswith("nvidia-") for n in pins), "the CUDA user-space libraries come as wheels"


def test_it_satisfies_the_projects_own_requirements() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    pins = _pins(GPU_LOCK)
    for raw in project["dependencies"] + project["optional-dependencies"]["gpu"]:
        req = Requirement(raw)
        name = canonical(req.name)
        assert name in pins, f"{name} missing from the GPU lock"
        assert req.specifier.contains(pins[name], prereleases=True), f"{raw}: locked {pins[name]}"


def test_it_holds_the_versions_the_main_lock_tested() -> None:
    main, gpu = _pins(REPO / "requirements" / "main.lock.txt"), _pins(GPU_LOCK)
    moved = {n for n in set(main) & set(gpu) if main[n] != gpu[n]}
    assert moved <= FREED, {n: (main[n], gpu[n]) for n in moved - FREED}
    make = (REPO / "Makefile").read_text()
    assert all(f"--free {n}" in make for n in FREED)


def test_make_and_the_image_install_exactly_the_lock(tmp_path: Path) -> None:
    res = subprocess.run(["make", "--no-print-directory", "-n", "-B", f"GPU_VENV={tmp_path / 'g'}", "gpu-venv"],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert any("pip install" in ln and "--require-hashes -r requirements/gpu.lock.txt" in ln for ln in lines), lines
    assert any("lock.py sync" in ln and "requirements/gpu.lock.txt" in ln for ln in lines)
    # `make install` syncs .venv only: nothing it runs touches the GPU venv.
    res = subprocess.run(["make", "--no-print-directory", "-n", "-B", f"GPU_VENV={tmp_path / 'g'}", "install"],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert str(tmp_path / "g") not in res.stdout and "gpu.lock" not in res.stdout
    dockerfile = (REPO / "cluster" / "Dockerfile").read_text()
    assert "COPY requirements/gpu.lock.txt" in dockerfile and "--require-hashes -r requirements/gpu.lock.txt" in dockerfile


def _hf_download() -> object:
    """The installed ``hf download`` command (huggingface_hub's CLI, click), to parse command lines with."""
    import click
    from huggingface_hub.cli.hf import app

    cmd = app.get_command(click.Context(app), "download")
    return getattr(cmd, "materialize", lambda: cmd)()  # the CLI loads its commands lazily


def test_every_weights_download_is_an_hf_download_the_installed_cli_accepts() -> None:
    from chunker.backends.base import BackendUnavailable
    from chunker.backends.weights import resolve_model_dir
    from chunker.config import ModelConfig

    try:
        resolve_model_dir(ModelConfig(name="Org/Never-Cached-xyz"))
    except BackendUnavailable as exc:
        message = str(exc)
    texts = {"weights.py's error": message, "weights manifest": (REPO / "cluster/kuberay/weights-pvc.yaml").read_text()}
    texts |= {p.name: p.read_text() for p in sorted((REPO / "configs").glob("qwen2.5-vl-*.yaml"))}
    download = _hf_download()
    for where, text in texts.items():
        assert "huggingface-cli" not in text, where  # gone from the locked huggingface_hub
        commands = re.findall(r"hf download (\S+) --local-dir ([^\s),]+)", text)
        assert commands, f"{where} names no hf download command"
        for repo, folder in commands:
            ctx = download.make_context("hf download", [repo, "--local-dir", folder])  # raises on a bad option
            assert ctx.params["repo_id"] == repo and ctx.params["local_dir"] == folder
