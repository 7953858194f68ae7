"""The ``chunks`` output mode: parse ``[CONTINUES]flag[/CONTINUES][HEAD]a > b > c[/HEAD]content`` answers, merge
chunks by their continuation flags, and render them into the Markdown contract of :mod:`chunker.contract` so both output
modes become the same elements.

Merging rules:

* ``True`` merges into the chunk before it; for the first chunk of a batch that is the previous batch's last chunk
  (rebuilt from the context handed over), whose Markdown is already written: the continuation then inherits its
  heading path, so no heading is emitted between the two halves.
* ``Partial`` follows the configured policy: ``merge_same_heading`` (merge when the heading path is the same),
  ``merge`` (always), ``new`` (never).
* A table-row chunk stays its own row: it merges only with ``True`` into a row with the same headers, by joining the
  cells (a row cut by a page break).

Rendering emits the heading path as ``#``/``##``/``###`` headings only where it changes, keeps content verbatim, and
writes table-row chunks (small pipe tables) as row sentences in one ``<!-- table -->`` block per run of rows with the
same headers; a table open at the end of the previous batch goes on under ``<!-- table continued -->``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Literal

from chunker.contract import (LIST_ITEM, PAGE_MARKER, PIPE_SEPARATOR, TABLE_CLOSE, TABLE_CONTINUED, TABLE_OPEN,
                              table_row_sentence)

Flag = Literal["True", "False", "Partial"]
PartialPolicy = Literal["merge_same_heading", "merge", "new"]

_MARK = re.compile(r"\[CONTINUES\]\s*(.*?)\s*\[/CONTINUES\]", re.I | re.S)
_HEAD_OPEN = re.compile(r"^\s*\[HEAD\]", re.I)
_HEAD_CLOSE = re.compile(r"\[/HEAD\]", re.I)


@dataclass
class ChunkRecord:
    continues: Flag
    heading_path: list[str]
    content: str
    lead: str = ""  # page-marker lines written just before this chunk's flag
    joins_previous: bool = False  # set by merge: continues the previous batch's last chunk


@dataclass
class ParsedChunks:
    chunks: list[ChunkRecord] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # tolerated slips (unknown flag, missing HEAD, dropped chatter)


def _flag(raw: str) -> Flag | None:
    v = raw.strip().strip("\"'").lower()
    if v in ("true", "yes"):
        return "True"
    if v in ("false", "no"):
        return "False"
    if v in ("partial", "maybe"):
        return "Partial"
    return None


def split_path(raw: str) -> list[str]:
    """``a > b > b > c`` -> ``[a, b, c]``: inherited levels repeat their parent, which is not a new heading."""
    out: list[str] = []
    for part in raw.split(">"):
        p = " ".join(part.split())
        if p and (not out or out[-1] != p):
            out.append(p)
    return out[:6]


def _pop_trailing_pages(text: str) -> tuple[str, str]:
    """Page markers at the end of a chunk announce the *next* chunk's page: move them to the next chunk's lead."""
    lines = text.rstrip().split("\n")
    tail: list[str] = []
    while lines and (PAGE_MARKER.match(lines[-1]) or not lines[-1].strip()):
        if lines[-1].strip():
            tail.insert(0, lines[-1].strip())
        lines.pop()
    return "\n".join(lines).strip(), "\n".join(tail)


def _read_head(seg: str) -> tuple[list[str], str] | None:
    """([HEAD] path, rest). A long path may wrap onto a second line; without [/HEAD] the line ends it."""
    m = _HEAD_OPEN.match(seg)
    if not m:
        return None
    close = _HEAD_CLOSE.search(seg, m.end(), m.end() + 400)
    if close:
        return split_path(seg[m.end() : close.start()]), seg[close.end() :]
    nl = seg.find("\n", m.end())
    nl = len(seg) if nl < 0 else nl
    return split_path(seg[m.end() : nl]), seg[nl:]


def parse_chunks(body: str) -> ParsedChunks:
    """Chunks of one answer (trailer already removed), in order; empty chunks are dropped."""
    out = ParsedChunks()
    marks = list(_MARK.finditer(body))
    if not marks:
        return out
    preamble, lead = _pop_trailing_pages(body[: marks[0].start()])
    leading_pages = [ln for ln in preamble.split("\n") if PAGE_MARKER.match(ln)]
    preamble = "\n".join(ln for ln in preamble.split("\n") if not PAGE_MARKER.match(ln)).strip()
    lead = "\n".join([*(p.strip() for p in leading_pages), lead]).strip()
    if preamble:
        if "\n" not in preamble and len(preamble) < 160 and preamble.endswith(":"):
            out.notes.append(f"dropped preamble {preamble!r}")
        else:
            # Content written before the first marker is kept (losing text is worse than an odd chunk).
            out.chunks.append(ChunkRecord("Partial", [], preamble, lead))
            lead = ""
            out.notes.append("text before the first chunk marker kept as a Partial chunk")
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(body)
        seg = body[m.end() : end]
        flag = _flag(m.group(1))
        if flag is None:
            out.notes.append(f"unknown flag {m.group(1)!r} read as Partial")
            flag = "Partial"
        head = _read_head(seg)
        if head:
            path, seg = head
        else:
            path = []
            out.notes.append("chunk without [HEAD]: heading inherited")
        content, next_lead = _pop_trailing_pages(seg.strip("\n"))
        if content.strip():
            out.chunks.append(ChunkRecord(flag, path, content, lead))
            lead = next_lead
        else:  # an empty chunk still passes its page markers on
            lead = "\n".join(x for x in (lead, next_lead) if x)
    if lead and out.chunks:
        # Markers after the last chunk announce pages with nothing to keep; keep them so the pages are accounted for.
        last = out.chunks[-1]
        last.content = last.content + "\n" + lead
    return out


def _norm(parts: list[str]) -> list[str]:
    return [" ".join(p.split()).casefold() for p in parts]


def pipe_table(content: str) -> tuple[list[str], list[list[str]], str] | None:
    """(headers, rows, text after the table) when ``content`` starts with a pipe table, else None."""
    lines = content.strip().split("\n")
    if len(lines) < 3 or not lines[0].strip().startswith("|") or not PIPE_SEPARATOR.match(lines[1]):
        return None
    headers = _cells(lines[0])
    rows: list[list[str]] = []
    i = 2
    while i < len(lines) and lines[i].strip().startswith("|"):
        rows.append(_cells(lines[i]))
        i += 1
    return headers, rows, "\n".join(lines[i:]).strip()


def _cells(line: str) -> list[str]:
    s = line.strip()
    s = s[1:] if s.startswith("|") else s
    s = s[:-1] if s.endswith("|") else s
    return [c.strip() for c in re.split(r"(?<!\\)\|", s)]


def _join_rows(prev: str, cont: str) -> str | None:
    """A row cut by a page break: join the cells of two one-row tables with the same headers."""
    a, b = pipe_table(prev), pipe_table(cont)
    if not a or not b or _norm(a[0]) != _norm(b[0]) or len(a[1]) != 1 or len(b[1]) != 1 or a[2] or b[2]:
        return None
    ra, rb = a[1][0], b[1][0]
    width = max(len(ra), len(rb))
    ra, rb = ra + [""] * (width - len(ra)), rb + [""] * (width - len(rb))
    row = [" ".join(x for x in (p, q) if x) for p, q in zip(ra, rb)]
    head = "| " + " | ".join(a[0]) + " |"
    return "\n".join([head, "|" + " --- |" * len(a[0]), "| " + " | ".join(row) + " |"])


def _join_text(prev: str, cont: ChunkRecord) -> str:
    first = cont.content.lstrip().split("\n", 1)[0]
    last = prev.rstrip().rsplit("\n", 1)[-1]
    if cont.lead:
        # The page marker must stay on its own line; the parser lets a list run on across it.
        return prev.rstrip() + "\n" + cont.lead + "\n" + cont.content.lstrip()
    if LIST_ITEM.match(last) and LIST_ITEM.match(first):
        return prev.rstrip() + "\n" + cont.content.lstrip()
    if last and last[-1] not in ".!?:;\"'" and first[:1].islower():
        return prev.rstrip() + " " + cont.content.lstrip()  # a sentence cut by a page break
    return prev.rstrip() + "\n\n" + cont.content.lstrip()


def _wants_merge(c: ChunkRecord, path: list[str], base_path: list[str], policy: PartialPolicy) -> bool:
    if c.continues == "True":
        return True
    if c.continues == "Partial":
        if policy == "merge":
            return True
        if policy == "merge_same_heading":
            return _norm(path) == _norm(base_path)
    return False


def merge_chunks(
    chunks: list[ChunkRecord], previous: ChunkRecord | None = None, policy: PartialPolicy = "merge_same_heading"
) -> list[ChunkRecord]:
    """Apply the continuation flags. ``previous`` is the last chunk of the previous batch (already rendered)."""
    out: list[ChunkRecord] = []
    for c in chunks:
        base = out[-1] if out else previous
        path = c.heading_path or (base.heading_path if base else [])
        if base is None or not _wants_merge(c, path, base.heading_path, policy):
            out.append(replace(c, heading_path=path))
            continue
        is_row = pipe_table(c.content) is not None
        if not out:  # continues across the batch boundary: inherit the heading, keep the text here
            out.append(replace(c, heading_path=list(base.heading_path), joins_previous=True))
            continue
        prev = out[-1]
        if not prev.heading_path:  # headless text (e.g. before the first marker) takes the heading it joins
            prev.heading_path = list(path)
        if is_row or pipe_table(prev.content) is not None:
            joined = _join_rows(prev.content, c.content) if c.continues == "True" else None
            if joined is None:  # rows stay rows: never fold two rows into one chunk
                out.append(replace(c, heading_path=path))
                continue
            prev.content = joined
            continue
        prev.content = _join_text(prev.content, c)
    return out


@dataclass
class Rendered:
    markdown: str
    heading_path: list[str]  # headings in force after the last chunk
    open_table: str  # headers of a table the batch ended in ("a | b"), else ""
    last_chunk: ChunkRecord | None


def render_markdown(
    chunks: list[ChunkRecord], heading_path: list[str] | None = None, open_table: str = ""
) -> Rendered:
    """Render merged chunks as contract Markdown, continuing from the previous batch's heading path and open table."""
    out: list[str] = []
    emitted = list(heading_path or [])
    table: list[str] | None = None  # normalised headers of the open block
    first_table = True
    prev_open = [p.strip().casefold() for p in open_table.split("|") if p.strip()] if open_table else []
    last_headers: list[str] = []

    def close() -> None:
        nonlocal table
        if table is not None:
            out.append(TABLE_CLOSE)
            out.append("")
            table = None

    for c in chunks:
        path = c.heading_path
        k = len(path)  # first level that differs from the headings already written
        if not c.joins_previous and path and _norm(path) != _norm(emitted):
            k = 0
            while k < min(len(path), len(emitted)) and _norm([path[k]]) == _norm([emitted[k]]):
                k += 1
        if k < len(path):
            close()  # a new heading ends the table, before the page marker so the block stays on its pages
            first_table = False
        if c.lead:
            out.extend(c.lead.split("\n"))
        if k < len(path):
            for lvl in range(k, len(path)):
                out.extend([f"{'#' * (lvl + 1)} {path[lvl]}", ""])
            emitted = list(path)
        text = c.content.strip()
        last_headers = []
        while text:
            t = pipe_table(text)
            if t is None:
                close()
                first_table = False  # a table after other content is a new table
                out.extend([text, ""])
                break
            headers, rows, text = t
            key = _norm(headers)
            if table != key:
                close()
                cont = first_table and key == prev_open
                out.append(TABLE_CONTINUED if cont else TABLE_OPEN)
                table = key
            first_table = False
            out.extend(s for s in (table_row_sentence(headers, r) for r in rows) if s)
            last_headers = headers if not text else []
    open_out = " | ".join(last_headers) if table is not None and last_headers else ""
    close()
    md = "\n".join(out).strip() + "\n"
    return Rendered(md, emitted, open_out, chunks[-1] if chunks else None)
