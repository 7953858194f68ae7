"""The dry run's stand-ins for the model stages: a converter that answers ready Markdown at once, and an embedder that
returns unit vectors from a hash, so that everything else the pipeline does (intake, the plan stage, the driver's
decoding, assembly, verdict, writer, ledger and status writes, the Milvus load) runs for real and is what a run of
them measures.

Both are stage subclasses handed to :func:`jobs.ingest.run_ingest` (``convert_stage``, ``embed_stage``), so they run
in the same Ray actors, with the same reservations and the same run-folder writes (attempt markers, batch parts) as
the real stages. The Markdown follows the contract (:mod:`chunker.contract`): a page marker, a heading now and then,
and a few paragraphs per page (about 2,200 characters, ~3 chunks of 800 characters), deterministic in
(doc_id, page); the overlap batch of a later segment is converted as context only, as a model's would be.
``delay_s`` holds each batch that long (a GPU's time, costing no CPU here) when a run should keep documents in
flight; 0 answers at once.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
from typing import Any

import numpy as np

from chunker.contract import page_marker
from chunker.types import BatchContext, ConvertedBatch, SegmentJob
from jobs.stages import ConvertStage, EmbedStage

_WORDS = (
    "pressure valve inspection schedule contract clause warranty service invoice billing account module firmware "
    "update release report audit review quality standard system pipeline document engine context segment heading "
    "table figure latency throughput cluster worker storage network memory budget policy customer safety sensor"
).split()
PARAGRAPHS_PER_PAGE = 3
WORDS_PER_PARAGRAPH = 105  # ~730 characters


def page_markdown(doc_id: str, page: int) -> tuple[str, str | None]:
    """The Markdown of one page and the heading it opens (None: it continues the previous section)."""
    rng = random.Random(f"{doc_id}:{page}")
    heading = None
    parts = [page_marker(page)]
    if page == 1 or rng.random() < 0.4:
        heading = f"{page}. {rng.choice(_WORDS).capitalize()} {rng.choice(_WORDS)}"
        parts.append(f"## {heading}")
    for _ in range(PARAGRAPHS_PER_PAGE):
        words = rng.choices(_WORDS, k=WORDS_PER_PARAGRAPH)
        parts.append(" ".join(words).capitalize() + ".")
    return "\n\n".join(parts) + "\n", heading


class InstantConverter:
    """Converter protocol: one segment's batches of ready Markdown, no model and no rendering."""

    name = "instant"

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s

    def needs_images(self) -> bool:
        return False

    async def convert(self, job: SegmentJob, images: Any) -> list[ConvertedBatch]:
        out = []
        heading_path: list[str] = []
        for index, (a, b) in enumerate(job.batches()):
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            pages = []
            for p in range(a, b + 1):
                text, heading = page_markdown(job.doc_id, p)
                pages.append(text)
                if heading:
                    heading_path = [heading]
            markdown = "".join(pages)
            ctx = BatchContext(tail=markdown[-300:], heading_path=list(heading_path))
            out.append(ConvertedBatch(
                doc_id=job.doc_id, segment_index=job.segment_index, batch_index=index, page_start=a, page_end=b,
                markdown=markdown, context_out=ctx.to_json(), model="instant", prompt_version="dryrun",
                input_tokens=0, output_tokens=len(markdown) // 4, finish_reason="stop",
                context_only=b < job.page_start))
        return out


class InstantConvertStage(ConvertStage):
    """The conversion actor with :class:`InstantConverter` (``DELAY_S`` per batch; a subclass sets another)."""

    DELAY_S = 0.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.converter = InstantConverter(self.DELAY_S)


def delayed_convert_stage(delay_s: float) -> type:
    """:class:`InstantConvertStage` holding each batch ``delay_s`` seconds (Ray pickles the class by value)."""
    if not delay_s:
        return InstantConvertStage
    return type(f"InstantConvertStage{int(delay_s * 1000)}ms", (InstantConvertStage,), {"DELAY_S": delay_s})


def hash_vectors(ids: list[str], dim: int) -> np.ndarray:
    """Unit float32 vectors, one per id, from the id's hash: the shape and bytes of real embeddings, no model."""
    out = np.empty((len(ids), dim), dtype=np.float32)
    for i, key in enumerate(ids):
        seed = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "little")
        out[i] = np.random.default_rng(seed).standard_normal(dim, dtype=np.float32)
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out


class InstantEmbedStage(EmbedStage):
    """The embedding actor with :func:`hash_vectors` in place of the model (dimension: the configured model's)."""

    def __init__(self, cfg: Any) -> None:
        from chunker.index.embed import Embedder

        self.dim = Embedder.dimension(cfg.embed)
        self.embedder = self  # EmbedStage calls self.embedder.encode_chunks(chunks)

    def encode_chunks(self, chunks: list[Any]) -> np.ndarray:
        # What EmbedStage asks of the embedder since chunks carry their document's identity; the text alone is
        # hashed (the identity prefix would only change which random vector a chunk gets).
        return self.encode([c.text for c in chunks])

    def encode(self, texts: list[str]) -> np.ndarray:
        return hash_vectors(texts, self.dim)
