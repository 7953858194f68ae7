"""A backend that answers from a script: for tests of everything above the model (chains, retries, parsing).

Examples::

    # a fixed list of answers, one per call (a str becomes GenerationResult(text=...)); running past its end fails
    backend = ScriptedBackend(["# Page 1\\n\\nText.", GenerationResult("cut", finish_reason="length")])

    # a function of (request, call_index), sync or async; raising inside it simulates a backend error
    backend = ScriptedBackend(lambda req, i: f"# Batch {i}\\n\\n{req.user[:20]}")

    # simulated latency (seconds, or a function of request and call index returning seconds)
    backend = ScriptedBackend(script, latency=0.05)

    backend.calls     # how many generate() calls were made
    backend.requests  # the GenerationRequest of every call, in call order

An item of a list script may also be an exception instance: that call raises it (e.g. EngineDead, TimeoutError).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Union

from chunker.backends.base import GenerationRequest, GenerationResult

Answer = Union[str, GenerationResult, BaseException]
ScriptFn = Callable[[GenerationRequest, int], Union[Answer, Awaitable[Answer]]]
Latency = Union[float, Callable[[GenerationRequest, int], float], None]


def default_script(request: GenerationRequest, index: int) -> str:
    """What ``converter.backend=scripted`` answers when no script is given: a small valid Markdown page."""
    pages = max(1, len(request.images))
    # The chain expects the context trailer on every answer; without it every batch would fall back.
    trailer = '<context>{"summary": "scripted pages", "heading_path": ["Scripted batch %d"]}</context>' % index
    return f"# Scripted batch {index}\n\nScripted text standing in for {pages} page(s).\n\n{trailer}"


class ScriptedBackend:
    """Answers each ``generate`` from ``script``; counts calls and keeps every request for assertions."""

    name = "scripted"

    def __init__(
        self,
        script: ScriptFn | Sequence[Answer] | None = None,
        latency: Latency = None,
        model: str = "scripted",
    ) -> None:
        self._script = default_script if script is None else script
        self._latency = latency
        self.model = model
        self.calls = 0
        self.requests: list[GenerationRequest] = []
        self.closed = False

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        index = self.calls
        self.calls += 1
        self.requests.append(request)
        if self._latency is not None:
            delay = self._latency(request, index) if callable(self._latency) else self._latency
            await asyncio.sleep(delay)
        answer = self._answer(request, index)
        if inspect.isawaitable(answer):
            answer = await answer
        return self._to_result(answer, request)

    def _answer(self, request: GenerationRequest, index: int) -> Answer | Awaitable[Answer]:
        if callable(self._script):
            return self._script(request, index)
        if index >= len(self._script):
            # A test that runs past its script has a wrong expectation about call count: say so loudly.
            raise AssertionError(f"ScriptedBackend: call {index + 1} but the script holds {len(self._script)} answers")
        return self._script[index]

    def _to_result(self, answer: Answer, request: GenerationRequest) -> GenerationResult:
        if isinstance(answer, BaseException):
            raise answer
        if isinstance(answer, GenerationResult):
            return answer
        if isinstance(answer, str):
            # Rough token counts so throughput code sees plausible non-zero numbers.
            return GenerationResult(
                text=answer,
                input_tokens=max(1, (len(request.instructions) + len(request.user)) // 4) + 256 * len(request.images),
                output_tokens=max(1, len(answer) // 4),
                finish_reason="stop",
                model=self.model,
            )
        raise TypeError(f"ScriptedBackend: script answered {type(answer).__name__}; expected str, GenerationResult or exception")

    async def close(self) -> None:
        self.closed = True
