"""The cross-encoder behind an optional rerank of text and table questions (:mod:`chunker.index.retrieval`)."""

from __future__ import annotations

import os
from typing import Protocol, runtime_checkable

from chunker.errors import SetupError


class RerankerUnavailable(SetupError):
    """Reranking was asked for but no cross-encoder can be loaded."""


@runtime_checkable
class Reranker(Protocol):
    """Scores passages against a question; higher is more relevant."""

    def score(self, question: str, passages: list[str]) -> list[float]: ...


class CrossEncoderReranker:
    """A sentence-transformers CrossEncoder loaded from a local folder (weights are never downloaded)."""

    def __init__(self, model_path: str, device: str = "cpu", batch_size: int = 32) -> None:
        if not os.path.isdir(model_path):
            raise RerankerUnavailable(
                f"retrieval.reranker_model {model_path!r} is not a local folder; download a CrossEncoder "
                "(e.g. cross-encoder/ms-marco-MiniLM-L-6-v2) and point retrieval.reranker_model at it"
            )
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import CrossEncoder

        self.model = CrossEncoder(model_path, device=device)
        self.batch_size = batch_size

    def score(self, question: str, passages: list[str]) -> list[float]:
        if not passages:
            return []
        scores = self.model.predict(
            [(question, p) for p in passages], batch_size=self.batch_size, show_progress_bar=False
        )
        return [float(s) for s in scores]
