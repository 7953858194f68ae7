"""The model-backend interface: rendered pages + prompt (+ context, already in the prompt) in; text, token counts and
finish reason out. Backends know nothing of documents, chains or retries: :mod:`chunker.convert.vlm` does that."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from chunker.errors import SetupError


class BackendUnavailable(SetupError):
    """A backend's package, weights, GPU or endpoint is missing; the message says what to install or configure."""


class EngineDead(SetupError):
    """The engine cannot serve any more requests (crash, CUDA OOM): the actor must fail so Ray restarts it."""


@dataclass
class GenerationRequest:
    system: str
    user: str  # the text of the user turn after the images (v1 prompts: all of it, instructions included)
    images: list[bytes] = field(default_factory=list)  # encoded pages, in page order
    image_mime: str = "image/jpeg"
    image_sizes: list[tuple[int, int]] = field(default_factory=list)  # (w, h) per image
    temperature: float = 0.1
    max_tokens: int = 8192
    request_id: str = ""
    json_schema: dict | None = None  # guided decoding, where the backend offers it
    # Text of the user turn before the images: the same for every request of a run (the fixed instructions), so
    # the engine's prefix cache reuses it; empty for prompts that put everything after the images.
    instructions: str = ""


@dataclass
class GenerationResult:
    text: str
    input_tokens: int = 0
    output_tokens: int = 0
    finish_reason: str = "stop"  # "stop" | "length" | "error"
    model: str = ""
    finish_detail: str = ""  # the backend's own reason when it differs, e.g. vLLM's "repetition" (-> "length")
    cached_tokens: int = 0  # prompt tokens served from the engine's prefix cache (vLLM's num_cached_tokens)


class ModelBackend(Protocol):
    name: str

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        """One completion. Raises BackendUnavailable / EngineDead for fatal conditions; per-request trouble
        (timeout, 5xx, malformed reply) raises any other exception, which the caller retries."""
        ...

    async def close(self) -> None: ...
