"""Build a tiny, randomly initialised Qwen2.5-VL on disk, offline, in well under a second.

No weights can be downloaded here, yet the transformers backend (and an end-to-end ingest test) should run the
real model class, processor and chat template. So: a byte-level BPE trained on a few sentences that carries the
Qwen special tokens, a Qwen2-VL-style chat template, the PIL image processor (torchvision is unusable with the
CPU torch) and a model a few hundred kilobytes big. Its output is noise; its shapes and code paths are real.

Layout written by :func:`build_tiny_qwen` (what :func:`chunker.backends.transformers_backend.load_qwen_vl` reads):
``config.json`` + weights, ``tokenizer.json`` + ``tokenizer_config.json`` (with the chat template),
``preprocessor_config.json`` (image processor). There is no ``processor_config.json``: ``save_pretrained`` of
the processor fails without a video processor, so the parts are saved one by one.

Use: ``path = build_tiny_qwen(tmp_path / "tiny-qwen")``, then ``load_config(..., overrides=tiny_qwen_overrides(path))``
(transformers backend, this path, float32 on CPU, a small output cap, 448 px renders). The text it writes is noise,
so a chain on it exercises retries and fallbacks, not parsing of good Markdown.
"""

from __future__ import annotations

from pathlib import Path

SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
]

# Same shape of prompt as the real Qwen2-VL template: one vision block per image part, in content order.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'image' %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}"
    "{% endfor %}{% endif %}"
    "<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

_CORPUS = [
    "# Heading\n\nA paragraph of verbatim text, with a table row: Column A is 1, Column B is 2.",
    "You are a careful document converter. Convert the attached pages to Markdown.",
    "[CONTINUES]False[/CONTINUES][HEAD]Title > Section[/HEAD] content 0123456789",
    "- list item\n- another item\n```code```\n| a | b |\n|---|---|",
]

# Small image processor bounds keep the vision tower's work (and the test) tiny.
TINY_MIN_PIXELS = 56 * 56
TINY_MAX_PIXELS = 28 * 28 * 16


def _tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import Qwen2TokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_CORPUS * 4, trainer=trainer)
    fast = Qwen2TokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token=None,
        bos_token=None,
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def build_tokenizer_only(path: str | Path) -> Path:
    """Just the tokenizer (with its chat template) in ``path``: enough for prompt-building tests."""
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    _tokenizer().save_pretrained(out)
    return out


def build_tiny_qwen(path: str | Path, seed: int = 0) -> Path:
    """Write a tiny random Qwen2.5-VL (model, tokenizer, image processor) to ``path`` and return it."""
    import torch
    from transformers import Qwen2_5_VLConfig, Qwen2_5_VLForConditionalGeneration
    from transformers.models.qwen2_vl import Qwen2VLImageProcessorPil

    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = _tokenizer()
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}

    # head_dim 64 (hidden 128 / 2 heads): vLLM's CPU attention kernels have none for smaller heads (16 fails).
    hidden = 128
    config = Qwen2_5_VLConfig(
        text_config={
            "vocab_size": len(tokenizer),
            "hidden_size": hidden,
            "intermediate_size": 256,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "num_key_value_heads": 1,
            "max_position_embeddings": 4096,
            # head_dim 64 -> 32 rotary frequencies split over (time, height, width).
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [8, 12, 12]},
            "eos_token_id": ids["<|im_end|>"],
            "pad_token_id": ids["<|endoftext|>"],
            "bos_token_id": ids["<|endoftext|>"],  # the default (151643) lies outside the tiny vocabulary
        },
        vision_config={
            "depth": 2,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_heads": 2,
            "out_hidden_size": hidden,
            "fullatt_block_indexes": [1],
            "patch_size": 14,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
            "window_size": 112,
        },
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
        bos_token_id=ids["<|endoftext|>"],
    )
    torch.manual_seed(seed)
    model = Qwen2_5_VLForConditionalGeneration(config).eval()
    model.generation_config.eos_token_id = ids["<|im_end|>"]
    model.generation_config.pad_token_id = ids["<|endoftext|>"]
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    Qwen2VLImageProcessorPil(min_pixels=TINY_MIN_PIXELS, max_pixels=TINY_MAX_PIXELS).save_pretrained(out)
    return out


def tiny_qwen_overrides(path: str | Path, max_tokens: int = 32) -> list[str]:
    """``--set`` overrides that run the transformers backend on the tiny model at test speed.

    Small renders matter: the vision tower's full-attention layer is quadratic in a page's patches, so a
    1568 px page costs seconds even in this tiny model; 448 px keeps a page at a few hundred patches.
    """
    return [
        "converter.backend=transformers",
        f"converter.model.path={path}",
        "converter.model.dtype=float32",
        "converter.model.device=cpu",
        f"converter.model.max_output_tokens={max_tokens}",
        "render.max_side_px=448",
    ]


if __name__ == "__main__":  # python tests/tiny_qwen.py DIR: build one by hand for a manual run
    import sys

    print(build_tiny_qwen(sys.argv[1] if len(sys.argv) > 1 else "./output/tiny-qwen"))
