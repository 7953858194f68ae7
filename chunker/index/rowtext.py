"""Table rows written shorter for the embedder: each column path once, not once per figure.

A table row is stored as a self-contained sentence (chunker/contract.py, ``figure_row_sentence``): every figure
carries its column path, so a row read alone says which period and unit a figure is for. That is right for the
reader and for BM25 (which has no length cap), and costly for the embedder: all-MiniLM-L6-v2 reads 256 word
pieces, and a column path such as "Three Months Ended July 1, 2023" costs ~9 of them per figure. On
financebench-dev 54 % of table chunks ran past the cap (text chunks 19 %), cut after ~83 % of their characters on
the median: the last rows, often the totals a question asks for, were never embedded.

Here a run of rows with the same column paths keeps the paths on its first row only; the later rows read
``label | figure; figure; figure``, as a printed table does. Only lines that parse as such a row in full are
touched; everything else passes as it is. The stored text, the BM25 text and the hit a reader gets do not change.

Off by default (``embed.compact_rows``): on financebench-dev it won 9 questions and lost 4, on the generated set's
near-identical quarterly reports it lost 10 and won 1. The repeated paths carry the period words, and those are what
tell one quarter's table from the next (QUALITY.md, "Measured and not kept").
"""

from __future__ import annotations

import re

# A figure as a row sentence writes it: optional sign or currency, digits, parentheses, percent; or a dash / n/m
# standing for an empty cell. Short: a value with words in it is not a figure and the line is left alone.
_FIGURE = re.compile(r"^[(\[]?[-–—−+]?[$€£¥₹]?\s?[-–—−]?\(?\d[\d,]*(?:\.\d+)?\)?\s?(?:%|pts?|bps|x)?[)\]]?\*?$"
                     r"|^(?:[-–—−]{1,2}|n/?[am]|nm|\*)$", re.I)


def _split_row(line: str) -> tuple[str, list[str], list[str]] | None:
    """``label | ... | path: figure; path: figure`` -> (lead, paths, figures), or None when the line is not that."""
    lead, sep, body = line.rpartition(" | ")
    if not sep or not lead.strip():
        return None
    paths, figures = [], []
    for part in body.split("; "):
        path, colon, value = part.rpartition(": ")
        value = value.strip().rstrip(".")
        if not colon or not path.strip() or not _FIGURE.match(value):
            return None
        paths.append(path.strip())
        figures.append(value)
    return lead, paths, figures


def compact_rows(text: str) -> str:
    """``text`` with each run of table rows sharing one set of column paths written with the paths once."""
    out, last_paths = [], None
    for line in text.split("\n"):
        row = _split_row(line)
        if row is None:
            out.append(line)
            last_paths = None
            continue
        lead, paths, figures = row
        if paths == last_paths:
            out.append(f"{lead} | {'; '.join(figures)}")
        else:
            out.append(line)
            last_paths = paths
    return "\n".join(out)
