"""Deterministic chunk planning over element IDs.

The planner never writes text: it groups element IDs into chunks, then :func:`build_chunks` rebuilds each chunk's
text from the verbatim elements, prefixed with the heading breadcrumb. Boundaries are small predicates over
*units* (groups of elements that must stay together):

* a list is one unit, and lists that continue each other (a page or batch break between steps) join;
* a paragraph that introduces a list (ends with ":") joins that list;
* a question (a paragraph or bold line ending with "?") and its answer are one unit, and a question always starts a
  new chunk, so FAQ pairs are split apart and never cut;
* table rows are single units that pack only with rows of the same table (modality ``table``); the table's lead-in
  (a short paragraph right before its first row that introduces it, :mod:`chunker.plan.leadin`) opens the table's
  first chunk (``planner.table_captions``), and every later chunk of the table repeats its gist as a title line;
* a figure is a chunk of its own (modality ``figure``) so visual questions can boost it; a figure with no
  description (a placeholder such as "Image", :func:`chunker.contract.says_nothing`) is not: alone it is a chunk that
  matches nothing and takes a figure boost, so it packs with the prose around it;
* a run of prose or of one table's rows that fills its chunks and leaves a small last one is split evenly instead
  (``planner.balance_tails``);
* a heading never ends up alone: it is placed in the first chunk of its section (or the next one when the section is
  empty); its text lives in the breadcrumb of every chunk below it;
* with ``planner.merge_fragments``, a chunk under ``planner.min_chars`` joins a neighbour
  (:mod:`chunker.plan.fragments`).

Coverage is verified after planning: every element exactly once, in order, or :class:`CoverageError`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from chunker.config import PlannerConfig
from chunker.contract import SEGMENT_STRIDE, says_nothing
from chunker.errors import DocumentError
from chunker.plan.fragments import Piece, is_pair, join_fragments
from chunker.plan.leadin import is_lead_in_over_title, lead_in_tables, title_of
from chunker.rowtext import compact_line, compact_rows, row_paths
from chunker.types import Chunk, Element, Modality, Stage

PLANNER_NAME = "deterministic"


class CoverageError(DocumentError):
    """A chunk plan drops, repeats or reorders elements; the document must fail loudly."""

    def __init__(self, message: str, **_: object) -> None:
        super().__init__(message, stage=Stage.PLAN, code="coverage")


@dataclass
class Unit:
    elements: list[Element]
    kind: str  # "text" | "table" | "figure" | "question"
    group: str = ""
    # A table row's size when it follows the row above it in the same chunk (its column paths left out when they
    # are the same, ``planner.compact_rows``); None: always ``size``.
    run_size: int | None = None

    @property
    def size(self) -> int:
        return sum(len(e.text) + 1 for e in self.elements)


@dataclass
class Plan:
    """A chunk as an ordered list of element IDs, before its text is built."""

    element_ids: list[str] = field(default_factory=list)
    section: int = 0  # the section it was packed in (fragments join their own section's chunks first)


_QUESTION = re.compile(r"^(\*\*|__)?(Q(uestion)?\s*[:.]\s*)?.{3,300}\?(\*\*|__)?$", re.S)


def is_question(e: Element) -> bool:
    return e.kind == "paragraph" and bool(_QUESTION.match(e.text.strip())) and len(e.text) <= 300


def _continues_list(prev: Element, e: Element) -> bool:
    return prev.kind == "list" and e.kind == "list" and prev.heading_path == e.heading_path


def make_units(elements: list[Element], max_chars: int = 1600, lead_ins: bool = True,
               compact: bool = False) -> list[Unit]:
    """Group a section's non-heading elements into units that must never be split. With ``lead_ins`` a table's
    lead-in is a unit of its table (same group), so it packs with the rows and never ends the prose before it.
    With ``compact`` a row that repeats the column paths of the row before it gets its compact ``run_size``."""
    units: list[Unit] = []
    leads = lead_in_tables(elements) if lead_ins else {}
    for n, e in enumerate(elements):
        prev_unit = units[-1] if units else None
        prev = prev_unit.elements[-1] if prev_unit else None
        if e.kind == "table_row":
            run = None
            if compact and prev is not None and prev.kind == "table_row" and prev.group == e.group:
                run = len(compact_line(e.text, row_paths(prev.text))) + 1
            units.append(Unit([e], "table", e.group, run))
        elif n in leads and not (prev_unit and prev_unit.kind == "question"):
            # An answer that introduces a table stays with its question (the question then opens the table's chunk
            # as prose would); elsewhere the lead-in goes with its rows, all its lines in one unit.
            if prev_unit and prev_unit.kind == "table" and prev_unit.group == leads[n] and n - 1 in leads:
                prev_unit.elements.append(e)
            else:
                units.append(Unit([e], "table", leads[n]))
        elif e.kind == "figure" and not says_nothing(e.text):
            units.append(Unit([e], "figure"))
        elif is_question(e):
            units.append(Unit([e], "question"))
        elif prev_unit and prev and prev_unit.kind in ("text", "question") and e.kind == "list" and (
            _continues_list(prev, e) or (prev.kind == "paragraph" and prev.text.rstrip().endswith(":"))
        ):
            prev_unit.elements.append(e)
        elif prev_unit and prev_unit.kind == "question" and prev_unit.size + len(e.text) <= max_chars:
            # The answer stays with its question until the next question or a table/figure.
            prev_unit.elements.append(e)
        else:
            units.append(Unit([e], "text"))
    return units


def _sections(elements: list[Element]) -> Iterator[tuple[list[Element], list[Element]]]:
    """(headings leading the section, body elements) in order; a section ends at the next heading."""
    heads: list[Element] = []
    body: list[Element] = []
    for e in elements:
        if e.kind == "heading":
            if body:
                yield heads, body
                heads, body = [], []
            heads.append(e)
        else:
            body.append(e)
    if heads or body:
        yield heads, body


def _leads_into(cur: list[Unit], u: Unit, cur_size: int, cfg: PlannerConfig) -> bool:
    """Whether table row ``u`` may continue the prose chunk ``cur`` (``planner.table_lead_in``)."""
    if cfg.table_lead_in == "off" or u.kind != "table" or not cur or cur[-1].kind != "text":
        return False
    if cur_size + u.size > cfg.target_chars:
        return False
    return cfg.table_lead_in == "any" or cur[-1].elements[-1].text.rstrip().endswith(":")


def _pack(units: list[Unit], cfg: PlannerConfig, boilerplate: frozenset[str] = frozenset()) -> list[list[Unit]]:
    """Greedy packing of one section's units up to the target size. A unit without words, or a small one of the
    document's ``boilerplate`` (:func:`repeated_lines`), never starts a chunk: it stays with what it follows."""
    tag_along = _tag_along(units, cfg, boilerplate)
    groups: list[list[Unit]] = []
    cut_by_size: list[bool] = []  # per group: whether it began because the one before was full (not a kind break)
    cur: list[Unit] = []
    cur_size = 0
    size_cut = False

    def flush() -> None:
        nonlocal cur, cur_size
        if cur:
            groups.append(cur)
            cut_by_size.append(size_cut)
        cur, cur_size = [], 0

    for u in units:
        if cur and (id(u) in tag_along or all(_wordless(c) for c in cur)) and cur_size + u.size <= cfg.max_chars:
            # A rule, an underscore left from a form's blank, a lone quote mark: no words to find; "See accompanying
            # notes ..." under every statement, an empty template table on every page of a plan: words that say
            # nothing of this place. Never a chunk of its own: it stays with what it follows (or, at a section's
            # start, with what follows it).
            cur.append(u)
            cur_size += u.size
            continue
        kind_break = bool(cur) and (
            u.kind == "figure"
            or cur[-1].kind == "figure"
            or u.kind == "question"
            or (u.kind == "table") != (cur[-1].kind == "table")
            or (u.kind == "table" and u.group != cur[-1].group)
        )
        if kind_break and _leads_into(cur, u, cur_size, cfg):
            # Why: the prose that introduces a table says what its figures are; in a chunk of its own it points at
            # no figures, and the rows' chunk lacks its words. Rows after this chunk pack as table chunks.
            kind_break = False
        size = _size_after(u, cur)
        too_big = bool(cur) and cur_size + size > cfg.target_chars
        # A small chunk may still take the next unit rather than be left tiny, within the hard cap.
        if too_big and cur_size < cfg.min_chars and cur_size + size <= cfg.max_chars and not kind_break:
            too_big = False
        if too_big and not kind_break and len(cur) == 1 and cur[0].kind == "table" \
                and cur[0].elements[0].kind != "table_row":
            too_big = False  # a lead-in never ends a chunk alone, however long its table's first row
        if kind_break or too_big:
            flush()
            size_cut = not kind_break
            size = u.size  # the first row of a chunk writes its column paths
        cur.append(u)
        cur_size += size
    flush()
    if cfg.balance_tails:
        _balance_tails(groups, cut_by_size, cfg)
    return groups


def _size_after(u: Unit, cur: list[Unit]) -> int:
    """The size ``u`` is written at when it follows ``cur``: a row right after a row of its table may be compact."""
    if u.run_size is not None and cur and cur[-1].group == u.group and cur[-1].elements[-1].kind == "table_row":
        return u.run_size
    return u.size


_WORD = re.compile(r"[^\W_]")


def _wordless(u: Unit) -> bool:
    return u.kind == "text" and not any(_WORD.search(e.text) for e in u.elements)


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def repeated_lines(elements: list[Element], cfg: PlannerConfig) -> frozenset[str]:
    """The document's boilerplate: short paragraphs, list items and table rows (under ``planner.min_chars``) whose
    text occurs more than once in it. Headings are not: a repeated heading is the document's structure."""
    seen: dict[str, int] = {}
    for e in elements:
        if e.kind != "heading" and len(e.text) < cfg.min_chars:
            key = _norm(e.text)
            seen[key] = seen.get(key, 0) + 1
    return frozenset(k for k, n in seen.items() if n > 1)


def _tag_along(units: list[Unit], cfg: PlannerConfig, boilerplate: frozenset[str]) -> set[int]:
    """Units (by id) that join the chunk before them whatever their kind: those without words, prose that is all
    boilerplate, and a whole small table every row of which is boilerplate (its rows then all tag along; a row that
    merely repeats inside a real table stays with its table)."""
    out = {id(u) for u in units if _wordless(u)}
    rows: dict[str, list[Unit]] = {}
    for u in units:
        if u.kind == "table":
            rows.setdefault(u.group, []).append(u)
        elif u.kind == "text" and u.size < cfg.min_chars and all(_norm(e.text) in boilerplate for e in u.elements):
            out.add(id(u))
    for table in rows.values():
        if sum(u.size for u in table) < cfg.min_chars \
                and all(_norm(e.text) in boilerplate for u in table for e in u.elements):
            out.update(id(u) for u in table)
    return out


def _lead_in_only(units: list[Unit]) -> bool:
    return len(units) == 1 and units[0].kind == "table" and units[0].elements[0].kind != "table_row"


def _balance_tails(groups: list[list[Unit]], cut_by_size: list[bool], cfg: PlannerConfig) -> None:
    """A run of prose or of one table's rows that filled its chunks leaves a small last chunk (1,300 characters
    make 1,100 + 200). Units move from the end of the chunk before into that tail while the tail stays no larger
    than what remains before it, so the run splits evenly instead: no chunk grows, none is left a fragment."""
    for k in range(1, len(groups)):
        if not cut_by_size[k]:
            continue
        prev, tail = groups[k - 1], groups[k]
        prev_size, tail_size = sum(u.size for u in prev), sum(u.size for u in tail)
        if tail_size >= cfg.min_chars:
            continue
        while len(prev) > 1:
            m = prev[-1]
            if tail_size + m.size > prev_size - m.size or tail_size + m.size > cfg.target_chars \
                    or _lead_in_only(prev[:-1]):
                break
            tail.insert(0, prev.pop())
            prev_size, tail_size = prev_size - m.size, tail_size + m.size


def plan(elements: list[Element], cfg: PlannerConfig) -> list[Plan]:
    """Chunk plans (ordered element-ID lists) covering every element exactly once, in order."""
    plans: list[Plan] = []
    pending_heads: list[Element] = []
    boilerplate = repeated_lines(elements, cfg) if cfg.join_boilerplate else frozenset()
    # A lead-in whose table follows a short heading (the table's title) ends its section's body; it is carried over
    # to open the next section's first chunk, before that heading, so the chunk reads lead-in, title, rows.
    carried = {a.element_id for a, b, c in zip(elements, elements[1:], elements[2:])
               if cfg.table_captions and is_lead_in_over_title(a, b, c)}
    for section, (heads, body) in enumerate(_sections(elements)):
        pending_heads.extend(heads)
        carry = body[-1:] if body and body[-1].element_id in carried else []
        body = body[:-1] if carry else body
        if not body:
            pending_heads.extend(carry)
            continue
        units = make_units(body, cfg.max_chars, cfg.table_captions, cfg.compact_rows)
        for i, group in enumerate(_pack(units, cfg, boilerplate)):
            ids = [e.element_id for u in group for e in u.elements]
            if i == 0 and pending_heads:
                ids = [h.element_id for h in pending_heads] + ids
                pending_heads = []
            plans.append(Plan(ids, section))
        pending_heads.extend(carry)
    if pending_heads:
        # Trailing headings with no content under them: keep them, attached to the last chunk.
        if plans:
            plans[-1].element_ids.extend(h.element_id for h in pending_heads)
        else:
            plans.append(Plan([h.element_id for h in pending_heads]))
    if cfg.merge_fragments != "none" and len(plans) > 1:
        view = ChunkView(elements, cfg)
        pieces = [Piece(p.element_ids, p.section, view.size(p.element_ids),
                        is_pair([view.by_id[i] for i in p.element_ids], is_question)) for p in plans]
        plans = [Plan(p.ids, p.section) for p in join_fragments(pieces, cfg, view.size)]
    verify_coverage(elements, plans)
    return plans


def verify_coverage(elements: list[Element], plans: list[Plan]) -> None:
    placed = [eid for p in plans for eid in p.element_ids]
    expected = [e.element_id for e in elements]
    if placed == expected:
        return
    seen: set[str] = set()
    dupes = [eid for eid in placed if eid in seen or seen.add(eid)]  # type: ignore[func-returns-value]
    missing = sorted(set(expected) - set(placed))
    unknown = sorted(set(placed) - set(expected))
    raise CoverageError(
        f"chunk plan does not cover the elements exactly once in order: "
        f"{len(missing)} missing {missing[:5]}, {len(dupes)} repeated {dupes[:5]}, {len(unknown)} unknown {unknown[:5]}"
    )


def breadcrumb(path: list[str], levels: int) -> str:
    """The heading chain: the top heading plus the deepest ``levels - 1`` below it."""
    if levels <= 0 or not path:
        return ""
    if len(path) > levels:
        path = [path[0]] + path[len(path) - (levels - 1):] if levels > 1 else [path[0]]
    return " > ".join(p.strip() for p in path if p.strip())


def chunk_id(doc_id: str, element_ids: list[str], source_uri: str = "") -> str:
    """Deterministic from the content (``doc_id``), the chunk's element IDs and the copy (its absolute source URI):
    the same bytes at two paths are two documents with their own rows, so neither copy's rows are replaced, tagged
    with the other's path, or deleted when the other copy changes."""
    key = f"{doc_id}|{source_uri}|{','.join(element_ids)}" if source_uri else f"{doc_id}|{','.join(element_ids)}"
    return hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()[:32]


def _modality(els: list[Element]) -> Modality:
    """``figure`` for a chunk holding a figure, ``table`` when table rows (a lead-in with them) are most of its
    text, else ``text``."""
    content = [e for e in els if e.kind != "heading"] or els
    if any(e.kind == "figure" and not says_nothing(e.text) for e in content):
        return "figure"
    rows = sum(len(e.text) for e in content if e.kind == "table_row")
    if rows and (rows * 2 >= sum(len(e.text) for e in content) or all(e.kind == "table_row" for e in content[1:])):
        return "table"  # the second test: a table's first chunk, opened by a lead-in longer than its rows
    return "text"


class ChunkView:
    """How a plan's element IDs read as a chunk: breadcrumb, body and the title of a table continued from an
    earlier chunk. The one place the chunk text is composed, so the fragment test measures the text the chunk
    will have."""

    def __init__(self, elements: list[Element], cfg: PlannerConfig) -> None:
        self.cfg = cfg
        self.by_id = {e.element_id: e for e in elements}
        # A table's lead-in by table (a group name is unique within one segment's parse).
        self.leads: dict[tuple[int, str], Element] = {}
        if cfg.table_captions:
            for n, group in sorted(lead_in_tables(elements).items()):
                # The first line of a run names the table; a unit line after it does not.
                m = n + 1
                while elements[m].kind != "table_row":
                    m += 1
                self.leads.setdefault((elements[m].ordinal // SEGMENT_STRIDE, group), elements[n])
            for a, b, c in zip(elements, elements[1:], elements[2:]):
                if is_lead_in_over_title(a, b, c):
                    self.leads[(c.ordinal // SEGMENT_STRIDE, c.group)] = a

    def compose(self, ids: list[str]) -> tuple[str, str]:
        """(breadcrumb, text) of the chunk made of ``ids``."""
        els = [self.by_id[i] for i in ids]
        content = [e for e in els if e.kind != "heading"] or els
        # The breadcrumb is the heading path of the chunk's first content.
        crumb = breadcrumb(content[0].heading_path, self.cfg.breadcrumb_levels)
        # Headings live in the breadcrumb; one that is not in it (a sibling heading with no body of its own, or a
        # level the breadcrumb leaves out) keeps its text in the body, so no verbatim text is ever lost.
        shown = set(crumb.split(" > ")) if crumb else set()
        body = "\n".join(e.text for e in els if e.kind != "heading" or e.text.strip() not in shown)
        if self.cfg.compact_rows:
            body = compact_rows(body)
        first = content[0]
        lead = self.leads.get((first.ordinal // SEGMENT_STRIDE, first.group)) if first.kind == "table_row" else None
        if lead is not None and lead.element_id not in ids:
            # A table continued from an earlier chunk says what it is: its rows carry their column paths, the
            # title carries the words of its lead-in a question uses.
            body = f"{title_of(lead.text)}\n{body}"
        return crumb, (f"{crumb}\n\n{body}" if crumb else body)

    def size(self, ids: list[str]) -> int:
        return len(self.compose(ids)[1])


def build_chunks(elements: list[Element], plans: list[Plan], cfg: PlannerConfig, config_hash: str,
                 source: str = "", source_uri: str = "", planner: str = PLANNER_NAME) -> list[Chunk]:
    """Rebuild each chunk's text from verbatim elements, prefixed with its heading breadcrumb."""
    view = ChunkView(elements, cfg)
    chunks: list[Chunk] = []
    for p in plans:
        els = [view.by_id[i] for i in p.element_ids]
        crumb, text = view.compose(p.element_ids)
        pages = [e.page_start for e in els if e.page_start] + [e.page_end for e in els if e.page_end]
        chunks.append(Chunk(
            chunk_id=chunk_id(els[0].doc_id, p.element_ids, source_uri), doc_id=els[0].doc_id,
            element_ids=list(p.element_ids),
            text=text, breadcrumb=crumb, page_start=min(pages, default=0), page_end=max(pages, default=0),
            modality=_modality(els), planner=planner, config_hash=config_hash, source=source, source_uri=source_uri,
        ))
    return chunks


class DeterministicPlanner:
    """The :class:`chunker.plan.Planner` of ``planner.kind: deterministic``: no model, no state."""

    name = PLANNER_NAME

    def __init__(self, cfg: PlannerConfig) -> None:
        self.cfg = cfg

    async def chunks(self, elements: list[Element], cfg_hash: str, source: str = "",
                     source_uri: str = "") -> list[Chunk]:
        return build_chunks(elements, plan(elements, self.cfg), self.cfg, cfg_hash, source, source_uri)

    async def close(self) -> None:
        return None
