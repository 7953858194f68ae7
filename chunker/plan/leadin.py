"""A table's lead-in: the short paragraph right before a table that says what the table is.

"The following table shows net sales by reportable segment for the three months ended ... (dollars in millions):"
holds the words a question uses ("net sales", "segment", the period) and none of the figures; the rows below hold
the figures and little of those words. The planner opens the table's first chunk with it, and later chunks of a
split table repeat its gist as a title, so no chunk is the lead-in alone and every piece of the table says what it
is. The chunk-health report counts lead-ins left alone with the same predicate.

What makes a lead-in is generic document structure, the same for the text layer and the model's Markdown: it is
short, it is followed directly by the table, and it introduces (ends with ":" or "as follows", points at "the
following table", "the table below") or names the table's unit or periods ("(in millions)", "three months ended").
A paragraph that merely precedes a table (a narrative sentence ending with a full stop) is none of these. A lead-in
may come in more than one line: the sentence, then the unit on a line of its own ("($ in millions)"), or a numbered
note's first item that ends the way a lead-in ends ("8. Income Taxes  Income before taxes was as follows:"); every
line of such a run goes with the table (:func:`lead_in_tables`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from chunker.types import Element

LEAD_IN_MAX_CHARS = 400
# The gist repeated over later chunks of a split table: enough to say what the table is, short enough not to
# outweigh the rows in the embedding.
TITLE_MAX_CHARS = 160

_INTRODUCES = re.compile(
    r"(?::|\bas\s+follows\W*|\bbelow\W*|\bfollowing\W*)$"
    r"|\b(?:the\s+following\s+(?:table|schedule|summary|tabular|chart)|(?:table|schedule)\s+below"
    r"|(?:set\s+forth|summari[sz]ed|shown|presented|detailed|provided|listed|included)\s+(?:in\s+the\s+table\s+)?below)\b",
    re.I,
)
# A unit or period named the way table lead-ins name them, in a short line: "(in millions)", "(dollars in
# thousands, except per share data)", "Three Months Ended June 30,", a date line "As of December 31,".
_NAMES_TABLE = re.compile(
    r"\((?:[^()]*\b(?:in\s+)?(?:thousands|millions|billions)\b[^()]*)\)\W*$"
    r"|\b(?:three|six|nine|twelve)\s+months\s+ended\b[^.]*$|\b(?:fiscal\s+)?years?\s+ended\b[^.]*,$"
    r"|^as\s+(?:of|at)\s+(?=[^.]{3,45}$)[^.\d]*\d[^.]*$",
    re.I,
)


def is_lead_in_text(text: str) -> bool:
    """Whether a paragraph's text reads as a table's lead-in (its position is the caller's to check)."""
    t = text.strip()
    if not t or len(t) > LEAD_IN_MAX_CHARS:
        return False
    return bool(_INTRODUCES.search(t) or _NAMES_TABLE.search(t))


# How a lead-in ends: a list item that ends this way introduces what follows it as a paragraph would.
_ENDS_INTRODUCING = re.compile(r"(?::|\bas\s+follows\W*)$", re.I)
# Lines of one lead-in run: the sentence, a unit line, at most one more (a repeated caption).
LEAD_IN_RUN = 3


def introduces(e: Element) -> bool:
    """Whether an element reads as (a line of) a table's lead-in; where it stands is the caller's to check."""
    if e.kind == "paragraph":
        return is_lead_in_text(e.text)
    t = e.text.strip()
    return e.kind == "list" and 0 < len(t) <= LEAD_IN_MAX_CHARS and bool(_ENDS_INTRODUCING.search(t))


def lead_in_tables(elements: Sequence[Element]) -> dict[int, str]:
    """Index in ``elements`` -> group of the table it leads into: a run of up to :data:`LEAD_IN_RUN` lines that
    each read as a lead-in, together within :data:`LEAD_IN_MAX_CHARS`, right before the table's first row."""
    out: dict[int, str] = {}
    lines = chars = 0  # of the run that starts at n + 1
    for n in range(len(elements) - 2, -1, -1):
        e, nxt = elements[n], elements[n + 1]
        if nxt.kind == "table_row":
            lines, chars = 1, len(e.text)
        elif n + 1 in out and lines < LEAD_IN_RUN and chars + len(e.text) <= LEAD_IN_MAX_CHARS:
            lines, chars = lines + 1, chars + len(e.text)
        else:
            continue  # where it stands, nothing is a lead-in: the regexes are not run
        if introduces(e):
            out[n] = out.get(n + 1, nxt.group)
    return out


# A heading between a lead-in and its first row is the table's title ("TABLE 18: SUMMARY OF CUSTOMER DEPOSITS") or
# its column labels read as a heading ("Fiscal Year"), never a new part of the document, when it is this short.
TITLE_HEADING_MAX_CHARS = 120


def is_lead_in_over_title(e: Element, title: Element | None, first_row: Element | None) -> bool:
    """A lead-in whose table follows one short heading: the lead-in, the heading and the rows belong together."""
    return (e.kind == "paragraph" and title is not None and title.kind == "heading"
            and len(title.text) <= TITLE_HEADING_MAX_CHARS and first_row is not None
            and first_row.kind == "table_row" and is_lead_in_text(e.text))


def title_of(lead_in: str) -> str:
    """The lead-in's gist for the later chunks of its table: the text without the closing colon, cut at a word
    within :data:`TITLE_MAX_CHARS`."""
    t = re.sub(r"\s+", " ", lead_in).strip().rstrip(":").strip()
    if len(t) <= TITLE_MAX_CHARS:
        return t
    cut = t[:TITLE_MAX_CHARS].rsplit(" ", 1)[0].rstrip(",;")
    return cut + " ..."
