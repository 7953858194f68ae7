"""A year glued to its period prefix in a question ("FY2022", "Q22023", "H12024") split apart for the BM25 query.

Why: the BM25 analyzer makes one token of "FY2022", and no chunk holds that token: filings write "2022", "fiscal
2022", "For the fiscal year ended ... 2022", and our tables write each figure's column path ("Year Ended December
31, 2022"). The year, the most telling word of such a question (which of a company's filings, which column), then
counts for nothing in the BM25 leg. Split, it matches as a word of its own. 47 of financebench-dev's 75 questions
hold such a token; none of CloudWay's or the generated set's do.

Of the question, only the BM25 query is changed: the dense leg embeds the question as asked (measured: the split
question embedded moved dense doc@5 on the filings by two questions down, QUALITY.md). The same rule also splits
file names' words for the BM25 text at load time (:func:`chunker.index.collection.source_words`).

Only four-digit years 1900-2099 after the period prefixes of financial writing (FY, CY, Q1-Q4, H1-H2, 1Q-4Q, 1H-2H,
an apostrophe allowed: "FY'23" is left alone, its year has two digits) are split; any other token is left as it is.
"""

from __future__ import annotations

import re

_GLUED = re.compile(r"(?<![\w-])(FY|CY|Q[1-4]|H[12]|[1-4]Q|[12]H)'?((?:19|20)\d{2})(?![\w-])", re.I)


def split_periods(query: str) -> str:
    """``query`` with each period prefix and the year glued to it written as two words."""
    return _GLUED.sub(lambda m: f"{m.group(1)} {m.group(2)}", query)
