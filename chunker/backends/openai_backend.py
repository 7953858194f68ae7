"""Any OpenAI-compatible chat endpoint (a vLLM server, Ray Serve LLM, a hosted API) as a model backend.

Pages travel inline as ``data:`` URLs, so the server needs no access to our storage. Errors are split the way the
caller needs them: a wrong URL, key or model name can never succeed and raises :class:`BackendUnavailable`; a
timeout, a dropped connection, a 5xx, a 429 or a garbled reply may succeed next time and raises
:class:`BackendRequestError` (``retryable=True``), which the conversion chain retries.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
from typing import Any

import httpx

from chunker.backends.base import BackendUnavailable, GenerationRequest, GenerationResult
from chunker.backends.errors import BackendRequestError
from chunker.config import ModelConfig

__all__ = ["BackendRequestError", "OpenAIBackend", "build_payload", "parse_response"]

_FINISH = {"stop": "stop", "length": "length", "eos": "stop", "end_turn": "stop", "max_tokens": "length"}


def image_data_url(data: bytes, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def build_payload(request: GenerationRequest, model: str) -> dict[str, Any]:
    """The ``/chat/completions`` body for one request: system turn, then one user turn of images + text."""
    # Fixed instructions, then the pages, then this request's particulars (chunker.backends.vllm_requests.
    # chat_messages): a vLLM server's prefix cache then reuses the instructions across requests.
    content: list[dict[str, Any]] = []
    if request.instructions:
        content.append({"type": "text", "text": request.instructions})
    content += [
        {"type": "image_url", "image_url": {"url": image_data_url(img, request.image_mime)}} for img in request.images
    ]
    content.append({"type": "text", "text": request.user})
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    messages.append({"role": "user", "content": content})
    payload: dict[str, Any] = {
        "model": model,
        "messages": messages,
        "temperature": request.temperature,
        "max_tokens": request.max_tokens,
    }
    if request.json_schema is not None:
        # The OpenAI structured-output form; vLLM servers map it onto their guided decoding.
        payload["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": "output", "schema": request.json_schema, "strict": True},
        }
    return payload


def parse_response(body: Any, model: str) -> GenerationResult:
    """Turn a chat-completions reply into a result; a reply without a usable choice is a retryable error."""
    if not isinstance(body, dict):
        raise BackendRequestError(f"reply is not a JSON object: {str(body)[:200]!r}")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise BackendRequestError(f"reply has no choices: {json.dumps(body)[:300]}")
    choice = choices[0]
    message = choice.get("message") or {}
    text = message.get("content") if isinstance(message, dict) else None
    if text is None:
        text = ""  # a server may send null content with finish_reason "length" (nothing fit): keep the reason
    if not isinstance(text, str):
        raise BackendRequestError(f"reply content is not text: {str(text)[:200]!r}")
    usage = body.get("usage") or {}
    reason = choice.get("finish_reason")
    return GenerationResult(
        text=text,
        input_tokens=int(usage.get("prompt_tokens") or 0),
        output_tokens=int(usage.get("completion_tokens") or 0),
        finish_reason=_FINISH.get(str(reason), "error") if reason is not None else "stop",
        model=str(body.get("model") or model),
    )


def read_api_key(env_name: str) -> str | None:
    # The key is read once, at construction: the only environment read of this backend.
    if not env_name:
        return None
    return os.environ.get(env_name) or None


class OpenAIBackend:
    name = "openai"

    def __init__(self, cfg: ModelConfig, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.cfg = cfg
        self.model = cfg.name
        self.url = cfg.base_url.rstrip("/") + "/chat/completions"
        self._api_key_env = cfg.api_key_env
        key = read_api_key(cfg.api_key_env)
        headers = {"Authorization": f"Bearer {key}"} if key else {}  # local servers often need no key at all
        self._client = httpx.AsyncClient(
            headers=headers,
            timeout=httpx.Timeout(cfg.request_timeout_s),
            limits=httpx.Limits(max_connections=cfg.max_concurrency, max_keepalive_connections=cfg.max_concurrency),
            transport=transport,
        )
        # Bounds requests in flight per actor, so many chains share one server politely.
        self._slots = asyncio.Semaphore(cfg.max_concurrency)

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        payload = build_payload(request, self.model)
        async with self._slots:
            try:
                response = await self._client.post(self.url, json=payload)
            except httpx.TimeoutException as exc:
                raise BackendRequestError(
                    f"request {request.request_id or '?'} to {self.url} timed out after {self.cfg.request_timeout_s}s "
                    f"({type(exc).__name__})"
                ) from exc
            except httpx.TransportError as exc:
                raise BackendRequestError(f"cannot reach {self.url}: {type(exc).__name__}: {exc}") from exc
        self._raise_for_status(response)
        try:
            body = response.json()
        except ValueError as exc:
            raise BackendRequestError(f"{self.url} answered malformed JSON: {response.text[:200]!r}") from exc
        return parse_response(body, self.model)

    def _raise_for_status(self, response: httpx.Response) -> None:
        status = response.status_code
        if status < 400:
            return
        detail = response.text[:300]
        if status in (401, 403):
            raise BackendUnavailable(
                f"{self.url} refused the credentials (HTTP {status}); put a valid key in the environment variable "
                f"{self._api_key_env} (converter.model.api_key_env): {detail}"
            )
        if status == 404:
            raise BackendUnavailable(
                f"{self.url} answered 404: check converter.model.base_url and that the server serves model "
                f"{self.model!r}: {detail}"
            )
        if status == 429 or status >= 500:
            raise BackendRequestError(f"{self.url} answered HTTP {status} (try again later): {detail}", status=status)
        # Other 4xx (e.g. 400 prompt too long): this request as sent cannot succeed, a smaller one may.
        raise BackendRequestError(f"{self.url} rejected the request (HTTP {status}): {detail}", status=status, retryable=False)

    async def close(self) -> None:
        await self._client.aclose()
