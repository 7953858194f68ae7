"""The vllm backend's request construction and output mapping: pure functions of chunker.backends.vllm_requests
(prompt, images, sampling, processor and engine arguments, results), no vllm, no GPU. The backend around them, with
a fake engine: tests/test_backend_vllm.py."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from vllm_fakes import QWEN_DEFAULTS, make_output, make_request  # tests/ is on sys.path under pytest

from chunker.backends.errors import BackendRequestError
from chunker.backends.vllm_backend import (
    build_engine_args,
    build_sampling_kwargs,
    build_vllm_inputs,
    chat_messages,
    max_pixels_for,
    mm_processor_kwargs,
    processor_min_pixels,
    processor_takes_size,
    qwen_chat_prompt,
    result_from_output,
)
from chunker.config import ModelConfig


def test_prompt_has_one_vision_block_per_page_and_images_in_order():
    req = make_request()
    inputs = build_vllm_inputs(req, qwen_chat_prompt)
    prompt = inputs["prompt"]
    assert prompt.startswith("<|im_start|>system\nSYS<|im_end|>\n<|im_start|>user\n")
    assert prompt.count("<|vision_start|><|image_pad|><|vision_end|>") == 2
    assert prompt.endswith("Convert.<|im_end|>\n<|im_start|>assistant\n")
    images = inputs["multi_modal_data"]["image"]
    assert [im.size for im in images] == [(40, 60), (70, 30)]
    assert [im.getpixel((0, 0)) for im in images] == [(255, 0, 0), (0, 0, 255)]
    assert all(im.mode == "RGB" for im in images)


def test_text_only_request_has_no_multimodal_data():
    inputs = build_vllm_inputs(make_request(images=[]), qwen_chat_prompt)
    assert "multi_modal_data" not in inputs and "<|image_pad|>" not in inputs["prompt"]


def test_real_tokenizer_chat_template_matches_qwen_format(tmp_path):
    # The tiny model's tokenizer carries a Qwen2-VL-style template: the model's own template path gives the
    # same prompt as the written-out fallback.
    pytest.importorskip("transformers")
    from chunker.backends.vllm_backend import hf_chat_template
    from tiny_qwen import build_tokenizer_only

    folder = build_tokenizer_only(tmp_path / "tok")
    render = hf_chat_template(str(folder), local_only=True)
    messages = chat_messages(make_request())
    assert render(messages) == qwen_chat_prompt(messages)


def test_sampling_kwargs():
    cfg = ModelConfig()
    kw = build_sampling_kwargs(make_request(temperature=0.1), cfg)
    assert (kw["temperature"], kw["max_tokens"], kw["repetition_penalty"]) == (0.1, 321, 1.05)
    assert kw["repetition_detection"] == {"max_pattern_size": 64, "min_pattern_size": 1, "min_count": 24}
    assert "structured_outputs" not in kw
    schema = {"type": "object"}
    assert build_sampling_kwargs(make_request(json_schema=schema), cfg)["structured_outputs"] == {"json": schema}
    off = build_sampling_kwargs(make_request(), ModelConfig(repetition_max_pattern_tokens=0, repetition_penalty=1.2))
    assert "repetition_detection" not in off and off["repetition_penalty"] == 1.2


def test_the_model_defaults_apply_at_the_first_attempt():
    kw = build_sampling_kwargs(make_request(temperature=0.1, max_tokens=900), ModelConfig(), QWEN_DEFAULTS)
    assert (kw["top_k"], kw["top_p"], kw["repetition_penalty"]) == (1, 0.001, 1.05)
    assert (kw["temperature"], kw["max_tokens"]) == (0.1, 900), "the request's cap, not the config's"


def test_a_retry_at_another_temperature_drops_the_greedy_restrictions():
    # top_k=1 would make every rung of the temperature ladder repeat the first answer.
    kw = build_sampling_kwargs(make_request(temperature=0.6), ModelConfig(), QWEN_DEFAULTS)
    assert "top_k" not in kw and "top_p" not in kw
    assert kw["temperature"] == 0.6 and kw["repetition_penalty"] == 1.05


def test_configured_repetition_penalty_wins_over_the_model():
    kw = build_sampling_kwargs(make_request(temperature=0.1), ModelConfig(repetition_penalty=1.1), QWEN_DEFAULTS)
    assert kw["repetition_penalty"] == 1.1


def test_mm_processor_kwargs_in_both_shapes():
    assert mm_processor_kwargs(448 * 448, 3136, size_api=True) == {
        "size": {"longest_edge": 448 * 448, "shortest_edge": 3136}}
    assert mm_processor_kwargs(448 * 448, 3136, size_api=False) == {"max_pixels": 448 * 448}
    # A minimum above the cap would make the processor refuse every image.
    assert mm_processor_kwargs(1000, 3136, size_api=True)["size"]["shortest_edge"] == 1000


def test_processor_capability_is_read_from_the_class():
    class SizeApi:  # transformers 5.x: pixel-area bounds in size, min/max_pixels deprecated (gone in 5.23)
        size = {"shortest_edge": 56 * 56, "longest_edge": 28 * 28 * 1280}

    class PixelsApi:  # older releases: min_pixels/max_pixels
        min_pixels = 56 * 56
        max_pixels = 28 * 28 * 1280

    class HeightWidth:
        size = {"height": 224, "width": 224}

    assert processor_takes_size(SizeApi) and not processor_takes_size(PixelsApi)
    assert not processor_takes_size(HeightWidth)


def test_installed_transformers_takes_the_size_form():
    transformers = pytest.importorskip("transformers")
    from packaging.version import Version

    if Version(transformers.__version__) >= Version("5.0"):
        assert processor_takes_size()


def test_min_pixels_come_from_the_model(tmp_path):
    assert processor_min_pixels(str(tmp_path)) == 56 * 56  # no preprocessor config: Qwen's default
    (tmp_path / "preprocessor_config.json").write_text('{"min_pixels": 1234, "max_pixels": 99999}')
    assert processor_min_pixels(str(tmp_path)) == 1234
    (tmp_path / "preprocessor_config.json").write_text('{"size": {"shortest_edge": 4321, "longest_edge": 9}}')
    assert processor_min_pixels(str(tmp_path)) == 4321


def test_max_pixels_never_shrinks_a_render():
    assert max_pixels_for(1568) == 1568 * 1568  # 1568 = 56 x 28
    assert max_pixels_for(1000) == 1008 * 1008
    assert max_pixels_for(1000) % (28 * 28) == 0


def test_engine_args_from_config():
    cfg = ModelConfig(name="Qwen/Qwen2.5-VL-32B-Instruct", tensor_parallel_size=2, max_model_len=24576,
                      gpu_memory_utilization=0.85, max_num_seqs=32, quantization="fp8", kv_cache_dtype="fp8",
                      mm_encoder_tp_mode="data")
    mm = mm_processor_kwargs(max_pixels_for(1568), 3136, size_api=True)
    args = build_engine_args(cfg, "/models/q32", max_images=4, mm_kwargs=mm)
    assert args["model"] == "/models/q32"
    assert args["tensor_parallel_size"] == 2 and args["max_model_len"] == 24576
    assert args["gpu_memory_utilization"] == 0.85 and args["max_num_seqs"] == 32
    assert args["max_num_batched_tokens"] == 16384, "vLLM's fallback of 2048 prefills about one page per step"
    assert (args["quantization"], args["kv_cache_dtype"], args["mm_encoder_tp_mode"]) == ("fp8", "fp8", "data")
    assert args["limit_mm_per_prompt"] == {"image": 4, "video": 0}
    assert args["mm_processor_kwargs"] == {"size": {"longest_edge": 1568 * 1568, "shortest_edge": 3136}}
    assert args["structured_outputs_config"] == {"backend": "xgrammar", "disable_any_whitespace": True}
    assert args["dtype"] == "bfloat16"
    assert args["distributed_executor_backend"] == "mp"
    assert "enforce_eager" not in args
    single = build_engine_args(ModelConfig(), "/m", max_images=2, mm_kwargs={})
    assert "distributed_executor_backend" not in single and "quantization" not in single
    assert "mm_encoder_tp_mode" not in single, "vLLM's default is not sent"
    cpu = build_engine_args(ModelConfig(device="cpu"), "/m", max_images=2, mm_kwargs={})
    assert cpu["enforce_eager"] is True


def test_result_mapping():
    r = result_from_output(make_output("# T", "length", prompt=900, out=8192), "m")
    assert (r.text, r.input_tokens, r.output_tokens, r.finish_reason, r.model) == ("# T", 900, 8192, "length", "m")
    assert r.finish_detail == ""
    assert result_from_output(make_output(reason="abort"), "m").finish_reason == "error"
    with pytest.raises(BackendRequestError):
        result_from_output(SimpleNamespace(outputs=[], prompt_token_ids=[]), "m")


def test_a_detected_loop_finishes_like_the_cap():
    # vLLM's finish reason "repetition" (repetition_detection): the converter treats it as it treats "length".
    r = result_from_output(make_output("# T", "repetition", out=300), "m")
    assert (r.finish_reason, r.finish_detail, r.output_tokens) == ("length", "repetition", 300)
