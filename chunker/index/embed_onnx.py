"""ONNX Runtime embedding for sentence-transformers models made of Transformer + Pooling (+ Normalize).

sentence-transformers' own ``backend="onnx"`` needs optimum, whose releases exclude the transformers versions that
Qwen2.5-VL and vLLM need; so we export the packaged model ourselves, once, with ``torch.onnx.export`` (the
TorchScript exporter: it needs the ``onnx`` package but not ``onnxscript``), quantise it to int8 with
``onnxruntime.quantization.quantize_dynamic``, and cache both under a folder keyed by the source model's bytes.

Cache layout: ``<cache_root>/<key>/model.onnx`` and ``model.int8.onnx``, each with a ``.sha256`` sidecar written after
the model. Files are written to a temporary name and moved into place with :func:`os.replace`, so a reader never sees
half a file; a file whose size or hash does not match its sidecar (truncated, overwritten) is rebuilt. An exclusive
lock on ``<key>/.lock`` lets one process export while the others wait and then reuse its files.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import tempfile
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from chunker.backends.base import BackendUnavailable

log = logging.getLogger("chunker.index.embed")

# Bump when the export or quantisation recipe changes: the key changes, so old caches are left alone.
EXPORT_RECIPE = "torchscript-opset17-eager-v1;int8-dynamic-perchannel-v1"
OPSET = 17
VARIANT_FILES = {"onnx": "model.onnx", "onnx-int8": "model.int8.onnx"}
_SUPPORTED_MODULES = {"Transformer", "Pooling", "Normalize"}
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
SOLO_UP_TO = 16  # int8 calls with at most this many texts run them one by one (see OnnxEncoder)


class OnnxExportError(BackendUnavailable):
    """The model could not be exported or quantised to ONNX; the message names the model and the reason."""


@dataclass(frozen=True)
class Pooling:
    mode: str  # "mean" | "cls" | "max"
    dim: int


def read_pooling(model_dir: Path) -> Pooling:
    """The model's pooling, from modules.json and the Pooling module's config; refuses layers we do not run."""
    modules_file = model_dir / "modules.json"
    pooling_dir = model_dir / "1_Pooling"
    if modules_file.is_file():
        modules = json.loads(modules_file.read_text())
        kinds = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules]
        extra = [k for k in kinds if k not in _SUPPORTED_MODULES]
        if extra:
            raise BackendUnavailable(
                f"embedding model {model_dir} has modules {extra} that the onnx backend does not run "
                "(it runs Transformer + Pooling + Normalize); use embed.backend=torch"
            )
        for m in modules:
            if str(m.get("type", "")).endswith(".Pooling"):
                pooling_dir = model_dir / m.get("path", "1_Pooling")
    conf_file = pooling_dir / "config.json"
    if not conf_file.is_file():  # a bare transformers folder: sentence-transformers would mean-pool it
        hidden = json.loads((model_dir / "config.json").read_text()).get("hidden_size", 0)
        return Pooling("mean", int(hidden))
    conf = json.loads(conf_file.read_text())
    modes = [m for m in ("cls_token", "mean_tokens", "max_tokens", "mean_sqrt_len_tokens", "weightedmean_tokens",
                         "lasttoken") if conf.get(f"pooling_mode_{m}")]
    named = {"cls_token": "cls", "mean_tokens": "mean", "max_tokens": "max"}
    if len(modes) != 1 or modes[0] not in named:
        raise BackendUnavailable(
            f"embedding model {model_dir} pools with {modes or 'nothing'}; the onnx backend pools with exactly one of "
            "mean, cls or max; use embed.backend=torch"
        )
    return Pooling(named[modes[0]], int(conf["word_embedding_dimension"]))


def model_key(model_dir: Path) -> str:
    """A hash of every file of the model folder (names and bytes) and of the export recipe."""
    h = hashlib.sha256(EXPORT_RECIPE.encode())
    for f in sorted(p for p in model_dir.rglob("*") if p.is_file()):
        rel = f.relative_to(model_dir).as_posix()
        if rel.startswith(".") or rel == "README.md":  # documentation never changes the vectors
            continue
        h.update(f"\0{rel}\0{f.stat().st_size}\0".encode())
        with f.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()[:20]


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def is_valid(path: Path) -> bool:
    """True when the file is complete: its sidecar exists and its size and sha256 match."""
    sidecar = path.with_name(path.name + ".sha256")
    try:
        meta = json.loads(sidecar.read_text())
        return path.stat().st_size == meta["size"] and _file_sha256(path) == meta["sha256"]
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _tmp_path(final: Path) -> Path:
    fd, name = tempfile.mkstemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent)
    os.close(fd)
    return Path(name)


def _publish(tmp: Path, final: Path) -> None:
    """Moves a finished file into place, then writes its sidecar (also atomically): sidecar present = file whole."""
    meta = {"size": tmp.stat().st_size, "sha256": _file_sha256(tmp)}
    os.chmod(tmp, 0o644)  # mkstemp makes 0600; a shared cache is read by other users' actors too
    os.replace(tmp, final)
    side_tmp = _tmp_path(final)
    side_tmp.write_text(json.dumps(meta))
    os.chmod(side_tmp, 0o644)
    os.replace(side_tmp, final.with_name(final.name + ".sha256"))


def _build(final: Path, write: Callable[[Path], None]) -> None:
    """``write`` fills a temporary file beside ``final``, which is then published; a failure leaves no trace."""
    tmp = _tmp_path(final)
    try:
        write(tmp)
        _publish(tmp, final)
    finally:
        tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def _exclusive(lock_file: Path) -> Iterator[None]:
    import fcntl

    with lock_file.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _export_fp32(model_dir: Path, out: Path) -> None:
    """``torch.onnx.export`` of the bare transformer (last hidden state); pooling runs in numpy afterwards."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    # Eager attention: the plain matmul/softmax graph that onnxruntime fuses and quantises; the SDPA path traces too,
    # but adds nothing here.
    model = AutoModel.from_pretrained(str(model_dir), attn_implementation="eager")
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    sample = tokenizer(["a short sample", "a longer sample sentence to trace the export"], padding=True,
                       return_tensors="pt")
    names = [n for n in _INPUTS if n in sample]

    class LastHidden(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = model

        def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
            return self.inner(**dict(zip(names, tensors))).last_hidden_state

    # eval() on the wrapper: the TorchScript exporter restores the wrapper's own mode on every submodule afterwards.
    wrapper = LastHidden().eval()
    axes = {n: {0: "batch", 1: "tokens"} for n in [*names, "last_hidden_state"]}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # the exporter's deprecation and tracer warnings say nothing about our graph
        torch.onnx.export(
            wrapper, tuple(sample[n] for n in names), str(out), dynamo=False, input_names=names,
            output_names=["last_hidden_state"], dynamic_axes=axes, opset_version=OPSET,
        )


def _quantize_int8(src: Path, out: Path) -> None:
    """Dynamic int8 quantisation: weights per output channel, activations per batch at run time.

    Per-channel weights matter: per-tensor scales (quantize_dynamic's default) left MiniLM at a mean cosine of 0.95 to
    the float vectors on CloudWay text; per-channel, 0.994 (min 0.988), for the same file size (23 MB).
    Activation scales are per batch, so a text's int8 vector moves slightly with the batch it is in."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # The quantiser logs a line per tensor, and a pre-processing hint, on the root logger: mute them for this call.
    previous = logging.root.manager.disable
    logging.disable(logging.WARNING)
    try:
        quantize_dynamic(str(src), str(out), weight_type=QuantType.QInt8, per_channel=True)
    finally:
        logging.disable(previous)


def require_packages(variant: str, model_name: str, *names: str) -> None:
    """Imports ``names``, or raises one line naming the model and the missing package."""
    import importlib

    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:
            raise BackendUnavailable(
                f"embedding model {model_name}: embed.backend={variant} needs the package {name} (pip install {name})"
            ) from None


def ensure_onnx(model_dir: Path, cache_root: Path, variant: str, model_name: str) -> Path:
    """The cached ONNX file for ``variant`` ("onnx" or "onnx-int8"), exporting it first when absent or damaged."""
    if variant not in VARIANT_FILES:
        raise ValueError(f"unknown onnx variant {variant!r}")
    folder = cache_root / model_key(model_dir)
    fp32, target = folder / VARIANT_FILES["onnx"], folder / VARIANT_FILES[variant]
    if is_valid(target):
        return target
    require_packages(variant, model_name, "onnx", "onnxruntime")  # the exporter and the quantiser need onnx
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with _exclusive(folder / ".lock"):
            if is_valid(target):  # another process built it while we waited
                return target
            if not is_valid(fp32):
                log.info("exporting embedding model %s to ONNX in %s (once per model)", model_name, folder)
                _build(fp32, lambda tmp: _export_fp32(model_dir, tmp))
            if target != fp32:
                log.info("quantising embedding model %s to int8", model_name)
                _build(target, lambda tmp: _quantize_int8(fp32, tmp))
    except Exception as exc:  # noqa: BLE001 - any exporter or cache failure becomes one clear line
        raise OnnxExportError(
            f"embedding model {model_name}: ONNX export ({variant}) into {folder} failed: {type(exc).__name__}: {exc}"
        ) from exc
    return target


def load_tokenizer(model_dir: Path, max_len: int) -> tuple[Callable[[list[str]], list[list[int]]], int]:
    """``texts -> token ids`` (special tokens added, truncated to ``max_len``, unpadded) and the pad id.

    The model's ``tokenizer.json`` runs on the ``tokenizers`` library directly when the folder has one: the same ids
    as transformers' fast tokenizer built from that file (its normaliser, pre-tokeniser and post-processor), without
    importing transformers, which costs an embedding actor seconds of start-up (25 s on a busy 2-core machine, 0.1 s
    this way). A folder without it goes through ``AutoTokenizer``."""
    if (model_dir / "tokenizer.json").is_file():
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        tok.no_padding()
        tok.enable_truncation(max_len)
        conf_file = model_dir / "tokenizer_config.json"
        conf = json.loads(conf_file.read_text()) if conf_file.is_file() else {}
        pad = conf.get("pad_token")
        pad = pad.get("content") if isinstance(pad, dict) else pad
        pad_id = tok.token_to_id(pad) if isinstance(pad, str) else None
        return (lambda texts: [e.ids for e in tok.encode_batch(texts)]), int(pad_id or 0)
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(model_dir), use_fast=True)

    def tokenize(texts: list[str]) -> list[list[int]]:
        return hf(texts, truncation=True, max_length=max_len, padding=False, return_attention_mask=False,
                  return_token_type_ids=False)["input_ids"]

    return tokenize, int(hf.pad_token_id or 0)


class OnnxEncoder:
    """Runs an exported model with onnxruntime and the model's own fast tokenizer; mean/cls/max pooling, L2 norm."""

    def __init__(self, model_dir: Path, onnx_path: Path, pooling: Pooling, *, max_seq_length: int, batch_size: int,
                 num_threads: int, model_name: str, variant: str) -> None:
        require_packages(variant, model_name, "onnxruntime")
        import onnxruntime as ort

        self.pooling = pooling
        self.dim = self.pooling.dim
        self.batch_size = batch_size
        # int8 activations are quantised with one scale per batch, so a text's vector moves with its neighbours (cos
        # ~0.993 between a query alone and beside a long passage). Query-sized calls (serving groups a few questions)
        # run each text alone, so a question always gets the same vector; passages keep their batches for speed.
        self.solo_up_to = SOLO_UP_TO if variant == "onnx-int8" else 0
        st_conf = model_dir / "sentence_bert_config.json"
        self.lower = bool(st_conf.is_file() and json.loads(st_conf.read_text()).get("do_lower_case"))
        positions = json.loads((model_dir / "config.json").read_text()).get("max_position_embeddings") or max_seq_length
        self.max_len = min(max_seq_length, int(positions))
        self.tokenize, self.pad_id = load_tokenizer(model_dir, self.max_len)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = num_threads
        opts.inter_op_num_threads = 1
        # No busy-waiting between ops: onnxruntime's pool spins by default, which on a node whose cores the
        # conversion and planning workers share burns the CPU they need (and, oversubscribed, slows this session too).
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        try:
            self.session = ort.InferenceSession(str(onnx_path), opts, providers=["CPUExecutionProvider"])
        except Exception as exc:  # noqa: BLE001
            raise OnnxExportError(f"embedding model {model_name}: onnxruntime cannot load {onnx_path}: {exc}") from exc
        self.inputs = [i.name for i in self.session.get_inputs()]

    def encode(self, texts: list[str]) -> np.ndarray:
        """L2-normalised float32 rows in the order of ``texts``; batches are formed longest first, so each batch
        pads to lengths close to its own."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        if self.lower:
            texts = [t.lower() for t in texts]
        ids = self.tokenize(texts)
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
        step = 1 if len(texts) <= self.solo_up_to else self.batch_size
        for start in range(0, len(order), step):
            rows = order[start : start + step]
            width = max(len(ids[i]) for i in rows)
            input_ids = np.full((len(rows), width), self.pad_id, dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, i in enumerate(rows):
                input_ids[r, : len(ids[i])] = ids[i]
                mask[r, : len(ids[i])] = 1
            feeds = {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": np.zeros_like(input_ids)}
            hidden = self.session.run(None, {n: feeds[n] for n in self.inputs})[0]
            out[rows] = self._pool(hidden, mask)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.clip(norms, 1e-12, None)

    def _pool(self, hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
        # As sentence_transformers/models/Pooling.py: masked mean (count clamped at 1e-9), first token, masked max.
        if self.pooling.mode == "cls":
            return hidden[:, 0]
        m = mask[..., None].astype(hidden.dtype)
        if self.pooling.mode == "max":
            return np.where(m > 0, hidden, -1e9).max(axis=1)
        return (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)
