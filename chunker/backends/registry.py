"""The one place model backends are chosen by name. Imports stay lazy: picking ``openai`` never loads torch.

This module imports nothing of :mod:`chunker.config`, not even for type hints: the config validates backend names
against :func:`known_backends`, so an import of the config in the other direction would close a cycle. The
functions below take any object of the config's shape (the protocols say which attributes they read).
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol

from chunker.backends.base import ModelBackend

# name -> "module:factory"; the factory takes (ModelConfig, **sizing) and returns a ModelBackend.
_FACTORIES: dict[str, str] = {
    "vllm": "chunker.backends.vllm_backend:VllmBackend",
    "openai": "chunker.backends.openai_backend:OpenAIBackend",
    "transformers": "chunker.backends.transformers_backend:TransformersBackend",
    "scripted": "chunker.backends.scripted:ScriptedBackend",
    "simulated": "chunker.backends.simulated:SimulatedBackend",
}

# Conversion routes that need no model: the converter handles them itself, so asking here is a wiring mistake.
_NOT_MODEL_BACKENDS = {"pdf-text"}


class _ConverterSettings(Protocol):
    """What :func:`make_backend` reads of a ``chunker.config.ConverterConfig``."""

    backend: str
    model: Any  # chunker.config.ModelConfig, handed to the backend as is


class _SizedSection(Protocol):
    batch_pages: int


class _RenderSection(Protocol):
    max_side_px: int


class _WholeConfig(Protocol):
    """What :func:`backend_for` reads of a ``chunker.config.Config``."""

    converter: _ConverterSettings
    intake: _SizedSection
    render: _RenderSection


def known_backends() -> list[str]:
    return sorted(_FACTORIES)


def make_backend(
    cfg: _ConverterSettings,
    *,
    batch_pages: int = 4,
    max_side_px: int = 1568,
    **extra: Any,
) -> ModelBackend:
    """Build the model backend named by ``cfg.backend``.

    ``batch_pages`` (intake.batch_pages) bounds the images in one prompt and ``max_side_px`` (render.max_side_px)
    the pixels per image; the vllm backend sizes ``limit_mm_per_prompt`` and ``max_pixels`` from them.
    ``extra`` goes to the backend as is (e.g. ``script=`` for scripted, ``engine=`` for a fake vllm engine).
    """
    name = cfg.backend
    if name not in _FACTORIES:
        hint = " (it needs no model backend: the converter handles it)" if name in _NOT_MODEL_BACKENDS else ""
        raise ValueError(f"unknown model backend {name!r}{hint}; known: {', '.join(known_backends())}")
    module_name, attr = _FACTORIES[name].split(":")
    factory = getattr(importlib.import_module(module_name), attr)
    if name == "scripted":
        return factory(model=cfg.model.name, **extra)
    if name == "openai":
        return factory(cfg.model, **extra)
    if name == "simulated":
        extra.setdefault("time_scale", cfg.model.simulated_time_scale)
    return factory(cfg.model, max_images=batch_pages, max_side_px=max_side_px, **extra)


def backend_for(config: _WholeConfig, **extra: Any) -> ModelBackend:
    """``make_backend`` sized from a whole :class:`~chunker.config.Config` (what jobs call)."""
    return make_backend(
        config.converter,
        batch_pages=config.intake.batch_pages,
        max_side_px=config.render.max_side_px,
        **extra,
    )
