"""Passages past the embedder's token cap embedded whole (``embed.long_passages=windows``): the cut keeps every word
piece once and in order, a short passage is embedded as before, and a long table chunk's last rows reach its vector."""

from __future__ import annotations

import numpy as np
import pytest

from chunker.config import EmbedConfig
from chunker.index.embed import Embedder, resolve_model_path
from chunker.index.windows import cut, offsets_tokenizer
from chunker.types import Chunk

ROW = "Net sales | Three Months Ended July 1, 2023: ${a},090; Three Months Ended June 25, 2022: ${b},959\n"


def _chunk(text: str) -> Chunk:
    return Chunk("d-1", "d", ["d:1"], text, "", 1, 1, "table", "rules", "h", identity="")


@pytest.fixture(scope="module")
def spans():  # noqa: ANN201
    return offsets_tokenizer(resolve_model_path("all-MiniLM-L6-v2"))


def test_windows_cover_every_word_piece_once_in_order(spans) -> None:  # noqa: ANN001
    text = "".join(ROW.format(a=i, b=i + 1) for i in range(30)).strip()
    pieces = spans(text)
    windows = cut(text, pieces, 100)
    assert len(windows) > 1 and all(n <= 100 for _, n in windows)
    assert sum(n for _, n in windows) == len(pieces)
    # Read again, the windows give back exactly the passage's pieces.
    again = [text[s:e] for w, _ in windows for s, e in [(text.index(w) + a, text.index(w) + b) for a, b in spans(w)]]
    assert again == [text[s:e] for s, e in pieces]
    assert all(w.endswith("959") for w, _ in windows[:-1]), "a window ends where a row ends"


def test_a_passage_within_the_cap_is_one_window(spans) -> None:  # noqa: ANN001
    text = ROW.format(a=1, b=2)
    assert cut(text, spans(text), 254) == [(text, len(spans(text)))]


def test_the_last_rows_of_a_long_table_chunk_reach_its_vector() -> None:
    cfg = EmbedConfig(backend="torch")
    truncate, windows = Embedder(cfg), Embedder(cfg.model_copy(update={"long_passages": "windows"}))
    head = "".join(ROW.format(a=i, b=i + 1) for i in range(12))  # ~370 word pieces: past the cap of 256
    a = _chunk(head + "Operating lease liabilities, current | December 31, 2023: $1,234")
    b = _chunk(head + "Goodwill impairment charges | December 31, 2023: $5,678")
    ta, tb = truncate.encode_chunks([a, b])
    assert float(ta @ tb) > 0.999, "cut at the cap, the two chunks read the same"
    wa, wb = windows.encode_chunks([a, b])
    assert float(wa @ wb) < 0.99, "embedded whole, their last rows tell them apart"
    q = windows.encode(["goodwill impairment charges"])[0]
    assert float(q @ wb) > float(q @ wa)
    short = [_chunk(ROW.format(a=1, b=2)), _chunk("Cash and cash equivalents were $24,687 million.")]
    assert np.allclose(truncate.encode_chunks(short), windows.encode_chunks(short), atol=1e-6)
