"""Table rows written shorter: each column path once per run of rows, not once per figure.

A table row is stored as a self-contained sentence (chunker/contract/markup.py, ``figure_row_sentence``): every figure
carries its column path, so a row read alone says which period and unit a figure is for. That is right for the
reader and for BM25 (which has no length cap), and costly for the embedder: all-MiniLM-L6-v2 reads 256 word
pieces, and a column path such as "Three Months Ended July 1, 2023" costs ~9 of them per figure. On
financebench-dev 54 % of table chunks ran past the cap (text chunks 19 %), cut after ~83 % of their characters on
the median: the last rows, often the totals a question asks for, were never embedded.

Here a run of rows with the same column paths keeps the paths on its first row only; the later rows read
``label | figure; figure; figure``, as a printed table does. Only lines that parse as such a row in full are
touched; everything else passes as it is. Two users, both off by default:

* ``embed.compact_rows``: only the embedded passage is compact (the stored text, BM25's text and hits are not).
  Financebench-dev won 9 questions and lost 4, the generated set's near-identical quarterly reports lost 10 and won
  1: the repeated paths carry the period words, and those tell one quarter's table from the next.
* ``planner.compact_rows``: the chunk text itself, rows packed by their written size (twice the rows a chunk).
  Financebench-dev won 5 and lost 9, doc@5 0 / 1 (QUALITY.md, "Measured and not kept").
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


def row_paths(line: str) -> list[str] | None:
    """The column paths of a row sentence, or None when ``line`` is not one that can be written compactly."""
    row = _split_row(line)
    return row[1] if row else None


def compact_line(line: str, paths_before: list[str] | None) -> str:
    """``line`` written without its column paths when they are ``paths_before`` (the row above it in a run)."""
    row = _split_row(line)
    if row is None or paths_before is None or row[1] != paths_before:
        return line
    return f"{row[0]} | {'; '.join(row[2])}"


def compact_rows(text: str) -> str:
    """``text`` with each run of table rows sharing one set of column paths written with the paths once."""
    out, last_paths = [], None
    for line in text.split("\n"):
        row = _split_row(line)
        out.append(f"{row[0]} | {'; '.join(row[2])}" if row and row[1] == last_paths else line)
        # A run goes on while the paths repeat; a line that is no row, or a row with other paths, starts anew.
        last_paths = row[1] if row else None
    return "\n".join(out)
