"""The context trailer the model writes after its content, and the checks run on every model answer.

The trailer is one line ``<context>{"summary": ..., "heading_path": [...], "open_table": ...}</context>``. Models
break it in predictable ways (no closing tag, a code fence around it, prose after it, single quotes, a truncated
JSON object), so parsing is lenient where the meaning is still unambiguous and reports a problem otherwise.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from chunker.contract import page_numbers

_OPEN = re.compile(r"<context>", re.I)
_CLOSE = re.compile(r"</context>", re.I)
_CHUNK_MARK = re.compile(r"\[CONTINUES\]\s*(True|False|Partial)\s*\[/CONTINUES\]", re.I)
_FENCE_OPEN = re.compile(r"^\s*```[A-Za-z]*\s*\n")
_FENCE_CLOSE = re.compile(r"\n\s*```\s*$")


@dataclass
class Trailer:
    summary: str = ""
    heading_path: list[str] = field(default_factory=list)
    open_table: str = ""


@dataclass
class SplitOutput:
    body: str  # the content before the trailer, code fence removed
    trailer: Trailer | None  # None when missing or unreadable
    problem: str = ""  # why the trailer is None (empty when it parsed)


def strip_fence(text: str) -> str:
    """Remove one code fence wrapping the whole answer (models like to write ```markdown ... ```)."""
    t = text.strip()
    m = _FENCE_OPEN.match(t)
    if m and _FENCE_CLOSE.search(t):
        return _FENCE_CLOSE.sub("", t[m.end() :]).strip()
    return t


def _coerce(data: object) -> Trailer | None:
    if not isinstance(data, dict):
        return None
    summary = data.get("summary", "")
    path = data.get("heading_path", [])
    table = data.get("open_table", "")
    if isinstance(path, str):  # "A > B > C" written as one string
        path = [p.strip() for p in path.split(">")]
    if not isinstance(summary, str) or not isinstance(path, list):
        return None
    if isinstance(table, list):
        table = " | ".join(str(t) for t in table)
    return Trailer(
        summary=summary.strip(),
        heading_path=[str(p).strip() for p in path if str(p).strip()],
        open_table=str(table or "").strip(),
    )


def _parse_json(raw: str) -> Trailer | None:
    raw = raw.strip().strip("`").strip()
    start = raw.find("{")
    if start < 0:
        return None
    try:
        # raw_decode tolerates junk after the object (a stray brace, a sentence).
        data, _ = json.JSONDecoder().raw_decode(raw[start:])
        return _coerce(data)
    except json.JSONDecodeError:
        pass
    # A common slip: trailing commas. Fix only that, nothing that could change the meaning.
    fixed = re.sub(r",\s*([}\]])", r"\1", raw[start:])
    try:
        data, _ = json.JSONDecoder().raw_decode(fixed)
        return _coerce(data)
    except json.JSONDecodeError:
        return None


def split_trailer(text: str) -> SplitOutput:
    """Separate the content from the trailer. The last ``<context>`` wins: an earlier one may be quoted text."""
    t = strip_fence(text)
    opens = list(_OPEN.finditer(t))
    if not opens:
        return SplitOutput(body=t, trailer=None, problem="missing context trailer")
    m = opens[-1]
    body = strip_fence(t[: m.start()])
    rest = t[m.end() :]
    close = _CLOSE.search(rest)
    raw = rest[: close.start()] if close else rest
    trailer = _parse_json(raw)
    if trailer is None:
        return SplitOutput(body=body, trailer=None, problem="malformed context trailer (not a JSON object with a summary)")
    return SplitOutput(body=body, trailer=trailer)


def check_output(text: str, finish_reason: str, mode: str, pages: list[int]) -> list[str]:
    """Problems with one model answer for a batch of ``pages``; empty when the answer is usable.

    Only what can honestly be checked is checked: truncation, emptiness, the trailer, the chunk markers, and page
    markers naming pages outside the batch or going backwards. Whether the model copied *all* of a page's text cannot
    be told without a second reading of the page, so it is not pretended here.
    """
    problems: list[str] = []
    if finish_reason == "length":
        problems.append("truncated (finish_reason=length)")
    elif finish_reason not in ("stop", "", "eos", "end_turn"):
        problems.append(f"unexpected finish_reason={finish_reason}")
    if not text.strip():
        return problems + ["empty output"]
    split = split_trailer(text)
    if split.trailer is None:
        problems.append(split.problem)
    if mode == "chunks":
        if not _CHUNK_MARK.search(split.body):
            problems.append("no [CONTINUES]..[/CONTINUES] chunk markers")
    elif not split.body.strip():
        problems.append("no content before the context trailer")
    marks = page_numbers(split.body)
    outside = sorted({p for p in marks if p not in pages})
    if outside:
        problems.append(f"page markers outside the batch: {outside}")
    elif marks != sorted(marks):
        problems.append("page markers out of order")
    return problems
