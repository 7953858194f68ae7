"""The LLM chunk planner over IDs (chunker.plan.llm, chunker.plan.repair) with scripted engines."""

import asyncio
import json
import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chunker.backends.base import EngineDead, GenerationResult
from chunker.backends.scripted import ScriptedBackend
from chunker.config import PlannerConfig, load_config
from chunker.contract import parse_markdown
from chunker.plan.repair import PlanRejected, parse_answer, repair_plan
from chunker.plan.deterministic import plan
from chunker.plan.llm import PLANNER_FALLBACK, PLANNER_LLM, LlmPlanner, build_request
from chunker.plan.sectioning import Section
from chunker.types import Element

CFG = PlannerConfig(kind="llm", target_chars=300, min_chars=0, max_chars=100_000, planning_budget_tokens=200)


def prompt_ids(user: str) -> list[int]:
    return [int(m) for m in re.findall(r"^\[(\d+)\]", user, re.M)]


def answer(chunks: list[list]) -> str:
    return json.dumps({"chunks": chunks})


def run(planner: LlmPlanner, els: list[Element]):
    chunks = asyncio.run(planner.chunks(els, "h"))
    assert [i for c in chunks for i in c.element_ids] == [e.element_id for e in els]
    return chunks


def _els(n: int) -> list[Element]:
    return [Element(element_id=f"d:{i}", doc_id="d", ordinal=i, kind="paragraph", text=f"paragraph {i} " + "x" * 50)
            for i in range(n)]


# ------------------------------------------------------------------------------------------------ repair, by kind


def test_good_plan_is_taken_as_is():
    els = _els(6)
    plans, repairs = repair_plan(els, [[0, 1, 2], [3, 4], [5]], CFG)
    assert [p.element_ids for p in plans] == [["d:0", "d:1", "d:2"], ["d:3", "d:4"], ["d:5"]]
    assert not repairs


@pytest.mark.parametrize("raw, expected, kind", [
    ([[0, 1, 99], [2, 3]], [[0, 1], [2, 3]], "unknown_id"),
    ([[0, 1], [1, 2, 3]], [[0, 1], [2, 3]], "duplicate_id"),
    ([[1, 0], [2, 3]], [[0, 1], [2, 3]], "reordered_within_chunk"),
    ([[2, 3], [0, 1]], [[0, 1], [2, 3]], "reordered_chunks"),
    ([[0], [3]], [[0, 1, 2], [3]], "missing_id"),
    ([[0, 2], [3]], [[0, 1, 2], [3]], "missing_id"),
    ([[0, 1], [], [2, 3]], [[0, 1], [2, 3]], "empty_chunk"),
    ([["d:0", "1"], [2.0, 3]], [[0, 1], [2, 3]], None),
])
def test_repairs_are_deterministic_and_counted(raw, expected, kind):
    els = _els(4)
    plans, repairs = repair_plan(els, raw, CFG)
    assert [p.element_ids for p in plans] == [[f"d:{i}" for i in c] for c in expected]
    assert (kind in repairs) if kind else not repairs


def test_missing_heading_opens_the_next_chunk_and_missing_rows_follow_their_table():
    md = "Intro text.\n\n## Prices\n\n| A | B |\n| --- | --- |\n| a | 1 |\n| b | 2 |\n| c | 3 |"
    els = parse_markdown("d", [(md, 1)])  # 0 para, 1 heading, 2..4 rows
    plans, repairs = repair_plan(els, [[0], [3, 4]], CFG)
    assert [p.element_ids for p in plans] == [["d:0"], ["d:1", "d:2", "d:3", "d:4"]]
    assert repairs["missing_id"] == 2


def test_repeated_heading_is_context_reuse_and_lone_heading_joins_below():
    md = "# Guide\n\nfirst part\n\nsecond part"
    els = parse_markdown("d", [(md, 1)])
    plans, repairs = repair_plan(els, [[0], [0, 1], [0, 2]], CFG)
    assert [p.element_ids for p in plans] == [["d:0", "d:1"], ["d:2"]]
    assert repairs["heading_reused"] == 2 and repairs["lone_heading"] == 1


def test_oversized_chunk_is_replanned_and_crumbs_merge():
    cfg = PlannerConfig(kind="llm", target_chars=200, min_chars=100, max_chars=300)
    els = _els(8)
    plans, repairs = repair_plan(els, [[i for i in range(8)]], cfg)
    assert len(plans) > 1 and repairs["oversized_split"] == 1
    plans, repairs = repair_plan(els, [[i] for i in range(8)], cfg)
    assert len(plans) < 8 and repairs["small_merged"] >= 1


@pytest.mark.parametrize("text, reason", [
    ("Sure! Here is the plan.", "not JSON"), ("", "not JSON"), ("{}", "empty plan"),
    ('{"chunks": []}', "empty plan"), ("[1, 2]", "a chunk is not a list"),
])
def test_unparseable_answers_are_rejected(text, reason):
    with pytest.raises(PlanRejected, match=reason):
        parse_answer(text)


def test_answers_in_fences_or_with_chatter_parse():
    assert parse_answer('```json\n{"chunks": [[1, 2]]}\n```') == [[1, 2]]
    assert parse_answer('Plan: {"chunks": [{"ids": [3]}]} done') == [[3]]


def test_interleaved_chunks_are_rejected():
    with pytest.raises(PlanRejected, match="interleave"):
        repair_plan(_els(4), [[0, 2], [1, 3]], CFG)


# ------------------------------------------------------------------------------------------------ the planner


def test_request_shows_ids_previews_and_hierarchy_only():
    long = "Unique tail words " * 30 + "SECRET_END"
    els = parse_markdown("d", [(f"# Top\n\n## Sub\n\n{long}\n\nShort.", 1)])
    sec = Section(els[2:], context=els[:2])
    req = build_request(sec, CFG)
    assert "SECRET_END" not in req.user, "only an 80-character preview of each element is sent"
    assert "Section under: Top > Sub" in req.user and "[2] paragraph" in req.user
    assert req.max_tokens == CFG.llm_output_tokens
    assert req.json_schema["properties"]["chunks"]["items"]["items"]["enum"] == [2, 3]
    # A segment that starts under headings of the previous one (seeded chain, no heading element): still shown.
    seeded = parse_markdown("d", [("Body text.", 1)], heading_path=["Manual", "Safety"])
    assert "Section under: Manual > Safety" in build_request(Section(seeded), CFG).user


def test_fallback_is_flagged_per_section_and_counted():
    els = parse_markdown("d", [("# A\n\n" + "\n\n".join(f"alpha {i} " + "a" * 150 for i in range(6))
                                + "\n\n# B\n\n" + "\n\n".join(f"beta {i} " + "b" * 150 for i in range(6)), 1)])
    answers = ["not json at all", lambda req: answer([[i] for i in prompt_ids(req.user)])]
    backend = ScriptedBackend(lambda req, i: answers[0] if "alpha 0" in req.user else answers[1](req))
    p = LlmPlanner(CFG.model_copy(update={"planning_budget_tokens": 300}), backend)  # one call per chapter
    chunks = run(p, els)
    assert {c.planner for c in chunks if "alpha" in c.text} == {PLANNER_FALLBACK}
    assert {c.planner for c in chunks if "beta" in c.text} == {PLANNER_LLM}
    assert p.stats.fallbacks == 1 and p.stats.fallback_reasons == {"not JSON": 1}
    assert p.stats.llm_calls == 2 and p.stats.output_tokens > 0
    asyncio.run(p.close())


def test_backend_error_falls_back_but_a_dead_engine_raises():
    els = _els(5)
    p = LlmPlanner(CFG, ScriptedBackend([TimeoutError("slow")] * 10))
    chunks = run(p, els)
    assert {c.planner for c in chunks} == {PLANNER_FALLBACK}
    assert p.stats.fallback_reasons == {"call failed: TimeoutError": p.stats.fallbacks}
    with pytest.raises(EngineDead):
        asyncio.run(LlmPlanner(CFG, ScriptedBackend([EngineDead("gone")] * 10)).plan(els))


def test_truncated_answer_is_named():
    p = LlmPlanner(CFG, ScriptedBackend([GenerationResult('{"chunks": [[0, 1', finish_reason="length")] * 10))
    run(p, _els(3))
    assert p.stats.fallback_reasons == {"truncated": 1}


def test_plan_segment_dispatches_on_planner_kind():
    from chunker.plan import make_planner
    from chunker.plan.deterministic import DeterministicPlanner
    from chunker.run.segment import plan_segment
    from chunker.types import ConvertedBatch, SegmentJob

    job = SegmentJob(doc_id="d", source_uri="/x.pdf", source="x.pdf", num_pages=1, segment_index=0,
                     num_segments=1, page_start=1, page_end=1, context_start=1, batch_pages=4)
    md = "# T\n\n" + "\n\n".join(f"para {i} " + "p" * 200 for i in range(8))
    batches = [ConvertedBatch(doc_id="d", segment_index=0, batch_index=0, page_start=1, page_end=1, markdown=md)]
    det_planner = make_planner(load_config(None, []))
    assert isinstance(det_planner, DeterministicPlanner)
    det = asyncio.run(plan_segment(job, batches, det_planner, "h0"))
    assert {c.planner for c in det.chunks} == {"deterministic"} and not det.facts.failed
    with pytest.raises(ValueError, match="llm_backend"):  # refused when the config loads, before any actor
        load_config(None, ["planner.kind=llm"])
    cfg = load_config(None, ["planner.kind=llm", "planner.llm_backend=scripted"])
    script = ScriptedBackend(lambda req, i: answer([[n] for n in prompt_ids(req.user)]))
    res = asyncio.run(plan_segment(job, batches, make_planner(cfg, backend=script), "h1"))
    assert not res.facts.failed and {c.planner for c in res.chunks} == {PLANNER_LLM}
    assert [c.element_ids for c in res.chunks] != [c.element_ids for c in det.chunks]
    assert script.calls == 1 and all(c.config_hash == "h1" for c in res.chunks)
    # Without an injected backend, the registry builds the configured one (scripted: its default answer is no plan).
    res = asyncio.run(plan_segment(job, batches, make_planner(cfg), "h2"))
    assert not res.facts.failed and {c.planner for c in res.chunks} == {PLANNER_FALLBACK}


# ------------------------------------------------------------------------------------------------ properties

KINDS = st.sampled_from(["heading", "paragraph", "paragraph", "list", "table_row", "figure", "code"])
MODES = ["good", "bad", "not_json", "empty", "giant", "singletons", "empty_lists", "unknown_only", "shuffled", "error"]


@st.composite
def element_seqs(draw):
    n = draw(st.integers(0, 50))
    out = []
    for i in range(n):
        kind = draw(KINDS)
        text = draw(st.text(min_size=1, max_size=500, alphabet="abc ?:\n."))
        out.append(Element(element_id=f"d:{1000 + i}", doc_id="d", ordinal=1000 + i, kind=kind, text=text,
                           level=draw(st.integers(1, 4)) if kind == "heading" else 0,
                           heading_path=draw(st.sampled_from([[], ["x"]])),
                           group=draw(st.sampled_from(["t1", "t2"])) if kind == "table_row" else ""))
    return out


def scripted_engine(mode: str, seed: int):
    rng = random.Random(seed)

    def good(ids: list[int]) -> list[list]:
        cuts = sorted(rng.sample(range(1, len(ids)), k=rng.randint(0, len(ids) - 1))) if len(ids) > 1 else []
        return [ids[a:b] for a, b in zip([0] + cuts, cuts + [len(ids)])]

    def bad(ids: list[int]) -> list[list]:
        chunks = good(ids)
        for _ in range(rng.randint(1, 6)):
            c = rng.choice(chunks)
            op = rng.choice(["drop", "dup", "swap", "unknown", "junk"])
            if op == "drop" and c:
                c.pop(rng.randrange(len(c)))
            elif op == "dup":
                rng.choice(chunks).append(rng.choice(ids))
            elif op == "swap" and len(c) > 1:
                i, j = rng.sample(range(len(c)), 2)
                c[i], c[j] = c[j], c[i]
            elif op == "unknown":
                c.insert(rng.randint(0, len(c)), rng.choice([7, -1, 10**9, "zz", "d:3", None]))
            elif op == "junk":
                chunks.insert(rng.randint(0, len(chunks)), [])
        if rng.random() < 0.3:
            rng.shuffle(chunks)
        return chunks

    def script(req, i):
        ids = prompt_ids(req.user)
        if mode == "error":
            raise ConnectionError("backend hiccup")
        return {
            "good": lambda: answer(good(ids)), "bad": lambda: answer(bad(ids)),
            "not_json": lambda: "I think the chunks should be: first, second.", "empty": lambda: "",
            "giant": lambda: answer([ids]), "singletons": lambda: answer([[x] for x in ids]),
            "empty_lists": lambda: answer([[] for _ in ids]), "unknown_only": lambda: answer([[-5, 3.5, "q"]]),
            "shuffled": lambda: answer(sorted(good(ids), key=lambda _: rng.random())),
        }[mode]()

    return ScriptedBackend(script)


@settings(max_examples=250, deadline=None)
@given(element_seqs(), st.sampled_from(MODES), st.integers(0, 10**6), st.integers(50, 1500),
       st.integers(200, 1200))
def test_every_element_exactly_once_in_order_whatever_the_model_says(els, mode, seed, target, budget):
    cfg = PlannerConfig(kind="llm", target_chars=target, min_chars=min(200, target), max_chars=target * 2,
                        planning_budget_tokens=budget)
    p = LlmPlanner(cfg, scripted_engine(mode, seed))
    try:
        chunks = run(p, els)
    finally:
        asyncio.run(p.close())
    assert all(c.element_ids for c in chunks)
    assert {c.planner for c in chunks} <= {PLANNER_LLM, PLANNER_FALLBACK}
    if mode == "good":
        assert p.stats.fallbacks == 0
        assert not {"unknown_id", "duplicate_id", "missing_id", "reordered_chunks"} & set(p.stats.repairs)
    if mode in ("not_json", "empty", "empty_lists", "unknown_only", "error"):
        assert p.stats.fallbacks == p.stats.llm_calls
    if mode in ("giant", "singletons", "shuffled"):
        # Absurd but valid plans are repaired (size cap, lone headings, crumbs, order), never thrown away.
        assert p.stats.fallbacks == 0

def test_deterministic_planner_matches_its_fallback_when_the_model_is_useless():
    els = parse_markdown("d", [("# A\n\ntext one\n\n## B\n\n- x\n- y\n\ntext two", 1)])
    p = LlmPlanner(PlannerConfig(kind="llm", planning_budget_tokens=10_000), ScriptedBackend(["nope"]))
    plans, names = asyncio.run(p.plan(els))
    assert [pl.element_ids for pl in plans] == [pl.element_ids for pl in plan(els, p.cfg)]
    assert names == [PLANNER_FALLBACK] * len(plans)
