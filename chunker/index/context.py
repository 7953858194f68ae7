"""Small-to-big reading: a short hit comes with the chunks that follow it in its section.

Why: the planner keeps a table's intro line, a heading's first line or the last rows of a table before a page
break as chunks of their own, and a short chunk that says exactly what a question asks ("The following table sets
forth the notional amounts of our derivative instruments:") ranks well while holding none of the figures. On
financebench-dev a quarter of the top-5 hits were under 300 characters. Merging such chunks into bigger ones at
planning time cost page@5 every time it was tried (QUALITY.md: join_small_sections, table_captions, table_lead_in):
the small chunk is the better search unit. So the chunks stay as planned and the reader gets more: the chunks that
follow a short hit in the same document and section (the same breadcrumb, so never across a heading), verbatim and
in order, until the two hold ``retrieval.context_to_chars``. The hit's rank, score, text and pages are its own;
the context's last page is reported beside them, so a reader citing what it read cites the pages it came from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

# Followers are looked for on the hit's last page and the next two: enough for a few chunks of a section, and a
# bound on the rows one lookup reads.
PAGES_AHEAD = 2
FIELDS = ["doc_id", "breadcrumb", "text", "element_ids", "page_start", "page_end"]


class RowQuery(Protocol):
    def query_rows(self, expr: str, params: dict[str, Any] | None, fields: list[str],
                   limit: int) -> list[dict[str, Any]]: ...


@dataclass
class Context:
    text: str  # the followers' bodies (breadcrumb left out: it is the hit's own), joined by blank lines
    chunk_ids: list[str]
    page_end: int = 0  # the last page the followers reach (0: unknown): a citation of the context needs it


def ordinal(element_id: str) -> tuple[str, int] | None:
    """("doc", 12) from an element ID "doc:12"; None for an ID of another form."""
    doc, sep, n = str(element_id).rpartition(":")
    return (doc, int(n)) if sep and n.isdigit() else None


def body(row: dict[str, Any]) -> str:
    """A chunk's text without its breadcrumb prefix (build_chunks writes "crumb\\n\\nbody")."""
    text, crumb = row.get("text") or "", row.get("breadcrumb") or ""
    prefix = f"{crumb}\n\n"
    return text[len(prefix):] if crumb and text.startswith(prefix) else text


def _wanted(row: dict[str, Any], below: int) -> bool:
    ids = row.get("element_ids") or []
    return bool(ids) and len(row.get("text") or "") < below and ordinal(ids[-1]) is not None


Index = dict[tuple[str, int], dict[str, Any]]  # (doc, ordinal of its first element) -> chunk row


def _index(rows: list[dict[str, Any]], into: Index) -> Index:
    for f in rows:
        if f.get("text") is None:
            continue  # a candidate of an IDs-only leg: no fields to read
        first = ordinal((f.get("element_ids") or [""])[0])
        if first is not None:
            into.setdefault(first, f)
    return into


def _chain(r: dict[str, Any], known: Index, to: int) -> tuple[list[dict[str, Any]], bool]:
    """The followers of ``r`` found in ``known``, and whether that is all of them (``to`` reached, or the next chunk
    is known and opens another section); False: the next chunk is not known."""
    crumb, (doc, n) = r.get("breadcrumb") or "", ordinal(r["element_ids"][-1])  # type: ignore[misc]
    size, out = len(r.get("text") or ""), []
    while size < to:
        nxt = known.get((doc, n + 1))
        if nxt is None:
            return out, False
        if (nxt.get("breadcrumb") or "") != crumb:
            return out, True
        out.append(nxt)
        size += len(body(nxt)) + 2
        last = ordinal((nxt.get("element_ids") or [""])[-1])
        if last is None:
            return out, True
        n = last[1]
    return out, True


def _query(store: RowQuery, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One store query for the chunks that may follow each of ``rows`` in its section."""
    clauses, params = [], {}
    for i, r in enumerate(rows):
        params.update({f"d{i}": r.get("doc_id") or "", f"b{i}": r.get("breadcrumb") or ""})
        clause = f"(doc_id == {{d{i}}} and breadcrumb == {{b{i}}}"
        last = int(r.get("page_end") or 0)
        if last > 0:
            params.update({f"p{i}": last, f"q{i}": last + PAGES_AHEAD})
            clause += f" and page_start >= {{p{i}}} and page_start <= {{q{i}}}"
        clauses.append(clause + ")")
    return store.query_rows(" or ".join(clauses), params, FIELDS, limit=200 * len(rows))


def follow(store: RowQuery, rows: list[dict[str, Any]], below: int, to: int,
           candidates: list[dict[str, Any]] | None = None) -> dict[str, Context]:
    """Context for each of ``rows`` (hits with their fields) shorter than ``below`` characters that has followers,
    by chunk ID. Followers are looked for first among ``candidates`` (the search's other rows, fields and all: the
    next chunk of a section is often one), then in one store query for the hits still open. Rows without element
    IDs are left alone."""
    short = [r for r in rows if below > 0 and _wanted(r, below)]
    if not short:
        return {}
    known = _index(list(rows) + list(candidates or []), {})
    chains = {r["chunk_id"]: _chain(r, known, to) for r in short}
    open_rows = [r for r in short if not chains[r["chunk_id"]][1]]
    if open_rows:
        _index(_query(store, open_rows), known)
        chains.update({r["chunk_id"]: _chain(r, known, to) for r in open_rows})
    return {cid: Context("\n\n".join(body(f) for f in found), [f["chunk_id"] for f in found],
                         max(int(f.get("page_end") or 0) for f in found))
            for cid, (found, _) in chains.items() if found}
