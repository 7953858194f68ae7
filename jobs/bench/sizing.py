"""The cluster size the throughput ceilings are judged against, shared by the dry run and its report (a module of
its own so that neither has to import the other)."""

from __future__ import annotations

GPU_PAGES_PER_S = 5.0  # one GPU's pages/s in the sizing (BENCHMARKS.md's per-GPU estimate: 2.5-10)
TARGET_PAGES_PER_S = 2000.0  # 400 GPUs at 5 pages/s
