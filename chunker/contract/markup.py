"""The Markdown contract's grammar and writing side: the patterns every line is matched against, the writers every
converter writes through (:func:`page_marker`, :func:`table_block`, :func:`figure_row_sentence`, :func:`figure_line`,
:func:`table_row_sentence`) and the small predicates converters and the parser share (:func:`is_figure`,
:func:`row_labelled`, :func:`not_a_heading`, :func:`says_nothing`).

Kept apart from the parser (:mod:`chunker.contract.parse`) so converters that only write the contract read one short
module, and the parser imports the grammar from here rather than restating it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from chunker.tabletext import UNIT, unit_text

PAGE_MARKER = re.compile(r"^\s*<!--\s*page\s+(\d+)\s*-->\s*$", re.I)
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
LIST_ITEM = re.compile(r"^(\s*)([-*+•]|\d{1,3}[.)])\s+(.*)$")
_TABLE_OPEN = re.compile(r"^\s*<!--\s*table(\s+continued)?\s*-->\s*$", re.I)
_TABLE_CLOSE = re.compile(r"^\s*<!--\s*/table\s*-->\s*$", re.I)
_FIGURE = re.compile(r"^!\[(.*?)\]\(figure\)\s*(?:<!--\s*bbox\s+([\d.\s-]+?)\s*-->)?\s*$", re.I)
_COMMENT = re.compile(r"^\s*<!--.*-->\s*$")
PIPE_SEPARATOR = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
# Text that ends a sentence (or a clause a list or table follows), and text that can only be the rest of one: it
# starts in lower case and is not a lettered item ("b. Awards") nor a name written with a lower-case first letter
# ("iPhone"). A paragraph cut by a page or batch break is joined where the first part does not end and the second
# can only go on (pdf-text's page writer; the parser at a batch boundary).
SENTENCE_END = re.compile(r"[.!?:;]['\"”’)]?$")
REST_OF_SENTENCE = re.compile(r"^(?![a-z][.)]\s)(?![a-z]+[A-Z])[a-z]")


# --- writers ---------------------------------------------------------------------------------------------------
TABLE_OPEN = "<!-- table -->"
TABLE_CONTINUED = "<!-- table continued -->"
TABLE_CLOSE = "<!-- /table -->"


def page_marker(page: int) -> str:
    """The line that says: what follows is on 1-based page ``page``."""
    return f"<!-- page {page} -->"


def page_numbers(markdown: str) -> list[int]:
    """The pages named by the page markers of ``markdown``, in order of appearance."""
    return [int(m.group(1)) for line in markdown.splitlines() if (m := PAGE_MARKER.match(line))]


def table_block(rows: Iterable[str], continued: bool = False) -> list[str]:
    """The lines of a row-sentence table block (one self-contained sentence per row)."""
    return [TABLE_CONTINUED if continued else TABLE_OPEN, *rows, TABLE_CLOSE]


def figure_row_sentence(label_path: list[str], cells: list[tuple[list[str], str]], unit: str = "",
                        unit_each: bool = False) -> str:
    """A table row of figures as one sentence in which every figure carries its column path and unit:
    ``Total net sales | Three Months Ended April 1, 2023 | $ in millions: 94,836; Three Months Ended ...``.

    ``label_path``: the row label under its section labels, outermost first ("Operating expenses" > "Research and
    development"); ``cells``: (column path top down, figure) per column, empty figures left out. The unit is
    written once, after the row label, and holds for every figure of the row (``unit_each``: after every figure's
    path instead, as in the example above; longer for the same facts)."""
    label = " > ".join(p.strip().rstrip(":").strip() for p in label_path if p.strip().rstrip(":").strip())
    unit = unit_text(unit) if unit.strip() else ""
    figs = []
    for path, value in cells:
        if not value.strip():
            continue
        head = " > ".join(p for p in path if p)
        if unit and unit_each:
            head = f"{head} | {unit}" if head else unit
        figs.append(f"{head}: {value.strip()}" if head else value.strip())
    lead = f"{label} | {unit}" if unit and not unit_each and label else (label or (unit if not unit_each else ""))
    body = "; ".join(figs)
    return f"{lead} | {body}" if lead and body else (lead or body)


FIGURE_PLACEHOLDER = "Image"  # what a figure with no description is written as
# Words a converter or model writes for a figure it could not describe.
_PLACEHOLDERS = {"", FIGURE_PLACEHOLDER.casefold(), "figure", "picture", "graphic", "photo", "logo", "chart"}


def says_nothing(figure_text: str) -> bool:
    """Whether a figure's text is only a placeholder: no description, nothing a question could match."""
    return figure_text.strip().strip(".:").casefold() in _PLACEHOLDERS


def figure_line(description: str, bbox: Iterable[float] | None = None) -> str:
    """A figure: its description (brackets made safe) and, where known, its box in PDF points."""
    text = (description or FIGURE_PLACEHOLDER).replace("]", ")").replace("[", "(")
    box = f" <!-- bbox {' '.join(str(v) for v in bbox)} -->" if bbox is not None else ""
    return f"![{text}](figure){box}"


def table_row_sentence(headers: list[str], cells: list[str]) -> str:
    """One self-contained sentence for a table row: every value with its column header. A column without a header
    gets no placeholder ("Column 2" names no meaning and matches every question alike): its value stands bare, and
    in a table with no header at all the first cell labels the rest ("2024: 3,417", a two-column schedule)."""
    filled = [((headers[i] if i < len(headers) else "").strip().rstrip(":").rstrip(), c) for i, c in enumerate(cells) if c]
    if not any(h for h, _ in filled) and len(filled) >= 2:
        parts = [f"{filled[0][1]}: " + "; ".join(c for _, c in filled[1:])]
    else:
        parts = [f"{h}: {c}" if h else c for h, c in filled]
    return "; ".join(parts) + ("." if parts and not parts[-1].endswith(".") else "")


# A figure as tables print it: sign, currency, digits with separators, decimals, parentheses, percent, a footnote
# star; or a dash / "n/m" standing for an empty value.
_FIGURE_CELL = re.compile(r"^[(\[]?[-–—−+]?[$€£¥₹]?\s?[-–—−]?\(?\d[\d,]*(?:\.\d+)?\)?\s?(?:%|pts?|bps|x)?[)\]]?\*?$"
                     r"|^(?:[-–—−]{1,2}|n/?[am]|nm|\*)$", re.I)


# A line set like a heading that only qualifies what follows: "(unaudited)", "(in millions, except per share
# data)", "In thousands", "Unaudited". As a heading it would stand in the breadcrumb of every chunk below it and
# leave a chunk of its own; it is a paragraph (a table's unit line the converter did not claim).
_QUALIFIER = re.compile(r"^\(.*\)$|^(?:\$\s*)?(?:in\s+)?(?:thousands|millions|billions)\b.{0,60}$|^unaudited$", re.I | re.S)


def not_a_heading(text: str) -> bool:
    """Whether a heading line is only a parenthetical or a unit line (see ``_QUALIFIER``)."""
    t = text.strip().strip("*_").strip()
    return bool(_QUALIFIER.match(t)) and len(t) <= 80


# A table of contents' own title. Its entries are read as links, not sections (pdf-text skips them): over what
# follows it would head the whole document, one level above every real section (an OPM report's 253 chunks all
# read "Contents > ...").
_CONTENTS_TITLE = re.compile(r"^(?:table\s+of\s+)?contents$", re.I)


def is_contents_title(text: str) -> bool:
    """Whether a heading is a table of contents' title: it heads nothing after the next heading of any level."""
    return bool(_CONTENTS_TITLE.match(text.strip().strip("*_").strip()))


def is_figure(text: str) -> bool:
    return bool(_FIGURE_CELL.match(text.strip()))


def row_labelled(headers: list[str], rows: list[list[str]]) -> bool:
    """A table of figures with row labels: the first column has no header of its own (empty, a unit, or a
    placeholder), holds words on most rows, and at least half of the other filled cells are figures. Its rows are
    written label first, each figure with its column header (see :func:`figure_row_sentence`)."""
    if len(headers) < 2 or not rows:
        return False
    stub = headers[0].strip()
    if stub and not UNIT.search(stub):
        return False
    # A stub cell with nothing beside it labels the rows below it, whatever it reads (a year over its rows).
    labels = sum(1 for r in rows if r and r[0].strip() and (not is_figure(r[0]) or not any(c.strip() for c in r[1:])))
    rest = [c.strip() for r in rows for c in r[1:] if c.strip()]
    figs = sum(1 for c in rest if is_figure(c))
    return labels >= 0.8 * len(rows) and bool(rest) and figs >= 0.5 * len(rest)
