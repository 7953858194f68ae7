"""GPU calibration script: the tiny shape end to end on CPU, clear failure without CUDA, the calibration file round
trip into the simulated engine, and (GPU only) the real 7B shape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chunker.backends.simulated import EngineSpec, SimulatedBackend
from jobs.calibrate import main, model_config, visual_tokens

_SMOKE = ["--shape", "tiny", "--side", "112", "--pages", "2", "--text-tokens", "40", "--decode", "4",
          "--decode-batch", "3", "--repeats", "1"]


def test_shapes_carry_the_published_architecture_numbers() -> None:
    cfg = model_config("7b")
    t, v = cfg.text_config, cfg.vision_config
    assert (t.hidden_size, t.num_hidden_layers, t.num_attention_heads, t.num_key_value_heads) == (3584, 28, 28, 4)
    assert (t.intermediate_size, t.vocab_size) == (18944, 152064)
    assert (v.depth, v.hidden_size, v.out_hidden_size, v.patch_size, v.spatial_merge_size) == (32, 1280, 3584, 14, 2)
    assert v.fullatt_block_indexes == [7, 15, 23, 31] and v.window_size == 112
    assert model_config("3b").text_config.hidden_size == 2048
    assert visual_tokens(1568) == 56 * 56  # (1568/14)^2 patches, 2x2 merged


def test_tiny_shape_runs_on_cpu_and_calibrates_the_simulated_engine(tmp_path: Path) -> None:
    cal = tmp_path / "cal" / "engine.json"
    assert main([*_SMOKE, "--device", "cpu", "--output", str(tmp_path), "--write-calibration", str(cal)]) == 0
    rep = json.loads((tmp_path / "calibration.json").read_text())
    assert rep["prompt_tokens"] == 40 + 2 * (visual_tokens(112) + 2)
    for key in ("prefill_ms_per_page", "decode_tokens_per_s_batch1", "decode_tokens_per_s_aggregate",
                "est_pages_per_s_per_gpu"):
        assert rep[key] > 0, key
    assert "batch 3" in rep["estimate_model"] and rep["peak_gpu_mem_gib"] is None
    spec = EngineSpec.from_calibration(cal)
    assert spec.max_num_seqs == 3 and spec.prefill_tokens_per_s == rep["prefill_tokens_per_s"]
    backend = SimulatedBackend.from_calibration(cal, time_scale=0.01)
    assert backend.spec == spec


def test_calibration_file_with_unknown_fields_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"engine_spec": {"prefill_tokens_per_s": 1.0, "gpu": "x"}}))
    with pytest.raises(ValueError, match="unknown engine_spec fields"):
        EngineSpec.from_calibration(bad)


def test_real_shape_fails_clearly_without_cuda(capsys: pytest.CaptureFixture[str]) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA machine: the 7B shape would run")
    assert main(["--shape", "7b"]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err
    assert main(["--shape", "7b", "--device", "cpu"]) == 2
    assert "only for --shape tiny" in capsys.readouterr().err


@pytest.mark.gpu
def test_7b_shape_on_a_gpu(tmp_path: Path) -> None:
    import torch

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    assert main(["--shape", "7b", "--decode", "32", "--decode-batch", "8", "--repeats", "1",
                 "--output", str(tmp_path)]) == 0
    rep = json.loads((tmp_path / "calibration.json").read_text())
    assert 8.2 < rep["params_m"] / 1000 < 8.4 and rep["peak_gpu_mem_gib"] > 15
    assert rep["est_pages_per_s_per_gpu"] > 0
