"""Synthetic PDF corpora for benchmarks: many documents whose page counts follow a heavy-tailed distribution.

Real corpora are mostly short documents with a few very long ones (manuals, reports, standards), and the long ones
are what breaks a naive pipeline. The page counts here come from a clipped lognormal (seeded), and specific lengths
(e.g. 500 and 2,000 pages) can be forced in.

The PDFs are real (fpdf2, core fonts) so rendering and the text layer are exercised, but cheap to make: paragraphs
are wrapped once into a pool of lines, and each page is a heading, a few paragraphs and sometimes a short list drawn
from that pool, placed with ``text()`` (no per-page line breaking). A 2,000-page document takes a few seconds.
"""

from __future__ import annotations

import math
import random
import textwrap
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from fpdf import FPDF

# Fixed metadata: the same seed gives the same bytes, hence the same doc_id, run after run.
_CREATED = datetime(2024, 1, 1, tzinfo=timezone.utc)
_WORDS = (
    "system pipeline document page model engine context batch segment chunk heading table figure token latency "
    "throughput cluster worker actor render parse plan embed index query storage network memory budget policy "
    "service customer account billing invoice contract warranty safety maintenance inspection procedure valve "
    "pressure sensor module firmware update release version schedule report audit review quality standard clause"
).split()
_LINE_CHARS = 92  # Helvetica 10 pt over 170 mm holds about this many characters
_LINE_MM = 5.0


@dataclass(frozen=True)
class SyntheticDoc:
    path: str
    pages: int
    seed: int


def page_counts(
    n_docs: int,
    seed: int = 0,
    *,
    median: float = 12.0,
    sigma: float = 1.1,
    min_pages: int = 1,
    max_pages: int = 1000,
    include: tuple[int, ...] = (),
) -> list[int]:
    """``n_docs`` page counts: the forced lengths in ``include`` first, the rest lognormal(ln median, sigma), clipped.

    The order is shuffled under the seed so long documents do not always come first (or last) in a run.
    """
    if n_docs < len(include):
        raise ValueError(f"n_docs={n_docs} is smaller than the {len(include)} forced lengths {list(include)}")
    rng = random.Random(seed)
    counts = list(include)
    while len(counts) < n_docs:
        x = rng.lognormvariate(math.log(median), sigma)
        counts.append(int(min(max_pages, max(min_pages, round(x)))))
    rng.shuffle(counts)
    return counts


def _paragraph_pool(rng: random.Random, size: int = 48) -> list[list[str]]:
    """Pre-wrapped paragraphs of 3-9 lines: wrapping once is what keeps a 2,000-page PDF fast to write."""
    pool = []
    for _ in range(size):
        n_words = rng.randint(40, 120)
        words = [rng.choice(_WORDS) for _ in range(n_words)]
        words[0] = words[0].capitalize()
        pool.append(textwrap.wrap(" ".join(words) + ".", _LINE_CHARS))
    return pool


class _Pdf(FPDF):
    def __init__(self) -> None:
        super().__init__(format="A4", unit="mm")
        self.set_creation_date(_CREATED)
        self.set_producer("chunker.eval.synthetic")
        self.set_auto_page_break(False)
        self.set_compression(True)


def write_document(path: str | Path, pages: int, seed: int = 0, title: str = "Synthetic manual") -> Path:
    """Write one PDF of ``pages`` pages; deterministic in (pages, seed, title)."""
    rng = random.Random(f"{seed}:{pages}:{title}")
    pool = _paragraph_pool(rng)
    pdf = _Pdf()
    section = 0
    for p in range(1, pages + 1):
        pdf.add_page()
        y = 25.0
        if p == 1:
            pdf.set_font("Helvetica", "B", 20)
            pdf.text(20, y, title)
            y += 12
        # A new section every 1-3 pages gives the heading path something to carry across batches.
        if p == 1 or rng.random() < 0.45:
            section += 1
            pdf.set_font("Helvetica", "B", 14)
            pdf.text(20, y, f"{section}. {rng.choice(_WORDS).capitalize()} {rng.choice(_WORDS)}")
            y += 9
        pdf.set_font("Helvetica", "B", 11)
        pdf.text(20, y, f"{section}.{p} {rng.choice(_WORDS).capitalize()} {rng.choice(_WORDS)} (page {p})")
        y += 7
        pdf.set_font("Helvetica", "", 10)
        while y < 250:
            lines = pool[rng.randrange(len(pool))]
            if y + len(lines) * _LINE_MM > 272:
                break
            for line in lines:
                pdf.text(20, y, line)
                y += _LINE_MM
            y += 3
            if rng.random() < 0.15 and y < 240:
                for i in range(rng.randint(2, 4)):
                    pdf.text(24, y, f"- {rng.choice(_WORDS)} {rng.choice(_WORDS)} {rng.choice(_WORDS)} item {i + 1}")
                    y += _LINE_MM
                y += 3
        pdf.set_font("Helvetica", "", 8)
        pdf.text(180, 287, f"Page {p}")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(out))
    return out


def make_corpus(
    out_dir: str | Path,
    n_docs: int,
    seed: int = 0,
    *,
    include: tuple[int, ...] = (),
    median: float = 12.0,
    sigma: float = 1.1,
    max_pages: int = 1000,
) -> list[SyntheticDoc]:
    """Write (or reuse) ``n_docs`` PDFs under ``out_dir``; a file already there with the same name is kept, since
    names carry (seed, index, pages) and the bytes are deterministic."""
    out = Path(out_dir)
    docs = []
    counts = page_counts(n_docs, seed, median=median, sigma=sigma, max_pages=max_pages, include=include)
    for i, n in enumerate(counts):
        path = out / f"synth-s{seed}-{i:04d}-{n}p.pdf"
        if not path.exists():
            write_document(path, n, seed=seed * 100_003 + i, title=f"Synthetic manual {i}")
        docs.append(SyntheticDoc(path=str(path), pages=n, seed=seed))
    return docs
