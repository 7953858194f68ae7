"""The first hour on a GPU: calibrate the simulated engine on a single-GPU host with torch + CUDA and nothing else.

    python -m jobs.gpu_check [--out DIR] [--wheels DIR] [--budget-s 480]
    python -m jobs.gpu_check --fetch-wheels DIR [--python-version 3.11]    # beforehand, on a machine with network
    python -m jobs.gpu_check --smoke --out DIR                              # the same run, tiny shape on CPU
    python -m jobs.gpu_check --fp8-model /models/qwen2.5-vl-7b --out DIR    # first: does online FP8 work here?

What it needs on the GPU host: python3 with torch (CUDA build) and a visible GPU; this repository's ``jobs/`` folder
(``__init__.py``, ``calibrate.py``, this file); and, unless the host's transformers is 5.16-5.20, the wheel folder
``--fetch-wheels`` prepared (transformers and the packages it needs that torch does not bring: ~30-40 MB). No
network, no vLLM, Ray or pydantic. Wheels are unpacked into ``OUT/pylib`` (no pip needed); packages the host
already has are left alone, except transformers and its tokenizer/hub/safetensors libraries, which must match.

What it runs first: the FP8 smoke test (:func:`fp8_smoke`). configs/qwen2.5-vl-7b-fp8.yaml quantises the bf16
checkpoint online (``quantization: fp8``), vision tower included, and online FP8 of Qwen2.5-VL's vision tower has
known start-up and output failures upstream. With vLLM installed and ``--fp8-model`` pointing at the weights, one
page goes through an engine started with that config's FP8 settings; it must start and answer readable text. It
says how to fall back when it does not (``FP8_FALLBACK``), and it is skipped, with the same advice, where vLLM or the
weights are absent.

Then ``python -m jobs.calibrate`` (random weights of the published shapes) once per profile, each in its
own process (an out-of-memory profile does not stop the others; GPU memory is freed in between), most important
first, within ``--budget-s`` seconds in all (about 8 minutes on an H100/H200):

1. 7B at the shipped settings (configs/qwen2.5-vl-7b.yaml: 4 pages of 1,568 px per request, 64 sequences);
2. 7B, throughput profile: 1,288 px pages, 2 and then 1 per request, 128 sequences (80-141 GB cards);
3. 3B at its shipped settings (4 x 1,568 px, 16 sequences) and its throughput profile (2 x 1,288 px, 128).

What it writes: ``OUT/<profile>/calibration.json`` per profile, ``OUT/engine-<profile>.json`` (the file
``EngineSpec.from_calibration`` / ``SimulatedBackend.from_calibration`` load) and ``OUT/summary.json``; bring
``OUT`` back. Exit status 0 when the shipped 7B profile was measured, 1 otherwise, 2 when no GPU is usable.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

# Which transformers jobs.calibrate is written against (Qwen2_5_VLConfig rope_parameters, StaticCache.layers), the
# window vLLM 0.32/0.33 accept too.
TRANSFORMERS_SPEC = "transformers>=5.16.1,<5.21"
TRANSFORMERS_RANGE = ((5, 16), (5, 21))
# Unpacked even when the host has some version: transformers needs its own matching releases of these.
ALWAYS_UNPACK = {"transformers", "tokenizers", "huggingface-hub", "safetensors"}


@dataclass
class Profile:
    name: str
    args: list[str]
    required: bool = False  # the run counts as failed without it


GPU_PROFILES = [
    Profile("7b-shipped-4x1568", ["--shape", "7b", "--pages", "4", "--side", "1568", "--decode-batch", "64"], True),
    Profile("7b-throughput-2x1288", ["--shape", "7b", "--pages", "2", "--side", "1288", "--decode-batch", "128"]),
    Profile("7b-throughput-1x1288", ["--shape", "7b", "--pages", "1", "--side", "1288", "--decode-batch", "128"]),
    Profile("3b-shipped-4x1568", ["--shape", "3b", "--pages", "4", "--side", "1568", "--decode-batch", "16"]),
    Profile("3b-throughput-2x1288", ["--shape", "3b", "--pages", "2", "--side", "1288", "--decode-batch", "128"]),
]
# The same sequence on CPU with the tiny shape: proves the orchestration anywhere in seconds.
_TINY = ["--shape", "tiny", "--device", "cpu", "--text-tokens", "40", "--decode", "4", "--repeats", "1"]
SMOKE_PROFILES = [
    Profile("tiny-shipped-4x112", [*_TINY, "--pages", "4", "--side", "112", "--decode-batch", "4"], True),
    Profile("tiny-throughput-2x84", [*_TINY, "--pages", "2", "--side", "84", "--decode-batch", "8"]),
]


@dataclass
class Outcome:
    profile: str
    status: str  # ok | failed | timeout | skipped
    seconds: float = 0.0
    calibration: str = ""
    detail: str = ""
    summary: dict = field(default_factory=dict)


def _dist_name(wheel: Path) -> str:
    return re.sub(r"[-_.]+", "-", wheel.name.split("-")[0]).lower()


def _installed(dist: str) -> bool:
    try:
        importlib.metadata.version(dist)
        return True
    except importlib.metadata.PackageNotFoundError:
        return False


def unpack_wheels(wheels: Path, target: Path, installed=_installed) -> list[str]:
    """Unzip the wheels the host lacks into ``target`` (a wheel is a zip of an importable tree); return their names.

    No pip and no build: only ``*.whl`` files, which ``--fetch-wheels`` fetched as binaries for this platform.
    """
    target.mkdir(parents=True, exist_ok=True)
    unpacked = []
    for wheel in sorted(wheels.glob("*.whl")):
        dist = _dist_name(wheel)
        if dist not in ALWAYS_UNPACK and installed(dist):
            continue
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(target)
        unpacked.append(dist)
    return unpacked


def transformers_fits(env: dict[str, str]) -> str | None:
    """Why the transformers ``python`` sees under ``env`` cannot run jobs.calibrate, or None when it can."""
    probe = ("import transformers as t; from transformers import Qwen2_5_VLConfig, StaticCache; "
             "print(t.__version__)")
    proc = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return f"transformers is missing or too old ({last})"
    version = tuple(int(x) for x in re.findall(r"\d+", proc.stdout.strip())[:2])
    low, high = TRANSFORMERS_RANGE
    if not low <= version < high:
        return f"transformers {proc.stdout.strip()} is outside {TRANSFORMERS_SPEC}"
    return None


def gpu_problem(env: dict[str, str]) -> str | None:
    probe = "import torch; assert torch.cuda.is_available(), 'torch.cuda.is_available() is False'; " \
            "print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))"
    proc = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        return (proc.stderr.strip().splitlines() or ["torch failed"])[-1]
    print(f"gpu: {proc.stdout.strip()}", flush=True)
    return None


def run_profiles(profiles: list[Profile], out: Path, env: dict[str, str], budget_s: float) -> list[Outcome]:
    deadline = time.monotonic() + budget_s
    outcomes = []
    for prof in profiles:
        left = deadline - time.monotonic()
        if left < 20:
            outcomes.append(Outcome(prof.name, "skipped", detail=f"time budget of {budget_s:.0f} s spent"))
            continue
        folder = out / prof.name
        engine_file = out / f"engine-{prof.name}.json"
        cmd = [sys.executable, "-m", "jobs.calibrate", *prof.args, "--output", str(folder),
               "--write-calibration", str(engine_file)]
        print(f"[{prof.name}] {' '.join(cmd[1:])}", flush=True)
        t0 = time.monotonic()
        try:
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=left)
        except subprocess.TimeoutExpired:
            outcomes.append(Outcome(prof.name, "timeout", time.monotonic() - t0, detail=f"over {left:.0f} s"))
            continue
        seconds = time.monotonic() - t0
        (out / f"{prof.name}.log").write_text(proc.stdout + proc.stderr)
        if proc.returncode != 0 or not engine_file.is_file():
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            outcomes.append(Outcome(prof.name, "failed", seconds, detail=f"rc {proc.returncode}: {last}"))
            continue
        report = json.loads(engine_file.read_text())
        keep = ("device", "prompt_tokens", "prefill_ms_per_page", "prefill_tokens_per_s",
                "decode_tokens_per_s_batch1", "decode_tokens_per_s_aggregate", "peak_gpu_mem_gib",
                "est_pages_per_s_per_gpu")
        outcomes.append(Outcome(prof.name, "ok", seconds, str(engine_file), summary={k: report.get(k) for k in keep}))
        print(f"[{prof.name}] {seconds:.0f} s: ~{report.get('est_pages_per_s_per_gpu')} pages/s per GPU "
              f"(transformers eager floor)", flush=True)
    return outcomes


FP8_FALLBACK = (
    "if online FP8 does not start or answers garbage on this GPU, do not use configs/qwen2.5-vl-7b-fp8.yaml as it is: "
    "either point converter.model.path at an FP8 checkpoint that leaves the vision tower unquantized (e.g. an "
    "llm-compressor FP8_DYNAMIC export whose recipe ignores 're:visual.*' and 'lm_head') and set "
    "converter.model.quantization=null (vLLM then reads the checkpoint's own quantization config), keeping "
    "kv_cache_dtype=fp8; or run bf16 (configs/qwen2.5-vl-7b.yaml or configs/qwen2.5-vl-7b-throughput.yaml)"
)
# The engine settings of configs/qwen2.5-vl-7b-fp8.yaml that the smoke test exercises (one page, a small context).
FP8_ENGINE = {"quantization": "fp8", "kv_cache_dtype": "fp8", "dtype": "bfloat16", "max_model_len": 8192,
              "gpu_memory_utilization": 0.85, "max_num_seqs": 4, "limit_mm_per_prompt": {"image": 1}}
FP8_PAGE_TEXT = "Invoice 4711: total 1,234.56 EUR"


def fp8_child(model: str) -> int:
    """In its own process (the engine's memory goes with it): start vLLM with the FP8 settings, read one page."""
    from PIL import Image, ImageDraw
    from vllm import LLM, SamplingParams

    page = Image.new("RGB", (896, 448), "white")
    ImageDraw.Draw(page).text((40, 200), FP8_PAGE_TEXT, fill="black")
    llm = LLM(model=model, **FP8_ENGINE)
    prompt = ("<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Transcribe the text on this page."
              "<|im_end|>\n<|im_start|>assistant\n")
    out = llm.generate({"prompt": prompt, "multi_modal_data": {"image": page}},
                       SamplingParams(temperature=0.0, max_tokens=64))
    text = out[0].outputs[0].text
    print(json.dumps({"text": text}), flush=True)
    return 0 if readable(text) else 1


def readable(text: str) -> bool:
    """Whether an answer looks like a reading of the smoke page: the invoice number, no run of one repeated token."""
    words = text.split()
    return "4711" in text and (len(words) < 4 or len(set(words)) > len(words) // 3)


def fp8_smoke(model: str | None, out: Path, env: dict[str, str], timeout_s: float = 600,
              run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> Outcome:
    """The FP8 config's engine on this GPU, one page: ``ok``, ``failed`` (with :data:`FP8_FALLBACK`), or ``skipped``
    where vLLM or the weights are absent (the advice printed all the same)."""
    if not model:
        return Outcome("fp8-smoke", "skipped", detail=f"no --fp8-model given; {FP8_FALLBACK}")
    if run([sys.executable, "-c", "import vllm"], env=env, capture_output=True, text=True).returncode != 0:
        return Outcome("fp8-smoke", "skipped", detail=f"vLLM is not installed here; {FP8_FALLBACK}")
    cmd = [sys.executable, "-m", "jobs.gpu_check", "--fp8-child", model]
    print(f"[fp8-smoke] {' '.join(cmd[1:])}", flush=True)
    t0 = time.monotonic()
    try:
        proc = run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return Outcome("fp8-smoke", "timeout", time.monotonic() - t0, detail=f"over {timeout_s:.0f} s; {FP8_FALLBACK}")
    (out / "fp8-smoke.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or proc.stdout.strip().splitlines() or ["no output"])[-1]
        return Outcome("fp8-smoke", "failed", time.monotonic() - t0, detail=f"{last[:300]}; {FP8_FALLBACK}")
    return Outcome("fp8-smoke", "ok", time.monotonic() - t0, detail="online FP8 started and read the page")


def fetch_wheels(dest: Path, python_version: str | None) -> int:
    """On a machine with network: transformers and what it needs (not torch) as binary wheels for a Linux GPU host."""
    cmd = [sys.executable, "-m", "pip", "download", TRANSFORMERS_SPEC, "--only-binary=:all:", "--dest", str(dest),
           "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_28_x86_64"]
    if python_version:
        cmd += ["--python-version", python_version]
    print(" ".join(cmd), flush=True)
    rc = subprocess.call(cmd)
    size = sum(p.stat().st_size for p in dest.glob("*.whl")) / 2**20 if dest.is_dir() else 0
    print(f"{dest}: {size:.1f} MiB of wheels", flush=True)
    return rc


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m jobs.gpu_check", description=__doc__.split("\n")[0])
    p.add_argument("--out", default="output/gpu-check", help="where calibration files and logs go")
    p.add_argument("--wheels", default=None, help="folder of wheels from --fetch-wheels (when transformers is absent)")
    p.add_argument("--budget-s", type=float, default=480.0, help="wall-clock budget for all profiles")
    p.add_argument("--smoke", action="store_true", help="tiny shape on CPU: check the whole procedure anywhere")
    p.add_argument("--fetch-wheels", metavar="DIR", default=None, help="download the wheel folder and stop")
    p.add_argument("--python-version", default=None, help="with --fetch-wheels: the GPU host's python, e.g. 3.11")
    p.add_argument("--fp8-model", default=None, help="weights for the FP8 smoke test run first (needs vLLM)")
    p.add_argument("--fp8-child", default=None, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.fp8_child:
        return fp8_child(args.fp8_child)
    if args.fetch_wheels:
        return fetch_wheels(Path(args.fetch_wheels), args.python_version)
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    repo = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(repo), os.environ.get("PYTHONPATH")])),
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    if args.wheels and transformers_fits(env):
        lib = out / "pylib"
        unpacked = unpack_wheels(Path(args.wheels), lib)
        print(f"unpacked {len(unpacked)} wheels into {lib}: {', '.join(unpacked)}", flush=True)
        env["PYTHONPATH"] = os.pathsep.join([str(lib), env["PYTHONPATH"]])
    problem = transformers_fits(env)
    if problem:
        print(f"error: {problem}; bring the wheels of `python -m jobs.gpu_check --fetch-wheels DIR` and pass "
              f"--wheels DIR", file=sys.stderr)
        return 2
    if not args.smoke:
        problem = gpu_problem(env)
        if problem:
            print(f"error: no usable CUDA GPU: {problem} (try --smoke for the CPU dry run)", file=sys.stderr)
            return 2
    profiles = SMOKE_PROFILES if args.smoke else GPU_PROFILES
    t0 = time.monotonic()
    fp8 = fp8_smoke(args.fp8_model, out, env)  # first: it decides which config the cluster run takes
    print(f"{fp8.profile}: {fp8.status} {fp8.detail}", flush=True)
    outcomes = run_profiles(profiles, out, env, max(0.0, args.budget_s - (time.monotonic() - t0)))
    summary = {"host": os.uname().nodename, "smoke": args.smoke, "seconds": round(time.monotonic() - t0, 1),
               "fp8_smoke": asdict(fp8), "profiles": [asdict(o) for o in outcomes]}
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    for o in [fp8, *outcomes]:
        print(f"{o.profile}: {o.status} ({o.seconds:.0f} s) {o.detail}", flush=True)
    print(f"wrote {out / 'summary.json'}", flush=True)
    required = {p.name for p in profiles if p.required}  # a failed FP8 smoke says what to use instead, and passes
    return 0 if all(o.status == "ok" for o in outcomes if o.profile in required) else 1


if __name__ == "__main__":
    raise SystemExit(main())
