"""Deterministic chunk planning over element IDs.

The planner never writes text: it groups element IDs into chunks, then :func:`build_chunks` rebuilds each chunk's
text from the verbatim elements, prefixed with the heading breadcrumb. Boundaries are small predicates over
*units* (groups of elements that must stay together):

* a list is one unit, and lists that continue each other (a page or batch break between steps) join;
* a paragraph that introduces a list (ends with ":") joins that list;
* a question (a paragraph or bold line ending with "?") and its answer are one unit, and a question always starts a
  new chunk, so FAQ pairs are split apart and never cut;
* table rows are single units that pack only with rows of the same table (modality ``table``); the table's caption
  (a short paragraph right before its first row that introduces it, ending with ":") opens the table's first chunk
  when ``planner.table_captions`` is on;
* a figure is a chunk of its own (modality ``figure``) so visual questions can boost it;
* a heading never ends up alone: it is placed in the first chunk of its section (or the next one when the section is
  empty); its text lives in the breadcrumb of every chunk below it.

Coverage is verified after planning: every element exactly once, in order, or :class:`CoverageError`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from chunker.config import PlannerConfig
from chunker.errors import DocumentError
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

    @property
    def size(self) -> int:
        return sum(len(e.text) + 1 for e in self.elements)


@dataclass
class Plan:
    """A chunk as an ordered list of element IDs, before its text is built."""

    element_ids: list[str] = field(default_factory=list)


_QUESTION = re.compile(r"^(\*\*|__)?(Q(uestion)?\s*[:.]\s*)?.{3,300}\?(\*\*|__)?$", re.S)


def is_question(e: Element) -> bool:
    return e.kind == "paragraph" and bool(_QUESTION.match(e.text.strip())) and len(e.text) <= 300


CAPTION_MAX_CHARS = 400


def is_caption(e: Element) -> bool:
    """A short paragraph that introduces what follows ("The following table summarizes our lease cost:")."""
    return e.kind == "paragraph" and len(e.text) <= CAPTION_MAX_CHARS and e.text.rstrip().endswith(":")


def _continues_list(prev: Element, e: Element) -> bool:
    return prev.kind == "list" and e.kind == "list" and prev.heading_path == e.heading_path


def make_units(elements: list[Element], max_chars: int = 1600) -> list[Unit]:
    """Group a section's non-heading elements into units that must never be split."""
    units: list[Unit] = []
    for e in elements:
        prev_unit = units[-1] if units else None
        prev = prev_unit.elements[-1] if prev_unit else None
        if e.kind == "table_row":
            units.append(Unit([e], "table", e.group))
        elif e.kind == "figure":
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


def _pack(units: list[Unit], cfg: PlannerConfig) -> list[list[Unit]]:
    """Greedy packing of one section's units up to the target size."""
    groups: list[list[Unit]] = []
    cur: list[Unit] = []
    cur_size = 0

    def flush() -> None:
        nonlocal cur, cur_size
        if cur:
            groups.append(cur)
        cur, cur_size = [], 0

    for u in units:
        kind_break = bool(cur) and (
            u.kind == "figure"
            or cur[-1].kind == "figure"
            or u.kind == "question"
            or (u.kind == "table") != (cur[-1].kind == "table")
            or (u.kind == "table" and u.group != cur[-1].group)
        )
        if cfg.table_captions and kind_break and u.kind == "table" and cur[-1].kind == "text" \
                and len(cur[-1].elements) == 1 \
                and is_caption(cur[-1].elements[0]):
            # Why: the caption says what the table is ("Components of lease cost were as follows:"), words a
            # question uses and the rows do not; left in the prose chunk before, it points at a chunk without
            # the figures, and the table's chunk lacks them.
            caption = cur.pop()
            cur_size -= caption.size
            flush()
            cur, cur_size = [caption], caption.size
            kind_break = False
        if kind_break and _leads_into(cur, u, cur_size, cfg):
            # Why: the prose that introduces a table says what its figures are; in a chunk of its own it points at
            # no figures, and the rows' chunk lacks its words. Rows after this chunk pack as table chunks.
            kind_break = False
        too_big = bool(cur) and cur_size + u.size > cfg.target_chars
        # A small chunk may still take the next unit rather than be left tiny, within the hard cap.
        if too_big and cur_size < cfg.min_chars and cur_size + u.size <= cfg.max_chars and not kind_break:
            too_big = False
        if kind_break or too_big:
            flush()
        cur.append(u)
        cur_size += u.size
    flush()
    # A small tail joins its predecessor when both are plain text and the result fits.
    if len(groups) >= 2:
        last, prev = groups[-1], groups[-2]
        if (sum(u.size for u in last) < cfg.min_chars and all(u.kind == "text" for u in last + prev)
                and sum(u.size for u in last + prev) <= cfg.max_chars):
            groups[-2] = prev + last
            groups.pop()
    return groups


def plan(elements: list[Element], cfg: PlannerConfig) -> list[Plan]:
    """Chunk plans (ordered element-ID lists) covering every element exactly once, in order."""
    plans: list[Plan] = []
    pending_heads: list[Element] = []
    for heads, body in _sections(elements):
        pending_heads.extend(heads)
        if not body:
            continue
        for i, group in enumerate(_pack(make_units(body, cfg.max_chars), cfg)):
            ids = [e.element_id for u in group for e in u.elements]
            if i == 0 and pending_heads:
                ids = [h.element_id for h in pending_heads] + ids
                pending_heads = []
            plans.append(Plan(ids))
    if pending_heads:
        # Trailing headings with no content under them: keep them, attached to the last chunk.
        if plans:
            plans[-1].element_ids.extend(h.element_id for h in pending_heads)
        else:
            plans.append(Plan([h.element_id for h in pending_heads]))
    if cfg.join_small_sections:
        plans = join_small_sections(plans, {e.element_id: e for e in elements}, cfg)
    verify_coverage(elements, plans)
    return plans


def _joinable_kind(els: list[Element]) -> str:
    """"text" or "table" for a chunk that may take or join a small section; "" for one that never does (a figure, a
    question and its answer: FAQ pairs stay apart)."""
    kinds = {e.kind for e in els if e.kind != "heading"}
    if "figure" in kinds or any(is_question(e) for e in els):
        return ""
    return "table" if kinds == {"table_row"} else "text"


def join_small_sections(plans: list[Plan], by_id: dict[str, Element], cfg: PlannerConfig) -> list[Plan]:
    """A chunk under ``min_chars`` that is a whole section of its own joins the chunk before it (same kind, same or
    next page, both within ``target_chars + min_chars``).

    Why: a heading over a line or two is its own chunk otherwise, and a chunk of 60 characters that matches a
    question's words outranks the page that answers it. Real filings are full of them: a table's unit line or a
    column caption read as a heading ("In Millions", "Fiscal Year"), a one-line note under its title. The joined
    section's heading is kept in the body (it is not in the breadcrumb of the chunk it joins), so no text is lost
    and the order is unchanged."""
    out: list[Plan] = []
    sizes: list[int] = []
    for p in plans:
        els = [by_id[i] for i in p.element_ids]
        size = sum(len(e.text) + 1 for e in els)
        if out and size < cfg.min_chars and els[0].kind == "heading" and sizes[-1] + size <= cfg.target_chars + cfg.min_chars:
            prev = [by_id[i] for i in out[-1].element_ids]
            kind = _joinable_kind(els)
            last_page = max((e.page_end or e.page_start for e in prev), default=0)
            first_page = min((e.page_start for e in els if e.page_start), default=last_page)
            if kind and kind == _joinable_kind(prev) and 0 <= first_page - last_page <= 1:
                out[-1] = Plan(out[-1].element_ids + p.element_ids)
                sizes[-1] += size
                continue
        out.append(p)
        sizes.append(size)
    return out


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
    content = [e for e in els if e.kind != "heading"]
    if len(content) > 1 and is_caption(content[0]) and content[1].kind == "table_row":
        content = content[1:]  # a table's caption does not make its chunk prose
    kinds = {e.kind for e in content}
    if "figure" in kinds:
        return "figure"
    if kinds == {"table_row"}:
        return "table"
    return "text"


def build_chunks(elements: list[Element], plans: list[Plan], cfg: PlannerConfig, config_hash: str,
                 source: str = "", source_uri: str = "", planner: str = PLANNER_NAME) -> list[Chunk]:
    """Rebuild each chunk's text from verbatim elements, prefixed with its heading breadcrumb."""
    by_id = {e.element_id: e for e in elements}
    chunks: list[Chunk] = []
    for p in plans:
        els = [by_id[i] for i in p.element_ids]
        content = [e for e in els if e.kind != "heading"] or els
        # The breadcrumb is the deepest heading path inside the chunk's content.
        crumb = breadcrumb(content[0].heading_path if content[0].kind != "heading"
                           else content[0].heading_path, cfg.breadcrumb_levels)
        # Headings live in the breadcrumb; one that is not in it (a sibling heading with no body of its own, or a
        # level the breadcrumb leaves out) keeps its text in the body, so no verbatim text is ever lost.
        shown = set(crumb.split(" > ")) if crumb else set()
        body = "\n".join(e.text for e in els if e.kind != "heading" or e.text.strip() not in shown)
        text = f"{crumb}\n\n{body}" if crumb else body
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
