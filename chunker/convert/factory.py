"""The converter a config names: ``pdf-text`` itself, or the vision converter over a model backend."""

from __future__ import annotations

from typing import Any

from chunker.config import Config, config_hash
from chunker.convert.base import Converter


def make_converter(cfg: Config, cfg_hash: str | None = None, backend: Any = None) -> Converter:
    """The converter the config names. ``backend`` injects a model backend (tests, benchmarks).

    The vision converter always gets a ``pdf-text`` converter as its per-page fallback (the text layer, flagged).
    """
    from chunker.convert.pdf_text import PdfTextConverter

    h = cfg_hash if cfg_hash is not None else config_hash(cfg)
    text = PdfTextConverter(cfg.converter, h, password=cfg.intake.password)
    if cfg.converter.backend == "pdf-text":
        return text
    from chunker.convert.vlm import VlmConverter

    if backend is None:
        from chunker.backends.registry import backend_for

        backend = backend_for(cfg)
    return VlmConverter(cfg.converter, backend, fallback=text, config_hash=h)
