"""Chunk planning over element IDs: the deterministic and LLM planners, their repairs and report.

Every planner has the same small async interface (:class:`Planner`) and is chosen by ``planner.kind`` in one
registry (:func:`make_planner`), so the plan stage, ``jobs.rechunk`` and the tests call planners the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from chunker.errors import SetupError

if TYPE_CHECKING:
    from chunker.config import Config
    from chunker.types import Chunk, Element


class Planner(Protocol):
    name: str

    async def chunks(self, elements: list[Element], cfg_hash: str, source: str = "",
                     source_uri: str = "") -> list[Chunk]:
        """A segment's chunks: element IDs grouped, coverage verified, text rebuilt from the verbatim elements."""
        ...

    async def close(self) -> None:
        """Release what the planner holds (a model backend)."""
        ...


def _deterministic(cfg: Config, backend: Any) -> Planner:
    from chunker.plan.deterministic import DeterministicPlanner

    return DeterministicPlanner(cfg.planner)


def _llm(cfg: Config, backend: Any) -> Planner:
    from chunker.plan.llm import LlmPlanner

    if backend is None:
        from chunker.backends.registry import make_backend

        name = cfg.planner.llm_backend or cfg.converter.backend
        backend = make_backend(cfg.converter.model_copy(update={"backend": name}),
                               batch_pages=cfg.intake.batch_pages, max_side_px=cfg.render.max_side_px)
    return LlmPlanner(cfg.planner, backend, temperature=cfg.converter.model.temperature)


_PLANNERS = {"deterministic": _deterministic, "llm": _llm}


def make_planner(cfg: Config, backend: Any = None) -> Planner:
    """The planner ``cfg.planner.kind`` names. ``backend`` injects a model backend for the LLM planner (tests, a
    shared engine); otherwise ``planner.llm_backend`` (or the converter's backend) is built. Build one per worker."""
    factory = _PLANNERS.get(cfg.planner.kind)
    if factory is None:
        raise SetupError(f"unknown planner.kind {cfg.planner.kind!r}; known: {', '.join(sorted(_PLANNERS))}")
    return factory(cfg, backend)
