"""Real mode of the benchmark: the same engine experiments on a real vLLM engine, plus GPU occupancy and cost.

One process can drive only one vLLM engine sensibly (an engine takes its GPUs for itself), so the experiments run
on one engine, here, through the same code as the simulated report (``time_scale`` 1); scaling over GPUs is
``jobs.ingest`` with ``--set ray.convert_actors=N``, one Ray actor per GPU. GPU occupancy is ``utilization.gpu``
from ``nvidia-smi``, sampled every half second while the experiments run.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chunker.backends.base import BackendUnavailable
from chunker.config import Config


def gpu_count() -> int:
    """Visible NVIDIA GPUs; raises BackendUnavailable with what is missing when there are none."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        raise BackendUnavailable(
            "real mode (--backend vllm) needs NVIDIA GPUs: nvidia-smi is not on PATH here. Run the simulated report "
            "instead (python -m jobs.benchmark [--quick]), or run this on a GPU node (ray job submit ... -- "
            "python -m jobs.benchmark --config configs/qwen2.5-vl-7b.yaml)"
        )
    res = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
    n = sum(1 for line in res.stdout.splitlines() if line.startswith("GPU "))
    if res.returncode != 0 or n == 0:
        raise BackendUnavailable(f"real mode needs NVIDIA GPUs: nvidia-smi -L found none ({res.stderr.strip()[:200]})")
    return n


@dataclass
class GpuSampler:
    """Samples utilisation.gpu of every GPU while active; ``mean`` is the mean over GPUs and samples (0..1)."""

    interval_s: float = 0.5
    samples: list[list[float]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                out = subprocess.run(
                    ["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"],
                    capture_output=True, text=True, timeout=10,
                ).stdout
                self.samples.append([float(x) / 100 for x in out.split() if x.strip()])
            except (OSError, subprocess.SubprocessError, ValueError):
                pass  # a missed sample only thins the average
            self._stop.wait(self.interval_s)

    def __enter__(self) -> "GpuSampler":
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=15)

    @property
    def mean(self) -> float:
        values = [v for s in self.samples for v in s]
        return round(sum(values) / len(values), 4) if values else 0.0


def cost_per_million_pages(pages_per_s_per_gpu: float, gpu_hour_usd: float) -> float | None:
    """USD per million pages on GPUs billed at ``gpu_hour_usd`` each, at the measured rate per GPU."""
    if pages_per_s_per_gpu <= 0 or gpu_hour_usd <= 0:
        return None
    return round(gpu_hour_usd / (pages_per_s_per_gpu * 3600) * 1_000_000, 2)


def timed(fn, *args, **kwargs):  # noqa: ANN001, ANN201 - thin helper around any experiment call
    """Run ``fn`` with the GPU sampler on; returns (result, mean GPU utilisation, seconds)."""
    t0 = time.perf_counter()
    with GpuSampler() as sampler:
        result = fn(*args, **kwargs)
    return result, sampler.mean, round(time.perf_counter() - t0, 2)


def run_real(cfg: Config, size: dict[str, Any], out: Path, seed: int, gpu_hour_usd: float) -> dict[str, Any]:
    """(a)-(d) on one real engine; pages/s per GPU, output tokens/s, GPU occupancy, cost per million pages."""
    from chunker.backends.registry import backend_for
    from jobs.bench.experiments import experiments

    gpus = gpu_count()  # fails first, and clearly, on a machine without GPUs
    per_engine = cfg.converter.model.tensor_parallel_size
    # A real engine must see real pages (full renders), and one process drives one engine: scaling is over Ray actors.
    real_size = dict(size, render="full", actors=[1])
    sections, util, seconds = timed(experiments, cfg, real_size, out, seed, lambda _ts: (lambda _i: backend_for(cfg)),
                                    1.0, cfg.ray.convert_concurrency)
    eff = sections["efficiency"]
    per_gpu = eff["pages_per_s"] / per_engine
    return {
        "gpus_visible": gpus, "gpus_per_engine": per_engine, "seconds": seconds, "gpu_utilisation": util,
        "pages_per_s_per_gpu": round(per_gpu, 3), "output_tokens_per_s": eff["output_tokens_per_s"],
        "gpu_hour_usd": gpu_hour_usd, "usd_per_million_pages": cost_per_million_pages(per_gpu, gpu_hour_usd),
        "note": "scaling over GPUs: python -m jobs.ingest --set ray.convert_actors=N on the same corpus",
        **sections,
    }
