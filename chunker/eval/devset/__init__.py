"""A harder development set of our own: synthetic organisations with varied layouts, and questions whose evidence
is known by construction. Generated at test/eval time from a seed (no PDF is committed); nothing is drawn from
public benchmarks.

    python -m chunker.eval.devset OUT_DIR [--seed N]

writes ``OUT_DIR/pdf/*.pdf`` and ``OUT_DIR/queries.jsonl`` (``{qid, type, question, evidence: [{doc, text}],
answer, org}``, the format :mod:`jobs.evaluate` reads). Organisations (one module each): a pump maker (near-duplicate
specification sheets and catalogue, bullet lists in table cells), two listed companies' quarterly reports
(financial statements), a health trust (two-column leaflets, wrapped titles), a software vendor (long tables across
pages, versioned release notes), a freight carrier (rate cards with currency columns) and a city council (two-column
notices, fee tables).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

from chunker.eval.devset.common import Corpus, Question

ORGS = ("products", "finance", "health", "software", "freight", "council")


@dataclass
class DevSet:
    root: Path
    pdf_dir: Path
    queries: Path
    documents: int
    pages: int
    questions: list[Question]


def generate_devset(out_dir: str | Path, seed: int = 0, orgs: tuple[str, ...] = ORGS) -> DevSet:
    """Write the set under ``out_dir``; the same seed writes the same bytes."""
    import importlib

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    corpus = Corpus(out=out, rng=random.Random(seed))
    for name in orgs:
        module = importlib.import_module(f"chunker.eval.devset.{name}")
        # Each organisation draws from its own stream, so adding one never changes another's content.
        corpus.rng = random.Random(f"{seed}:{name}")
        module.build(corpus)
    path = corpus.write_queries()
    return DevSet(out, out / "pdf", path, len(corpus.docs), corpus.pages, corpus.questions)
