"""Qwen2.5-VL through Hugging Face transformers: one-GPU and CPU debug runs, and the tiny test model.

One ``generate`` runs at a time per model (no continuous batching here), on a one-thread executor so the event
loop, and the other chains waiting on it, stay responsive. Prompts and images are built exactly as for vLLM.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from chunker.backends.base import BackendUnavailable, EngineDead, GenerationRequest, GenerationResult
from chunker.backends.errors import BackendRequestError
from chunker.backends.vllm_backend import chat_messages, decode_images, is_engine_dead, max_pixels_for, qwen_chat_prompt
from chunker.backends.weights import resolve_model_dir
from chunker.config import ModelConfig


def _image_only_processor_class() -> type:
    from transformers import Qwen2_5_VLProcessor

    class ImageOnlyQwen2_5_VLProcessor(Qwen2_5_VLProcessor):
        """Qwen2.5-VL's processor without a video processor: the stock one insists on one, and the video
        processor needs torchvision, which is often unusable (CPU torch builds). Pages are images only."""

        def __init__(self, image_processor: Any = None, tokenizer: Any = None, chat_template: str | None = None, **kw: Any):
            # The parent passes three sub-processors positionally; ProcessorMixin keeps those this signature
            # names (image_processor, tokenizer) and drops the video one.
            super().__init__(image_processor=image_processor, tokenizer=tokenizer, video_processor=None,
                             chat_template=chat_template, **kw)

    return ImageOnlyQwen2_5_VLProcessor


def pick_device(setting: str) -> str:
    import torch

    if setting == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if setting.startswith("cuda") and not torch.cuda.is_available():
        raise BackendUnavailable(f"converter.model.device={setting!r} but no CUDA GPU is visible; use cpu or auto")
    return setting


def _torch_dtype(name: str) -> Any:
    import torch

    aliases = {"bf16": "bfloat16", "fp16": "float16", "half": "float16", "fp32": "float32", "float": "float32"}
    name = aliases.get(name, name)
    if name == "auto":
        return "auto"
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise BackendUnavailable(f"converter.model.dtype={name!r} is not a torch dtype (bfloat16, float16, float32, auto)")
    return dtype


def load_qwen_vl(model_dir: str, *, dtype: str, device: str, local_only: bool, max_pixels: int | None) -> tuple[Any, Any]:
    """(model, processor) from a Qwen2.5-VL directory: a hub snapshot or the layout of ``tests/tiny_qwen.py``.

    The processor is always assembled from its parts (tokenizer + PIL image processor) rather than through
    ``AutoProcessor``: the PIL image processor computes the same pixels without torchvision, and a directory
    without ``processor_config.json`` (the tiny model) loads the same way as a full snapshot.
    """
    try:
        from transformers import AutoTokenizer, Qwen2_5_VLForConditionalGeneration
        from transformers.models.qwen2_vl import Qwen2VLImageProcessorPil
    except ImportError as exc:
        raise BackendUnavailable(f"the transformers backend needs transformers with Qwen2.5-VL (>=5.16): {exc}") from exc

    tokenizer = AutoTokenizer.from_pretrained(model_dir, local_files_only=local_only)
    extra = {"max_pixels": max_pixels} if max_pixels else {}
    if local_only and not (Path(model_dir) / "preprocessor_config.json").is_file():
        image_processor = Qwen2VLImageProcessorPil(**extra)  # Qwen's defaults
    else:
        image_processor = Qwen2VLImageProcessorPil.from_pretrained(model_dir, local_files_only=local_only, **extra)
    processor = _image_only_processor_class()(
        image_processor=image_processor, tokenizer=tokenizer, chat_template=tokenizer.chat_template
    )
    model = Qwen2_5_VLForConditionalGeneration.from_pretrained(
        model_dir, dtype=_torch_dtype(dtype), local_files_only=local_only
    )
    model.to(device).eval()
    return model, processor


class TransformersBackend:
    name = "transformers"

    def __init__(self, cfg: ModelConfig, *, max_images: int = 4, max_side_px: int = 1568) -> None:
        self.cfg = cfg
        self.model_name = cfg.name if not cfg.path else Path(cfg.path).name
        self.max_images = max_images
        self.device = pick_device(cfg.device)
        model_dir = resolve_model_dir(cfg)
        self._model, self._processor = load_qwen_vl(
            model_dir,
            dtype=cfg.dtype,
            device=self.device,
            local_only=not cfg.allow_download,
            max_pixels=max_pixels_for(max_side_px),
        )
        tok = self._processor.tokenizer
        self._eos_ids = self._stop_ids(tok)
        # One thread = one generate at a time per model; queued requests wait without holding threads.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="qwen-generate")

    def _stop_ids(self, tokenizer: Any) -> set[int]:
        ids = set()
        configured = getattr(self._model.generation_config, "eos_token_id", None)
        for value in (configured if isinstance(configured, list) else [configured]):
            if isinstance(value, int):
                ids.add(value)
        for token in ("<|im_end|>", "<|endoftext|>"):
            tid = tokenizer.convert_tokens_to_ids(token)
            if isinstance(tid, int) and tid != getattr(tokenizer, "unk_token_id", None):
                ids.add(tid)
        return ids

    def _prompt(self, request: GenerationRequest) -> str:
        tokenizer = self._processor.tokenizer
        messages = chat_messages(request)
        if getattr(tokenizer, "chat_template", None):
            return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return qwen_chat_prompt(messages)

    def _generate_sync(self, request: GenerationRequest) -> GenerationResult:
        import torch

        images = decode_images(request.images)
        inputs = self._processor(text=[self._prompt(request)], images=images or None, return_tensors="pt")
        inputs = inputs.to(self.device)
        prompt_len = int(inputs["input_ids"].shape[1])
        sampling = request.temperature > 0
        gen_kwargs: dict[str, Any] = {
            "max_new_tokens": request.max_tokens,
            "do_sample": sampling,
            "eos_token_id": sorted(self._eos_ids) or None,
            "pad_token_id": self._processor.tokenizer.pad_token_id,
        }
        if sampling:
            gen_kwargs["temperature"] = request.temperature
        # request.json_schema is not enforced here (no guided decoding in plain generate); the caller's format
        # check catches a bad reply as with any other backend.
        with torch.inference_mode():
            out = self._model.generate(**inputs, **gen_kwargs)
        new_ids = out[0, prompt_len:].tolist()
        stopped = bool(new_ids) and new_ids[-1] in self._eos_ids
        text = self._processor.tokenizer.decode(new_ids, skip_special_tokens=True)
        return GenerationResult(
            text=text,
            input_tokens=prompt_len,
            output_tokens=len(new_ids),
            finish_reason="length" if len(new_ids) >= request.max_tokens and not stopped else "stop",
            model=self.model_name,
        )

    async def generate(self, request: GenerationRequest) -> GenerationResult:
        if len(request.images) > self.max_images:
            raise BackendRequestError(
                f"{len(request.images)} images in one request; this backend allows {self.max_images} (intake.batch_pages)",
                retryable=False,
            )
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, self._generate_sync, request)
        except BackendRequestError:
            raise
        except Exception as exc:
            if is_engine_dead(exc):
                raise EngineDead(f"transformers generate ran out of GPU memory: {exc}") from exc
            raise BackendRequestError(f"transformers generate failed: {type(exc).__name__}: {exc}") from exc

    async def close(self) -> None:
        self._executor.shutdown(wait=True)
        self._model = None
