"""Recursive sectioning of an element sequence for the LLM planner (chunker.plan.sectioning)."""

from hypothesis import given, settings
from hypothesis import strategies as st

from chunker.contract import parse_markdown
from chunker.plan.sectioning import Section, ancestors, blocks, estimate_tokens, split_sections
from chunker.types import Element


def _md_doc() -> str:
    body = lambda tag, n: "\n\n".join(f"{tag} paragraph {i} " + "word " * 40 for i in range(n))  # noqa: E731
    return (
        f"# Alpha\n\n{body('alpha intro', 1)}\n\n## Alpha One\n\n{body('a1', 4)}\n\n## Alpha Two\n\n"
        f"### Deep\n\n{body('deep', 6)}\n\n# Beta\n\n{body('beta', 2)}\n\n"
        "| Item | Price |\n| --- | --- |\n" + "".join(f"| thing {i} | {i} EUR |\n" for i in range(12))
    )


def _ids(sections: list[Section]) -> list[str]:
    return [e.element_id for s in sections for e in s.elements]


def test_within_budget_is_one_section():
    els = parse_markdown("d", [("# A\n\nshort\n\n## B\n\ntext", 1)])
    secs = split_sections(els, 1000)
    assert len(secs) == 1 and secs[0].elements == els and secs[0].context == []
    assert split_sections([], 100) == []


def test_splits_at_top_level_headings_first_then_deeper_with_ancestor_context():
    els = parse_markdown("d", [(_md_doc(), 1)])
    total = estimate_tokens(els)
    # Room for a chapter, not for the whole document: the cut falls at "# Beta".
    secs = split_sections(els, total * 2 // 3)
    assert _ids(secs) == [e.element_id for e in els]
    assert any(s.elements[0].text == "Beta" and s.context == [] for s in secs)
    # Smaller budget: Alpha is cut again at its "##" headings; those sections carry "Alpha" as context.
    secs = split_sections(els, 200)
    assert _ids(secs) == [e.element_id for e in els]
    two = [s for s in secs if s.elements[0].text == "Alpha Two"]
    assert two and two[0].heading_path == ["Alpha"]
    # Deep is cut at elements (no heading left): later pieces carry the whole chain.
    deep_later = [s for s in secs if s.heading_path == ["Alpha", "Alpha Two", "Deep"]]
    assert deep_later, [s.heading_path for s in secs]
    assert all(s.tokens <= 200 for s in secs)


def test_small_siblings_are_packed_into_one_call():
    md = "\n\n".join(f"## Topic {i}\n\n" + "text " * 30 for i in range(20))
    els = parse_markdown("d", [(md, 1)])
    secs = split_sections(els, 150)  # the document is ~800 tokens, a topic ~40
    assert 5 <= len(secs) <= 8, "siblings share sections instead of one call per heading"
    assert _ids(secs) == [e.element_id for e in els]


def test_last_resort_never_cuts_a_table_or_a_list():
    rows = "".join(f"| row {i} | " + "v" * 40 + " |\n" for i in range(30))
    steps = "\n".join(f"{i}. step {i} " + "s" * 60 for i in range(1, 20))
    md = ("Intro " * 50 + "\n\n| K | V |\n| --- | --- |\n" + rows + "\nFollow these steps:\n\n" + steps
          + "\n\n" + "\n\n".join("tail " * 30 for _ in range(5)))
    els = parse_markdown("d", [(md, 1)])
    secs = split_sections(els, 150)
    assert len(secs) > 2
    groups = {}
    for n, s in enumerate(secs):
        for e in s.elements:
            if e.kind == "table_row":
                groups.setdefault(e.group, set()).add(n)
    assert all(len(v) == 1 for v in groups.values()), "one table, one section"
    steps_secs = {n for n, s in enumerate(secs) for e in s.elements if e.kind == "list"}
    intro_secs = {n for n, s in enumerate(secs) for e in s.elements if e.text == "Follow these steps:"}
    assert len(steps_secs) == 1 and steps_secs == intro_secs


def test_ancestors_drop_siblings():
    def h(level: int, text: str) -> Element:
        return Element(element_id=text, doc_id="d", ordinal=0, kind="heading", text=text, level=level)

    chain = [h(1, "A"), h(2, "B"), h(3, "C"), h(2, "D")]
    assert [e.text for e in ancestors(chain)] == ["A", "D"]
    assert [e.text for e in ancestors(chain, below_level=2)] == ["A"]


KINDS = st.sampled_from(["heading", "heading", "paragraph", "paragraph", "list", "table_row", "figure", "code"])


@st.composite
def element_seqs(draw):
    n = draw(st.integers(0, 80))
    out = []
    for i in range(n):
        kind = draw(KINDS)
        text = draw(st.text(min_size=1, max_size=400, alphabet="ab :?\n"))
        out.append(Element(element_id=f"d:{i}", doc_id="d", ordinal=i, kind=kind, text=text,
                           level=draw(st.integers(1, 4)) if kind == "heading" else 0,
                           heading_path=draw(st.sampled_from([[], ["x"], ["x", "y"]])),
                           group=draw(st.sampled_from(["", "t1", "t2"])) if kind == "table_row" else ""))
    return out


def _strip_lead(els: list[Element]) -> list[Element]:
    i = 0
    while i < len(els) and els[i].kind == "heading":
        i += 1
    return els[i:]


@settings(max_examples=300, deadline=None)
@given(element_seqs(), st.integers(1, 400))
def test_sections_cover_in_order_fit_the_budget_and_cut_cleanly(els, budget):
    secs = split_sections(els, budget)
    assert _ids(secs) == [e.element_id for e in els]
    assert all(s.elements for s in secs)
    start = 0
    for n, s in enumerate(secs):
        # Over budget only when nothing inside can be cut.
        assert s.tokens <= budget or len(blocks(_strip_lead(s.elements))) <= 1
        # Context: headings before the section that are still open there, outermost first.
        before = [e for e in els[:start] if e.kind == "heading"]
        open_ids = {id(e) for e in ancestors(before)}
        assert all(id(c) in open_ids for c in s.context)
        assert [c.level for c in s.context] == sorted({c.level for c in s.context})
        if n:
            prev_last, first = secs[n - 1].elements[-1], s.elements[0]
            assert first.kind == "heading" or blocks([prev_last, first]) == [[prev_last], [first]]
        start += len(s.elements)
