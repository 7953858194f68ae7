import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chunker.config import PlannerConfig
from chunker.contract import parse_markdown
from chunker.plan.deterministic import CoverageError, Plan, breadcrumb, build_chunks, plan, verify_coverage
from chunker.types import Element

CFG = PlannerConfig(target_chars=300, min_chars=80, max_chars=600)


def _chunks(md: str, cfg: PlannerConfig = CFG):
    els = parse_markdown("d", [(md, 1)])
    return els, build_chunks(els, plan(els, cfg), cfg, "h")


def test_steps_never_split_and_heading_never_alone():
    steps = "\n".join(f"{i}. Step number {i} with enough words to take some room here." for i in range(1, 12))
    md = f"# Guide\n\n## Install\n\nDo this first:\n\n{steps}\n\n## Next\n\nShort."
    els, chunks = _chunks(md)
    with_steps = [c for c in chunks if "Step number 1 " in c.text]
    assert len(with_steps) == 1 and all(f"Step number {i} " in with_steps[0].text for i in range(1, 12))
    assert "Do this first:" in with_steps[0].text, "an intro line stays with its list"
    # No chunk is only headings.
    by_id = {e.element_id: e for e in els}
    assert all(any(by_id[i].kind != "heading" for i in c.element_ids) for c in chunks)
    assert chunks[0].text.startswith("Guide > Install\n\n")


def test_faq_pairs_split_and_kept_whole():
    md = "# FAQ\n\n" + "\n\n".join(
        f"**Can I do thing {i}?**\n\nYes, thing {i} is allowed when the sky is blue." for i in range(4))
    _, chunks = _chunks(md, PlannerConfig(target_chars=2000, min_chars=10, max_chars=4000))
    assert len(chunks) == 4
    for i, c in enumerate(chunks):
        assert f"thing {i}?" in c.text and f"Yes, thing {i}" in c.text


def test_tables_and_figures_get_their_modality():
    md = ("# T\n\nIntro paragraph.\n\n| A | B |\n| --- | --- |\n" + "".join(f"| a{i} | b{i} |\n" for i in range(30))
          + "\n![Figure 2: Flow](figure)\n\nAfter.")
    _, chunks = _chunks(md, CFG.model_copy(update={"merge_fragments": "none"}))
    mods = [c.modality for c in chunks]
    assert "table" in mods and "figure" in mods
    for c in chunks:
        if c.modality == "table":
            assert all(line.startswith("A: ") and "; B: " in line for line in c.text.split("\n\n", 1)[1].splitlines())
            assert len(c.text) <= CFG.max_chars + 50


def test_a_tables_first_rows_continue_the_prose_that_introduces_it():
    rows = "".join(f"| swap {i} | {i * 100} |\n" for i in range(40))
    intro = "We use derivatives to manage rate exposure. The following table sets forth the notional amounts:"
    md = f"# Derivatives\n\n{intro}\n\n| Instrument | Amount |\n| --- | --- |\n{rows}\nAfter the table, prose."
    # Lead-ins off: this option is what joins prose and rows then (with them on, the intro opens the table's chunk).
    cfg = CFG.model_copy(update={"table_lead_in": "intro", "table_captions": False})
    els, chunks = _chunks(md, cfg)
    first = next(c for c in chunks if "notional amounts:" in c.text)
    assert "Instrument: swap 0" in first.text, "the rows after the intro continue its chunk"
    # A short intro ending in ':' is the table's caption, so the chunk is still modality table.
    assert first.modality == "table" and len(first.text) <= cfg.target_chars + 40
    rest = chunks[chunks.index(first) + 1]
    assert rest.modality == "table" and "notional amounts" not in rest.text, "later rows pack as table chunks"
    assert [i for c in chunks for i in c.element_ids] == [e.element_id for e in els]
    # "intro" needs the prose to end with ':'; "any" takes any prose of the section; "off" never.
    plain = md.replace("notional amounts:", "notional amounts.")
    _, c_intro = _chunks(plain, cfg)
    assert all("Instrument:" not in c.text for c in c_intro if "notional amounts." in c.text)
    _, c_any = _chunks(plain, CFG.model_copy(update={"table_lead_in": "any"}))
    assert any("Instrument: swap 0" in c.text for c in c_any if "notional amounts." in c.text)
    _, off = _chunks(md, CFG.model_copy(update={"table_captions": False}))
    assert all("Instrument:" not in c.text for c in off if "notional amounts:" in c.text)
    # A lead-in that leaves no room for a row (over target_chars) stays a chunk of its own.
    long_intro = "Words that fill the room. " * 12 + "The following table sets forth the amounts:"
    _, full = _chunks(md.replace(intro, long_intro), cfg)
    assert all("Instrument:" not in c.text for c in full if "sets forth the amounts:" in c.text)


def test_chunk_ids_are_deterministic():
    md = "# A\n\ntext one\n\n## B\n\ntext two"
    _, c1 = _chunks(md)
    _, c2 = _chunks(md)
    assert [c.chunk_id for c in c1] == [c.chunk_id for c in c2]
    assert len({c.chunk_id for c in c1}) == len(c1)


def test_coverage_violation_is_loud():
    els = parse_markdown("d", [("a\n\nb", 1)])
    with pytest.raises(CoverageError, match="1 missing"):
        verify_coverage(els, [Plan([els[0].element_id])])
    with pytest.raises(CoverageError, match="1 repeated"):
        verify_coverage(els, [Plan([els[0].element_id, els[0].element_id, els[1].element_id])])


def test_breadcrumb_keeps_top_and_deepest():
    assert breadcrumb(["A", "B", "C", "D"], 3) == "A > C > D"
    assert breadcrumb(["A", "B"], 3) == "A > B"
    assert breadcrumb(["A", "B"], 0) == ""


KINDS = st.sampled_from(["heading", "paragraph", "list", "table_row", "figure", "code"])


@st.composite
def element_seqs(draw):
    n = draw(st.integers(0, 60))
    out = []
    for i in range(n):
        kind = draw(KINDS)
        text = draw(st.text(min_size=1, max_size=700, alphabet="abc ?:\n."))
        out.append(Element(element_id=f"d:{i}", doc_id="d", ordinal=i, kind=kind, text=text,
                           level=draw(st.integers(1, 4)) if kind == "heading" else 0,
                           group=draw(st.sampled_from(["", "t1", "t2"])), page_start=1, page_end=1))
    return out


@settings(max_examples=200, deadline=None)
@given(element_seqs(), st.integers(50, 2000), st.sampled_from(["off", "intro", "any"]), st.booleans(), st.booleans(),
       st.booleans())
def test_every_element_exactly_once_in_order(els, target, lead_in, captions, balance, boilerplate):
    cfg = PlannerConfig(target_chars=target, min_chars=min(200, target), max_chars=max(target, 100) * 2,
                        table_lead_in=lead_in, table_captions=captions, balance_tails=balance,
                        join_boilerplate=boilerplate)
    plans = plan(els, cfg)  # verify_coverage runs inside and would raise
    assert [i for p in plans for i in p.element_ids] == [e.element_id for e in els]
    assert all(p.element_ids for p in plans)
