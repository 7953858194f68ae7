"""Qwen2.5-VL on vLLM's async engine, in-process: the production path on GPU actors.

One engine per actor serves many document chains at once (continuous batching), so ``generate`` is a plain
coroutine that many chains await concurrently. Everything that shapes a request is a pure function here
(prompt, images, sampling, engine arguments, output mapping), testable without vllm or a GPU; only
:meth:`VllmBackend._start_engine` and :func:`make_sampling_params` import vllm.
"""

from __future__ import annotations

import asyncio
import io
import math
import uuid
from collections.abc import Callable
from typing import Any

from chunker.backends.base import BackendUnavailable, EngineDead, GenerationRequest, GenerationResult
from chunker.backends.errors import BackendRequestError
from chunker.backends.weights import resolve_model_dir
from chunker.config import ModelConfig

ChatTemplateFn = Callable[[list[dict[str, Any]]], str]

# Qwen2.5-VL sees images in 14 px patches merged 2x2: sizes are effectively counted in 28 px units.
PATCH_UNIT = 28


def max_pixels_for(max_side_px: int, unit: int = PATCH_UNIT) -> int:
    """Pixel budget per image that never shrinks a render whose longest side is ``max_side_px``.

    A page of aspect ratio r has area max_side^2 * r <= max_side^2, so the square bound (rounded up to whole
    28 px units, as the processor rounds sides) lets every render through at its own resolution.
    """
    side = math.ceil(max_side_px / unit) * unit
    return side * side


def chat_messages(request: GenerationRequest) -> list[dict[str, Any]]:
    """The conversation in Hugging Face chat-template form: pages first, then the instructions."""
    content: list[dict[str, Any]] = [{"type": "image"} for _ in request.images]
    content.append({"type": "text", "text": request.user})
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    messages.append({"role": "user", "content": content})
    return messages


def qwen_chat_prompt(messages: list[dict[str, Any]]) -> str:
    """Qwen2-VL's chat format written out, for a tokenizer that carries no chat template."""
    out = []
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            body = content
        else:
            body = "".join(
                "<|vision_start|><|image_pad|><|vision_end|>" if part["type"] == "image" else part.get("text", "")
                for part in content
            )
        out.append(f"<|im_start|>{message['role']}\n{body}<|im_end|>\n")
    out.append("<|im_start|>assistant\n")
    return "".join(out)


def decode_images(images: list[bytes]) -> list[Any]:
    """Encoded pages -> RGB PIL images, fully loaded (vLLM's processor must not hit a lazily closed file)."""
    from PIL import Image

    decoded = []
    for index, data in enumerate(images):
        try:
            img = Image.open(io.BytesIO(data))
            img.load()
        except Exception as exc:
            raise BackendRequestError(f"page image {index} cannot be decoded: {exc}", retryable=False) from exc
        decoded.append(img.convert("RGB") if img.mode != "RGB" else img)
    return decoded


def build_vllm_inputs(request: GenerationRequest, chat_template_fn: ChatTemplateFn) -> dict[str, Any]:
    """The prompt dict ``engine.generate`` takes: templated text + the page images in page order."""
    prompt = chat_template_fn(chat_messages(request))
    inputs: dict[str, Any] = {"prompt": prompt}
    if request.images:
        inputs["multi_modal_data"] = {"image": decode_images(request.images)}
    return inputs


def build_sampling_kwargs(request: GenerationRequest) -> dict[str, Any]:
    """SamplingParams arguments as plain data; ``structured_outputs`` is turned into vLLM's object later."""
    kwargs: dict[str, Any] = {"temperature": request.temperature, "max_tokens": request.max_tokens}
    if request.json_schema is not None:
        kwargs["structured_outputs"] = {"json": request.json_schema}
    return kwargs


def make_sampling_params(kwargs: dict[str, Any]) -> Any:
    """Real ``vllm.SamplingParams`` from :func:`build_sampling_kwargs`' data."""
    from vllm import SamplingParams

    kwargs = dict(kwargs)
    structured = kwargs.pop("structured_outputs", None)
    if structured is not None:
        try:  # vLLM >= 0.11
            from vllm.sampling_params import StructuredOutputsParams

            kwargs["structured_outputs"] = StructuredOutputsParams(**structured)
        except ImportError:  # older releases called it guided decoding
            from vllm.sampling_params import GuidedDecodingParams

            kwargs["guided_decoding"] = GuidedDecodingParams(**structured)
    try:
        # Only the finished output is used: skip building every intermediate cumulative text.
        from vllm.sampling_params import RequestOutputKind

        kwargs["output_kind"] = RequestOutputKind.FINAL_ONLY
    except ImportError:
        pass
    return SamplingParams(**kwargs)


_FINISH = {"stop": "stop", "length": "length"}


def result_from_output(output: Any, model: str) -> GenerationResult:
    """A finished ``RequestOutput`` -> result: text, prompt tokens (images expanded), output tokens, reason."""
    if not getattr(output, "outputs", None):
        raise BackendRequestError("vLLM returned a request output without completions")
    completion = output.outputs[0]
    prompt_ids = getattr(output, "prompt_token_ids", None) or []
    return GenerationResult(
        text=completion.text or "",
        input_tokens=len(prompt_ids),
        output_tokens=len(completion.token_ids or []),
        # "abort" (and None: not finished) mean no usable completion.
        finish_reason=_FINISH.get(str(completion.finish_reason), "error"),
        model=model,
    )


_DEAD_ERRORS = {"EngineDeadError", "AsyncEngineDeadError", "MQEngineDeadError", "OutOfMemoryError"}


def is_engine_dead(exc: BaseException) -> bool:
    """True when the engine can serve nothing more: vLLM's dead-engine errors, or CUDA out of memory."""
    # Matched by name: the classes live in modules that move between vLLM releases and need vllm imported.
    for err in (exc, exc.__cause__):
        if err is None:
            continue
        if type(err).__name__ in _DEAD_ERRORS or "CUDA out of memory" in str(err):
            return True
    return False


def build_engine_args(cfg: ModelConfig, model_dir: str, *, max_images: int, max_pixels: int) -> dict[str, Any]:
    """``AsyncEngineArgs`` keyword arguments from the model config (pure data, so a test can read them)."""
    args: dict[str, Any] = {
        "model": model_dir,
        "served_model_name": [cfg.name],
        "dtype": cfg.dtype,
        "tensor_parallel_size": cfg.tensor_parallel_size,
        "max_model_len": cfg.max_model_len,
        "gpu_memory_utilization": cfg.gpu_memory_utilization,
        "max_num_seqs": cfg.max_num_seqs,
        # Profiling reserves memory for the worst case: exactly one page batch of images, and no video.
        "limit_mm_per_prompt": {"image": max_images, "video": 0},
        "mm_processor_kwargs": {"max_pixels": max_pixels},
        "trust_remote_code": False,
        "disable_log_stats": True,
    }
    if cfg.tensor_parallel_size > 1:
        # The Ray actor already holds all tensor_parallel_size GPUs (ray.convert_num_gpus): the shards must run
        # as local processes on them. vLLM's "ray" executor would ask Ray for GPUs the actor already holds.
        args["distributed_executor_backend"] = "mp"
    return args


def hf_chat_template(model_dir: str, local_only: bool) -> ChatTemplateFn:
    """The model's own chat template (from its tokenizer), or Qwen's format written out when it has none."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=local_only)
    if not getattr(tokenizer, "chat_template", None):
        return qwen_chat_prompt

    def render(messages: list[dict[str, Any]]) -> str:
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    return render


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
        if engine is None:
            model_dir = resolve_model_dir(cfg)
            self.engine_args = build_engine_args(cfg, model_dir, max_images=max_images, max_pixels=self.max_pixels)
            engine = self._start_engine(self.engine_args)
            if chat_template_fn is None:
                chat_template_fn = hf_chat_template(model_dir, local_only=not cfg.allow_download)
        self._engine = engine
        self._template = chat_template_fn or qwen_chat_prompt

    @staticmethod
    def _start_engine(engine_args: dict[str, Any]) -> Any:
        try:
            import vllm  # noqa: F401
        except ImportError as exc:
            raise BackendUnavailable(
                f"the vllm backend needs vllm, which is not installed ({exc}): install the gpu extra: pip install '.[gpu]'"
            ) from exc
        import torch

        if not torch.cuda.is_available():
            raise BackendUnavailable(
                "the vllm backend needs a CUDA GPU and none is visible here (check ray.convert_num_gpus and "
                "CUDA_VISIBLE_DEVICES); on CPU use converter.backend=transformers, openai or pdf-text"
            )
        from vllm import AsyncEngineArgs

        try:  # the v1 engine; AsyncLLMEngine is an alias of it in recent releases
            from vllm.v1.engine.async_llm import AsyncLLM as Engine
        except ImportError:
            from vllm import AsyncLLMEngine as Engine
        try:
            return Engine.from_engine_args(AsyncEngineArgs(**engine_args))
        except Exception as exc:
            if is_engine_dead(exc):
                raise BackendUnavailable(f"vLLM could not start {engine_args['model']}: {exc}") from exc
            raise

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        if len(request.images) > self.max_images:
            # The engine was profiled for at most max_images per prompt and would reject the request anyway.
            raise BackendRequestError(
                f"{len(request.images)} images in one request; the engine allows {self.max_images} "
                f"(intake.batch_pages)",
                retryable=False,
            )
        # Decoding a batch of JPEGs and templating takes tens of ms: keep it off the loop other chains share.
        inputs = await asyncio.to_thread(build_vllm_inputs, request, self._template)
        params = self._sampling_factory(build_sampling_kwargs(request))
        # Retries reuse the caller's request_id; the engine needs each live request id to be unique.
        rid = f"{request.request_id or 'req'}#{uuid.uuid4().hex[:8]}"
        final = None
        try:
            # Cancelling this coroutine aborts the request inside vLLM (its generate handles CancelledError).
            async for output in self._engine.generate(inputs, params, rid):
                final = output
        except Exception as exc:
            if is_engine_dead(exc):
                raise EngineDead(f"vLLM engine is dead (request {rid}): {type(exc).__name__}: {exc}") from exc
            raise BackendRequestError(f"vLLM request {rid} failed: {type(exc).__name__}: {exc}") from exc
        if final is None:
            raise BackendRequestError(f"vLLM request {rid} produced no output")
        return result_from_output(final, self.model)

    async def close(self) -> None:
        shutdown = getattr(self._engine, "shutdown", None)
        if shutdown is not None:
            result = shutdown()
            if asyncio.iscoroutine(result):
                await result
