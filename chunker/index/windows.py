"""Passages longer than the embedder's token cap, embedded whole: cut into windows of at most the cap, each window
embedded, the vectors averaged by their word-piece counts.

A sentence-transformers model reads ``max_seq_length`` word pieces (all-MiniLM-L6-v2: 256) and drops the rest. A
table chunk writes every figure with its column path, so it reaches the cap sooner than prose: on financebench-dev
54 % of table chunks passed it and their last rows, often the totals a question asks for, were never embedded
(QUALITY.md). Mean pooling over one pass is a count-weighted mean of the tokens' vectors; over windows it is the
same mean with each token read in its own window's context, so the whole passage counts and no chunk boundary has
to follow the embedder. The stored text, BM25's text and the hits do not change.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from chunker.backends.base import BackendUnavailable

# Word pieces of each window's own: [CLS] and [SEP] take two places of the cap.
SPECIAL_TOKENS = 2


def offsets_tokenizer(model_dir: str) -> Callable[[str], list[tuple[int, int]]]:
    """``text -> (start, end)`` character spans of its word pieces, without special tokens or truncation, from the
    model's own ``tokenizer.json`` (the same pieces the encoder reads)."""
    path = Path(model_dir) / "tokenizer.json"
    if not path.is_file():
        raise BackendUnavailable(
            f"embed.long_passages=windows needs the model's tokenizer.json to cut passages at word pieces; "
            f"{model_dir} has none (set embed.long_passages=truncate)"
        )
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(path))
    tok.no_truncation()
    tok.no_padding()
    return lambda text: [tuple(o) for o in tok.encode(text, add_special_tokens=False).offsets]


def cut(text: str, spans: list[tuple[int, int]], size: int) -> list[tuple[str, int]]:
    """``text`` as consecutive windows of at most ``size`` word pieces, each with its piece count; a window ends at
    the last line break inside it when that keeps at least half of it (a table row is read whole), else at a word
    piece. One window for a text within ``size``."""
    if len(spans) <= size:
        return [(text, max(1, len(spans)))]
    out: list[tuple[str, int]] = []
    start = 0
    while start < len(spans):
        end = min(start + size, len(spans))
        if end < len(spans):
            for k in range(end - 1, start + size // 2, -1):
                if "\n" in text[spans[k - 1][1]:spans[k][0]]:
                    end = k
                    break
        out.append((text[spans[start][0]:spans[end - 1][1]], end - start))
        start = end
    return out


def encode_windows(texts: list[str], encode: Callable[[list[str]], np.ndarray],
                   spans_of: Callable[[str], list[tuple[int, int]]], max_seq_length: int) -> np.ndarray:
    """One L2-normalised vector per text: ``encode`` (normalised rows) of each window, averaged by piece counts."""
    size = max(1, max_seq_length - SPECIAL_TOKENS)
    pieces = [cut(t, spans_of(t), size) for t in texts]
    flat = [w for p in pieces for w, _ in p]
    vecs = encode(flat)
    out = np.zeros((len(texts), vecs.shape[1] if len(vecs) else 0), dtype=np.float32)
    row = 0
    for i, p in enumerate(pieces):
        weights = np.array([n for _, n in p], dtype=np.float32)
        out[i] = (vecs[row:row + len(p)] * weights[:, None]).sum(axis=0) / weights.sum()
        row += len(p)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.clip(norms, 1e-12, None)
