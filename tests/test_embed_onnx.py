"""The onnxruntime embedding backend: same vectors as torch, input order kept, cache reused and repaired, clear errors.

The packaged MiniLM is exported once per session into a temporary cache (a few seconds to a minute on 2 cores);
every other test reuses that export or copies it.
"""

from __future__ import annotations

import json
import logging
import shutil
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from chunker.index import embed_onnx
from chunker.backends.base import BackendUnavailable
from chunker.config import ConfigError, EmbedConfig, load_config
from chunker.index.embed import Embedder, resolve_model_path

TEXTS = [
    "How do I reset the administrator password?",
    ("CloudWay object storage keeps three copies of every object across availability zones; the archive tier moves "
     "objects that were not read for ninety days to cold storage and bills retrieval per gigabyte."),
    "Table 3: monthly price per virtual CPU by region and commitment term.",
    ("To rotate an API key, open the console, choose Security, then Keys, and press Rotate; the old key keeps working "
     "for twenty-four hours so running clients can switch over without downtime."),
    "Does the free tier include outbound traffic?",
]


@pytest.fixture(scope="session")
def onnx_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("onnx-cache")


@pytest.fixture(scope="session")
def torch_embedder() -> Embedder:
    return Embedder(EmbedConfig(backend="torch"))


@pytest.fixture(scope="session")
def int8_embedder(onnx_cache: Path) -> Embedder:
    """Exports fp32 and int8 once for the session."""
    return Embedder(EmbedConfig(backend="onnx-int8", onnx_cache_dir=str(onnx_cache)))


@pytest.fixture(scope="session")
def fp32_embedder(onnx_cache: Path, int8_embedder: Embedder) -> Embedder:
    return Embedder(EmbedConfig(backend="onnx", onnx_cache_dir=str(onnx_cache)))


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1)


def test_onnx_vectors_match_torch(torch_embedder: Embedder, fp32_embedder: Embedder, int8_embedder: Embedder) -> None:
    ref = torch_embedder.encode(TEXTS)
    fp32, int8 = fp32_embedder.encode(TEXTS), int8_embedder.encode(TEXTS)
    assert fp32.shape == int8.shape == ref.shape == (len(TEXTS), 384)
    assert fp32.dtype == int8.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(int8, axis=1), 1.0, atol=1e-5)
    assert _cos(fp32, ref).min() >= 0.999
    assert _cos(int8, ref).min() >= 0.99
    assert (int8_embedder.backend, fp32_embedder.backend, torch_embedder.backend) == ("onnx-int8", "onnx", "torch")
    assert int8_embedder.encode([]).shape == (0, 384)


def test_order_kept_across_length_sorted_batches(onnx_cache: Path, fp32_embedder: Embedder) -> None:
    # Batches of 2 over texts of very different lengths: sorting regroups them, the output must not move.
    small = Embedder(EmbedConfig(backend="onnx", onnx_cache_dir=str(onnx_cache), batch_size=2))
    texts = [TEXTS[1], "a", TEXTS[0] * 3, TEXTS[2], "b c", TEXTS[3]]
    together = small.encode(texts)
    alone = np.stack([fp32_embedder.encode([t])[0] for t in texts])
    np.testing.assert_allclose(together, alone, atol=2e-5)
    np.testing.assert_allclose(small.encode(texts[::-1]), together[::-1], atol=2e-5)


def test_second_construction_reuses_the_cache(onnx_cache: Path, int8_embedder: Embedder, monkeypatch) -> None:
    def no_export(*_a, **_k):
        raise AssertionError("exported again although the cache was valid")

    monkeypatch.setattr(embed_onnx, "_export_fp32", no_export)
    monkeypatch.setattr(embed_onnx, "_quantize_int8", no_export)
    again = Embedder(EmbedConfig(backend="onnx-int8", onnx_cache_dir=str(onnx_cache)))
    np.testing.assert_allclose(again.encode(TEXTS[:2]), int8_embedder.encode(TEXTS[:2]), atol=1e-6)


def test_damaged_cache_file_is_detected_and_rebuilt(onnx_cache: Path, int8_embedder: Embedder, tmp_path: Path,
                                                    monkeypatch) -> None:
    cache = tmp_path / "cache"
    shutil.copytree(onnx_cache, cache)
    (int8_file,) = cache.glob("*/model.int8.onnx")
    fp32_file = int8_file.with_name("model.onnx")
    assert embed_onnx.is_valid(int8_file) and embed_onnx.is_valid(fp32_file)
    # A partial file (as a killed writer without the atomic rename would leave) ...
    int8_file.write_bytes(int8_file.read_bytes()[: int8_file.stat().st_size // 2])
    assert not embed_onnx.is_valid(int8_file)
    # ... and a same-size file with other bytes are both refused.
    raw = bytearray(fp32_file.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    damaged = tmp_path / "model.onnx"
    damaged.write_bytes(bytes(raw))
    shutil.copy(fp32_file.with_name("model.onnx.sha256"), tmp_path / "model.onnx.sha256")
    assert not embed_onnx.is_valid(damaged)

    calls: list[str] = []
    real_quantize = embed_onnx._quantize_int8

    def counting_quantize(src: Path, out: Path) -> None:
        calls.append("quantize")
        real_quantize(src, out)

    def no_export(*_a, **_k):
        raise AssertionError("the fp32 export was valid and should have been kept")

    monkeypatch.setattr(embed_onnx, "_quantize_int8", counting_quantize)
    monkeypatch.setattr(embed_onnx, "_export_fp32", no_export)
    rebuilt = Embedder(EmbedConfig(backend="onnx-int8", onnx_cache_dir=str(cache)))
    assert calls == ["quantize"] and embed_onnx.is_valid(int8_file)
    assert _cos(rebuilt.encode(TEXTS), int8_embedder.encode(TEXTS)).min() > 0.9999
    assert not list(cache.glob("*/.*.tmp")), "temporary files were left behind"


def test_concurrent_builders_export_once(tmp_path: Path, monkeypatch) -> None:
    calls: list[int] = []

    def slow_export(_model_dir: Path, out: Path) -> None:
        calls.append(1)
        time.sleep(0.3)
        out.write_bytes(b"onnx bytes")

    monkeypatch.setattr(embed_onnx, "_export_fp32", slow_export)
    model_dir = Path(resolve_model_path("all-MiniLM-L6-v2"))
    found: list[Path] = []
    workers = [threading.Thread(target=lambda: found.append(embed_onnx.ensure_onnx(model_dir, tmp_path, "onnx", "m")))
               for _ in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert len(calls) == 1 and len(set(found)) == 1 and found[0].read_bytes() == b"onnx bytes"


def test_failed_export_is_one_clear_error_and_auto_falls_back(tmp_path: Path, monkeypatch, caplog) -> None:
    def broken(*_a, **_k):
        raise RuntimeError("unsupported operator aten::frobnicate")

    monkeypatch.setattr(embed_onnx, "_export_fp32", broken)
    with pytest.raises(BackendUnavailable) as err:
        Embedder(EmbedConfig(backend="onnx-int8", onnx_cache_dir=str(tmp_path)))
    assert "all-MiniLM-L6-v2" in str(err.value) and "aten::frobnicate" in str(err.value)
    with caplog.at_level(logging.WARNING, logger="chunker.index.embed"):
        auto = Embedder(EmbedConfig(backend="auto", onnx_cache_dir=str(tmp_path)))
    assert auto.backend == "torch"
    assert any("embedding with torch instead" in r.getMessage() for r in caplog.records)


def test_missing_onnxruntime_names_the_package(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import now raises ModuleNotFoundError
    with pytest.raises(BackendUnavailable, match=r"all-MiniLM-L6-v2.*onnxruntime"):
        Embedder(EmbedConfig(backend="onnx", onnx_cache_dir=str(tmp_path)))


def test_models_with_other_layers_are_refused(tmp_path: Path) -> None:
    (tmp_path / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"},
    ]))
    with pytest.raises(BackendUnavailable, match="Dense"):
        embed_onnx.read_pooling(tmp_path)


def test_bad_backend_fails_validation_naming_the_field() -> None:
    with pytest.raises(ConfigError, match=r"embed\.backend"):
        load_config(None, ["embed.backend=tensorrt"])
    with pytest.raises(ConfigError, match=r"embed\.backend=onnx-int8 runs on the CPU"):
        load_config(None, ["embed.backend=onnx-int8", "embed.device=cuda"])
    assert load_config(None, ["embed.device=cuda"]).embed.backend == "auto"


def test_unusable_cache_folder_is_one_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    with pytest.raises(BackendUnavailable, match=r"all-MiniLM-L6-v2: ONNX export \(onnx-int8\) into .*not-a-folder"):
        Embedder(EmbedConfig(backend="onnx-int8", onnx_cache_dir=str(blocker / "cache")))


def test_micro_benchmark_reports_each_backend(onnx_cache: Path, int8_embedder: Embedder) -> None:
    from jobs.bench.embed import bench_embed, render

    cfg = EmbedConfig(onnx_cache_dir=str(onnx_cache))
    result = bench_embed(cfg, ["onnx-int8", "no-such-backend"], TEXTS, repeats=1, query_runs=2)
    row = result["backends"]["onnx-int8"]
    assert row["ran"] == "onnx-int8" and row["passages_per_s"] > 0 and row["query_ms_median"] > 0
    assert "error" in result["backends"]["no-such-backend"]  # one failing backend never hides the others
    assert "| onnx-int8 |" in render(result)


def test_int8_query_vector_does_not_depend_on_its_neighbours(int8_embedder: Embedder) -> None:
    alone = int8_embedder.encode([TEXTS[0]])[0]
    beside = int8_embedder.encode([TEXTS[0], TEXTS[1] * 4, TEXTS[2]])[0]
    np.testing.assert_allclose(beside, alone, atol=1e-6)


def test_tokenizer_file_gives_the_transformers_ids(tmp_path: Path) -> None:
    """The encoder tokenises with ``tokenizers`` straight from tokenizer.json (no transformers import at start-up):
    the ids must be those of transformers' fast tokenizer, special tokens, truncation and all; a folder without
    tokenizer.json still works through AutoTokenizer."""
    from transformers import AutoTokenizer

    model_dir = Path(resolve_model_path("all-MiniLM-L6-v2"))
    texts = [*TEXTS, "", "   ", "Ärger im Büro: café, naïve, 東京", "word " * 400, "a\u00adb soft\ufffehyphen", "x" * 3000]
    hf = AutoTokenizer.from_pretrained(str(model_dir), use_fast=True)
    want = hf(texts, truncation=True, max_length=256, padding=False)["input_ids"]
    tokenize, pad_id = embed_onnx.load_tokenizer(model_dir, 256)
    assert tokenize(texts) == want
    assert pad_id == hf.pad_token_id
    assert max(len(ids) for ids in tokenize(texts)) == 256
    bare = tmp_path / "bare"
    shutil.copytree(model_dir, bare)
    (bare / "tokenizer.json").unlink()
    tokenize_hf, pad_hf = embed_onnx.load_tokenizer(bare, 256)
    assert tokenize_hf(texts) == want and pad_hf == pad_id
