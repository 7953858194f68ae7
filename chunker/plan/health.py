"""Chunk health: whether a corpus chunked well, seen without any question set.

What a reader of the chunks notices first, counted: how big the chunks are (a histogram), how many are fragments
(under :data:`FRAGMENT_CHARS` characters of text, breadcrumb included: what the embedder sees), how many are a
table's lead-in left alone (the sentence that says what a table is, in a chunk without a figure, ranks first and
hands the reader nothing), how many tables went out under placeholder headers ("Column 2: 3,417") and how many
without any column path, and the documents worst by each. A regression in extraction or planning shows here before
any evaluation runs.

A document whose whole text is shorter than :data:`FRAGMENT_CHARS` is not counted for fragments: it cannot be
chunked bigger.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from chunker.contract import SEGMENT_STRIDE
from chunker.plan.leadin import lead_in_tables
from chunker.types import Chunk, Element

FRAGMENT_CHARS = 250
# Histogram bin edges, in characters of chunk text; the last bin is open.
BINS = (0, 100, 250, 500, 750, 1000, 1250, 1500, 2000)
WORST = 5

_COLUMN_N = re.compile(r"(?:^|[;|]\s*)Column \d+:")
# A "head: value" pair whose head is real text (not a placeholder): the row carries a column path.
_PAIR = re.compile(r"(?:^|[;|])\s*(?![\s;|])(?!Column \d+:)[^;|:]*[^\s;|:][^;|:]*:\s+\S")


@dataclass
class DocHealth:
    """One document's counters."""

    source: str
    chunks: int = 0
    chars: int = 0
    fragments: int = 0
    lead_in_only: int = 0
    tables: int = 0
    column_n_tables: int = 0
    pathless_tables: int = 0

    @property
    def counted_fragments(self) -> int:
        """Fragments that count: none for a document too short to make a chunk of the minimum size."""
        return self.fragments if self.chars >= FRAGMENT_CHARS else 0


@dataclass
class Health:
    """Counters over a set of documents; :meth:`add` takes one document at a time."""

    sizes: list[int] = field(default_factory=lambda: [0] * len(BINS))
    docs: dict[str, DocHealth] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=lambda: {"fragments": [], "lead_in_only": [],
                                                                     "column_n_tables": []})

    def add(self, doc_id: str, chunks: list[Chunk], elements: list[Element], source: str = "") -> None:
        """Count one document (all its chunks and elements; parts of one document may come in several calls)."""
        d = self.docs.setdefault(doc_id, DocHealth(source or (chunks[0].source if chunks else "") or doc_id))
        by_id = {e.element_id: e for e in elements}
        order = sorted(elements, key=lambda e: e.ordinal)
        leads = {order[n].element_id for n in lead_in_tables(order)}
        for c in chunks:
            n = len(c.text)
            d.chunks += 1
            d.chars += n
            self.sizes[_bin(n)] += 1
            if n < FRAGMENT_CHARS:
                d.fragments += 1
                _example(self.examples["fragments"], c.text)
            if _lead_in_only(c, by_id, leads):
                d.lead_in_only += 1
                _example(self.examples["lead_in_only"], c.text)
        for rows in _tables(order).values():
            d.tables += 1
            if any(_COLUMN_N.search(r.text) for r in rows):
                d.column_n_tables += 1
                _example(self.examples["column_n_tables"], rows[0].text)
            if not any(_PAIR.search(r.text) for r in rows):
                d.pathless_tables += 1

    def report(self) -> dict[str, Any]:
        docs = list(self.docs.values())
        chunks = sum(d.chunks for d in docs)
        counted = sum(d.chunks for d in docs if d.chars >= FRAGMENT_CHARS)
        fragments = sum(d.counted_fragments for d in docs)
        tables = sum(d.tables for d in docs)
        lead = sum(d.lead_in_only for d in docs)
        col_n = sum(d.column_n_tables for d in docs)
        pathless = sum(d.pathless_tables for d in docs)

        def worst(key: str, share_of: str | None = None) -> list[dict[str, Any]]:
            rows = [d for d in docs if getattr(d, key)]
            rows.sort(key=lambda d: (-getattr(d, key), d.source))
            return [{"source": d.source, key: getattr(d, key), **({share_of: getattr(d, share_of)} if share_of else {})}
                    for d in rows[:WORST]]

        return {
            "documents": len(docs),
            "chunks": chunks,
            "histogram": {"edges": list(BINS), "counts": list(self.sizes)},
            "fragment_chars": FRAGMENT_CHARS,
            "fragments": fragments,
            "fragment_share": round(fragments / counted, 4) if counted else 0.0,
            "lead_in_only": lead,
            "tables": tables,
            "column_n_tables": col_n,
            "column_n_share": round(col_n / tables, 4) if tables else 0.0,
            "pathless_tables": pathless,
            "pathless_share": round(pathless / tables, 4) if tables else 0.0,
            "worst": {
                "fragments": worst("fragments", "chunks"),
                "lead_in_only": worst("lead_in_only", "chunks"),
                "column_n_tables": worst("column_n_tables", "tables"),
                "pathless_tables": worst("pathless_tables", "tables"),
            },
            "examples": {k: list(v) for k, v in self.examples.items()},
        }


def _bin(n: int) -> int:
    i = 0
    while i + 1 < len(BINS) and n >= BINS[i + 1]:
        i += 1
    return i


def _example(bucket: list[str], text: str, keep: int = 5, width: int = 160) -> None:
    if len(bucket) < keep:
        bucket.append(re.sub(r"\s+", " ", text).strip()[:width])


def _lead_in_only(c: Chunk, by_id: dict[str, Element], leads: set[str]) -> bool:
    """A chunk whose content is prose ending in (a line of) a lead-in whose table starts in another chunk, holding
    no figure row of its own: the sentence that says what a table is, without the table."""
    els = [by_id[i] for i in c.element_ids if i in by_id]
    content = [e for e in els if e.kind != "heading"]
    if not content or any(e.kind not in ("paragraph", "list") for e in content):
        return False
    run = [e for e in content if e.element_id in leads]
    return content[-1].element_id in leads and sum(len(e.text) for e in content) <= 2 * sum(len(e.text) for e in run)


def _tables(elements: Iterable[Element]) -> dict[tuple[int, str], list[Element]]:
    """Table rows by table: a group name is unique within one segment's parse, so the key holds the segment."""
    out: dict[tuple[int, str], list[Element]] = {}
    for e in elements:
        if e.kind == "table_row":
            out.setdefault((e.ordinal // SEGMENT_STRIDE, e.group), []).append(e)
    return out


def format_health(r: dict[str, Any]) -> str:
    """The report as plain text: the headline shares, the histogram as bars, the worst documents."""
    lines = ["== chunk health ==",
             f"documents {r['documents']}  chunks {r['chunks']}",
             f"fragments (< {r['fragment_chars']} chars): {r['fragments']} ({100 * r['fragment_share']:.1f}%)",
             f"lead-in-only chunks: {r['lead_in_only']}",
             f"tables: {r['tables']}  under 'Column N': {r['column_n_tables']} ({100 * r['column_n_share']:.1f}%)  "
             f"without a column path: {r['pathless_tables']} ({100 * r['pathless_share']:.1f}%)",
             "chunk size (chars):"]
    edges, counts = r["histogram"]["edges"], r["histogram"]["counts"]
    top = max(counts, default=0) or 1
    for i, n in enumerate(counts):
        label = f"{edges[i]}-{edges[i + 1] - 1}" if i + 1 < len(edges) else f"{edges[i]}+"
        lines.append(f"  {label:>10}  {n:6d}  {'#' * round(40 * n / top)}")
    for key, rows in r["worst"].items():
        if rows:
            lines.append(f"worst by {key.replace('_', ' ')}:")
            lines += ["  " + ", ".join(f"{k} {v}" for k, v in row.items() if k != "source") + f"  {row['source']}"
                      for row in rows]
    for key, texts in r.get("examples", {}).items():
        if texts:
            lines.append(f"examples of {key.replace('_', ' ')}:")
            lines += [f"  | {t}" for t in texts]
    return "\n".join(lines)
