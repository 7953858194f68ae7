"""LLM chunk planning over element IDs (``planner.kind: llm``).

The model never sees or writes the document's text in full. Per section (see :mod:`chunker.plan.sectioning`) it gets the
element IDs (the element ordinals), kinds, sizes, 80-character previews and the heading hierarchy, and answers a
JSON plan: ``{"chunks": [[id, ...], ...]}``, one ordered ID list per chunk (a JSON schema asks for guided decoding
where the backend offers it). Chunk text is then rebuilt locally from the verbatim elements
(:func:`chunker.plan.deterministic.build_chunks`), so nothing can be hallucinated into a chunk.

An answer is validated and repaired deterministically, each repair counted by kind: unknown IDs are dropped,
repeats are dropped keeping the first (a repeated heading is the model reusing it as context: counted apart), lists
out of order are sorted when that leaves the chunks as non-interleaved runs, missing IDs join a neighbouring chunk,
a heading left alone joins the chunk below it, a chunk over ``max_chars`` is re-planned deterministically, and a
small text chunk joins the next one under the same heading. An answer that cannot be repaired (not JSON, no known
ID, interleaved chunks, a failed call) falls back to the deterministic planner for that section, flagged on every
chunk it makes (``planner = "deterministic-fallback"``). The segment's plans always pass ``verify_coverage``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from chunker.backends.base import BackendUnavailable, EngineDead, GenerationRequest, ModelBackend
from chunker.config import PlannerConfig
from chunker.plan.repair import PlanRejected, parse_answer, repair_plan
from chunker.plan.deterministic import Plan, build_chunks, is_question, plan, verify_coverage
from chunker.plan.report import PlanningStats
from chunker.plan.sectioning import Section, split_sections
from chunker.types import Chunk, Element

PLANNER_LLM = "llm"
PLANNER_FALLBACK = "deterministic-fallback"
PROMPT_VERSION = "plan-v1"
PREVIEW_CHARS = 80

SYSTEM_PROMPT = """You group the elements of one document section into retrieval chunks. You never write text: \
you only arrange element IDs. Each chunk is later embedded on its own and must answer questions about one topic.

Rules:
1. Answer with JSON only, in the form {{"chunks": [[ID, ID, ...], [ID, ...]]}}.
2. Use every listed ID exactly once, in the listed order. A chunk is a run of consecutive IDs.
3. One topic per chunk. Aim at about {target} characters per chunk (each element shows its size); go above \
{max} only when a single element is that large; avoid chunks under {min} characters unless the topic ends.
4. Keep a list or a sequence of steps whole, in one chunk, with the sentence that introduces it.
5. Table rows (kind table_row) stay with rows of the same table; never mix rows of two tables, and keep prose \
apart from rows unless it is the table's one-line caption.
6. A question and its answer form one chunk; every new question starts a new chunk, so FAQ pairs stay apart.
7. A figure is a chunk of its own.
8. Headings are context: every chunk is prefixed with its heading chain anyway. Put each heading ID at the start \
of the chunk that follows it and never leave a heading alone in a chunk."""


def _preview(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= PREVIEW_CHARS else flat[: PREVIEW_CHARS - 1] + "…"


def _describe(e: Element) -> str:
    kind = f"H{e.level}" if e.kind == "heading" else e.kind
    extra = f" table={e.group}" if e.kind == "table_row" and e.group else ""
    if e.kind == "paragraph" and is_question(e):
        extra = " question"
    return f"[{e.ordinal}] {kind}{extra} {len(e.text)} chars {json.dumps(_preview(e.text), ensure_ascii=False)}"


def plan_schema(section: Section) -> dict[str, Any]:
    """JSON schema of an answer; the enum keeps guided decoding to the section's own IDs."""
    ids = [e.ordinal for e in section.elements]
    return {
        "type": "object",
        "properties": {"chunks": {"type": "array", "minItems": 1, "items": {
            "type": "array", "minItems": 1, "items": {"type": "integer", "enum": ids}}}},
        "required": ["chunks"],
        "additionalProperties": False,
    }


def build_request(section: Section, cfg: PlannerConfig, temperature: float = 0.1,
                  request_id: str = "") -> GenerationRequest:
    chain = section.heading_path
    if not chain and section.elements:
        # No ancestor inside this segment: the parser's chain still knows the headings a segment starts under.
        first = section.elements[0]
        chain = first.heading_path[:-1] if first.kind == "heading" else first.heading_path
    path = " > ".join(chain) or "(top of the document)"
    lines = [
        f"Section under: {path}",
        f"Target chunk size: about {cfg.target_chars} characters (min {cfg.min_chars}, max {cfg.max_chars}).",
        "Elements (ID, kind, size, preview):",
        *(_describe(e) for e in section.elements),
        "",
        f'Answer {{"chunks": [[...], ...]}} using all {len(section.elements)} IDs once, in order.',
    ]
    system = SYSTEM_PROMPT.format(target=cfg.target_chars, max=cfg.max_chars, min=cfg.min_chars)
    return GenerationRequest(system=system, user="\n".join(lines), temperature=temperature,
                             max_tokens=cfg.llm_output_tokens, request_id=request_id,
                             json_schema=plan_schema(section))


@dataclass
class SectionOutcome:
    plans: list[Plan]
    planner: str
    repairs: Counter[str] = field(default_factory=Counter)
    reason: str = ""  # why the section fell back
    input_tokens: int = 0
    output_tokens: int = 0
    called: bool = False


class LlmPlanner:
    """Plans segments section by section with any :class:`ModelBackend`; accumulates :attr:`stats`.

    Async throughout (sections of a segment go to the backend concurrently): the plan stage awaits it on its own
    event loop, so no thread has to bridge a sync caller to the backend.
    """

    def __init__(self, cfg: PlannerConfig, backend: ModelBackend, temperature: float = 0.1,
                 max_concurrency: int = 8) -> None:
        self.cfg = cfg
        self.backend = backend
        self.temperature = temperature
        self.max_concurrency = max_concurrency
        self.stats = PlanningStats(planner=PLANNER_LLM)

    async def plan_section(self, section: Section, sem: asyncio.Semaphore | None = None) -> SectionOutcome:
        els = section.elements
        if len(els) <= 1 or all(e.kind == "heading" for e in els):
            # Nothing to decide: a call would only add cost.
            return SectionOutcome([Plan([e.element_id for e in els])] if els else [], PLANNER_LLM)
        req = build_request(section, self.cfg, self.temperature, request_id=f"plan-{els[0].element_id}")
        try:
            if sem is not None:
                async with sem:
                    res = await self.backend.generate(req)
            else:
                res = await self.backend.generate(req)
        except (BackendUnavailable, EngineDead):
            raise  # fatal for the engine: never hidden behind a fallback
        except Exception as exc:  # one failed call costs one section its LLM plan, not the segment
            return self._fallback(section, f"call failed: {type(exc).__name__}", called=True)
        try:
            plans, repairs = repair_plan(els, parse_answer(res.text), self.cfg)
            verify_coverage(els, plans)
        except PlanRejected as exc:
            reason = "truncated" if res.finish_reason == "length" else str(exc)
            out = self._fallback(section, reason, called=True)
        else:
            out = SectionOutcome(plans, PLANNER_LLM, repairs, called=True)
        out.input_tokens, out.output_tokens = res.input_tokens, res.output_tokens
        return out

    def _fallback(self, section: Section, reason: str, called: bool) -> SectionOutcome:
        return SectionOutcome(plan(section.elements, self.cfg), PLANNER_FALLBACK, reason=reason, called=called)

    async def plan(self, elements: list[Element]) -> tuple[list[Plan], list[str]]:
        """Plans for a segment's elements and, per plan, the planner that made it."""
        t0 = time.perf_counter()
        sections = split_sections(elements, self.cfg.planning_budget_tokens)
        sem = asyncio.Semaphore(self.max_concurrency)
        outcomes = await asyncio.gather(*(self.plan_section(s, sem) for s in sections))
        plans: list[Plan] = []
        names: list[str] = []
        for o in outcomes:
            plans.extend(o.plans)
            names.extend([o.planner] * len(o.plans))
            self.stats.count_repairs(o.repairs)
            if o.planner == PLANNER_FALLBACK:
                self.stats.count_fallback(o.reason)
            self.stats.llm_calls += int(o.called)
            self.stats.input_tokens += o.input_tokens
            self.stats.output_tokens += o.output_tokens
        plans, names = _join_heading_only(elements, plans, names)
        verify_coverage(elements, plans)
        self.stats.segments += 1
        self.stats.sections += len(sections)
        self.stats.plan_ms += (time.perf_counter() - t0) * 1000
        return plans, names

    async def chunks(self, elements: list[Element], cfg_hash: str, source: str = "",
                     source_uri: str = "") -> list[Chunk]:
        """Plan, verify and build a segment's chunks; each chunk records the planner that made its plan."""
        plans, names = await self.plan(elements)
        chunks = build_chunks(elements, plans, self.cfg, cfg_hash, source, source_uri, planner=PLANNER_LLM)
        for c, name in zip(chunks, names):
            c.planner = name
        return chunks

    async def close(self) -> None:
        await self.backend.close()


def _join_heading_only(elements: list[Element], plans: list[Plan],
                       names: list[str]) -> tuple[list[Plan], list[str]]:
    """A section that ends in (or is only) headings leaves them alone; they join the next plan across sections."""
    kinds = {e.element_id: e.kind for e in elements}
    out: list[Plan] = []
    out_names: list[str] = []
    carry: list[str] = []
    for p, name in zip(plans, names):
        if all(kinds[i] == "heading" for i in p.element_ids) and len(plans) > 1:
            carry.extend(p.element_ids)
            continue
        out.append(Plan(carry + p.element_ids))
        out_names.append(name)
        carry = []
    if carry:
        if out:
            out[-1].element_ids.extend(carry)
        else:
            out.append(Plan(carry))
            out_names.append(names[-1])
    return out, out_names
