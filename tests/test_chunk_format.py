"""The chunks output mode: parsing, continuation merging (within and across batches), rendering into the contract."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from chunker.convert.chunk_format import ChunkRecord, merge_chunks, parse_chunks, render_markdown, split_path
from chunker.convert.trailer import check_output
from chunker.contract import parse_batches, parse_markdown
from chunker.types import ConvertedBatch

ROW = "| Plan | Price | Storage |\n| --- | --- | --- |\n| {0} | {1} | {2} |"

ANSWER = """Here are the chunks:
<!-- page 5 -->
[CONTINUES]False[/CONTINUES][HEAD]Cloud Guide > Pricing > Plans[/HEAD]
""" + ROW.format("Basic", "$10", "50 GB") + """

[CONTINUES]False[/CONTINUES][HEAD]Cloud Guide > Pricing > Plans[/HEAD]
""" + ROW.format("Pro", "$20", "200 GB") + """
<!-- page 6 -->
[CONTINUES]False[/CONTINUES][HEAD]Cloud Guide > Setup > Install[/HEAD]
1. Download the installer.
2. Run it.

[CONTINUES]True[/CONTINUES][HEAD]Cloud Guide > Setup > Install (cont.)[/HEAD]
3. Sign in.

[CONTINUES]Partial[/CONTINUES][HEAD]Cloud Guide > Setup > Install[/HEAD]
Support is available by mail.
"""

GOLDEN = """<!-- page 5 -->
## Pricing

### Plans

<!-- table -->
Plan: Basic; Price: $10; Storage: 50 GB.
Plan: Pro; Price: $20; Storage: 200 GB.
<!-- /table -->

<!-- page 6 -->
## Setup

### Install

1. Download the installer.
2. Run it.
3. Sign in.

Support is available by mail.
"""


def _render(body: str, path: list[str] | None = None, table: str = "", previous: ChunkRecord | None = None,
            policy: str = "merge_same_heading"):
    parsed = parse_chunks(body)
    return render_markdown(merge_chunks(parsed.chunks, previous, policy), path, table)  # type: ignore[arg-type]


def test_golden_answer_renders_to_the_contract() -> None:
    parsed = parse_chunks(ANSWER)
    assert [c.continues for c in parsed.chunks] == ["False", "False", "False", "True", "Partial"]
    assert any("preamble" in n for n in parsed.notes)
    out = render_markdown(merge_chunks(parsed.chunks, ChunkRecord("False", ["Cloud Guide", "Intro"], "prev")),
                          ["Cloud Guide", "Intro"])
    assert out.markdown == GOLDEN
    assert out.heading_path == ["Cloud Guide", "Setup", "Install"] and out.open_table == ""
    els = parse_markdown("d", [(out.markdown, 5)], heading_path=["Cloud Guide", "Intro"])
    kinds = [(e.kind, e.page_start) for e in els]
    assert kinds == [("heading", 5), ("heading", 5), ("table_row", 5), ("table_row", 5), ("heading", 6),
                     ("heading", 6), ("list", 6), ("paragraph", 6)]
    # Steps were merged into one list element: never split.
    assert els[6].text.count("\n") == 2 and els[6].heading_path == ["Cloud Guide", "Setup", "Install"]


def test_headings_emitted_only_when_they_change() -> None:
    body = "".join(f"[CONTINUES]False[/CONTINUES][HEAD]T > S > {h}[/HEAD]\npara {i}.\n\n"
                   for i, h in enumerate(["A", "A", "B", "B", "A"]))
    md = _render(body, ["T", "S"]).markdown
    assert [ln for ln in md.splitlines() if ln.startswith("#")] == ["### A", "### B", "### A"]


def test_continuation_across_batches_keeps_heading_and_list() -> None:
    b1 = "<!-- page 1 -->\n[CONTINUES]False[/CONTINUES][HEAD]Manual > Setup > Install[/HEAD]\n1. Unpack.\n2. Plug in.\n"
    r1 = _render(b1)
    prev = ChunkRecord("False", r1.heading_path, r1.last_chunk.content if r1.last_chunk else "")
    b2 = "<!-- page 2 -->\n[CONTINUES]True[/CONTINUES][HEAD]Manual > Setup > Install (continued)[/HEAD]\n3. Switch on.\n"
    merged = merge_chunks(parse_chunks(b2).chunks, prev)
    assert merged[0].joins_previous and merged[0].heading_path == ["Manual", "Setup", "Install"]
    r2 = render_markdown(merged, r1.heading_path)
    assert "#" not in r2.markdown and "3. Switch on." in r2.markdown
    batches = [ConvertedBatch("d", 0, i, i + 1, i + 1, r.markdown) for i, r in enumerate([r1, r2])]
    els = parse_batches("d", batches)
    assert [e.heading_path for e in els if e.kind == "list"] == [["Manual", "Setup", "Install"]] * 2


def test_table_continuing_onto_next_batch_keeps_its_headers_and_group() -> None:
    b1 = "[CONTINUES]False[/CONTINUES][HEAD]Fees > Cards > Schedule[/HEAD]\n" + ROW.format("Basic", "$10", "50 GB")
    r1 = _render(b1)
    assert r1.open_table == "Plan | Price | Storage"
    b2 = "<!-- page 5 -->\n[CONTINUES]False[/CONTINUES][HEAD]Fees > Cards > Schedule[/HEAD]\n" + ROW.format("Pro", "$20", "1 TB")
    r2 = _render(b2, r1.heading_path, r1.open_table)
    assert "<!-- table continued -->" in r2.markdown and "#" not in r2.markdown
    els = parse_batches("d", [ConvertedBatch("d", 0, 0, 1, 4, r1.markdown), ConvertedBatch("d", 0, 1, 5, 8, r2.markdown)])
    rows = [e for e in els if e.kind == "table_row"]
    assert [r.text for r in rows] == ["Plan: Basic; Price: $10; Storage: 50 GB.", "Plan: Pro; Price: $20; Storage: 1 TB."]
    assert rows[0].group == rows[1].group and rows[1].page_start == 5
    # A different table after the context's table is a new table, not a continuation.
    other = "[CONTINUES]False[/CONTINUES][HEAD]Fees > Cards > Schedule[/HEAD]\n| Card | Fee |\n| --- | --- |\n| Gold | 5 |"
    assert "<!-- table continued -->" not in _render(other, r1.heading_path, r1.open_table).markdown


def test_row_cut_by_page_break_joins_cells_but_rows_never_fold() -> None:
    body = ("[CONTINUES]False[/CONTINUES][HEAD]T > S > X[/HEAD]\n" + ROW.format("Basic", "$10 per", "50") +
            "\n\n[CONTINUES]True[/CONTINUES][HEAD]T > S > X[/HEAD]\n" + ROW.format("", "month", "GB") +
            "\n\n[CONTINUES]Partial[/CONTINUES][HEAD]T > S > X[/HEAD]\n" + ROW.format("Pro", "$20", "1 TB"))
    merged = merge_chunks(parse_chunks(body).chunks)
    assert len(merged) == 2
    md = render_markdown(merged).markdown
    assert "Plan: Basic; Price: $10 per month; Storage: 50 GB." in md and "Plan: Pro" in md


def test_partial_policies() -> None:
    body = ("[CONTINUES]False[/CONTINUES][HEAD]T > A > X[/HEAD]\nfirst.\n\n"
            "[CONTINUES]Partial[/CONTINUES][HEAD]T > A > X[/HEAD]\nsame heading.\n\n"
            "[CONTINUES]Partial[/CONTINUES][HEAD]T > B > Y[/HEAD]\nother heading.\n")
    chunks = parse_chunks(body).chunks
    assert len(merge_chunks(chunks, policy="merge_same_heading")) == 2
    assert len(merge_chunks(chunks, policy="merge")) == 1
    assert len(merge_chunks(chunks, policy="new")) == 3


def test_sentence_cut_by_page_break_is_rejoined() -> None:
    body = ("[CONTINUES]False[/CONTINUES][HEAD]T > A > X[/HEAD]\nThe warranty covers parts and\n\n"
            "[CONTINUES]True[/CONTINUES][HEAD]T > A > X[/HEAD]\nlabour for two years.\n")
    assert "The warranty covers parts and labour for two years." in _render(body).markdown


def test_malformed_answers_are_tolerated_where_meaning_is_clear() -> None:
    body = ("Intro text the model wrote without a marker.\n\n"
            "[continues] true [/continues][HEAD]T > A >\n X[/HEAD]\nwrapped head.\n\n"
            "[CONTINUES]Maybe?[/CONTINUES]\nno head here.\n\n"
            "[CONTINUES]False[/CONTINUES][HEAD]T > B > B > Y\nunclosed head.\n\n"
            "[CONTINUES]False[/CONTINUES][HEAD]T > C > Z[/HEAD]\n   \n")
    p = parse_chunks(body)
    assert [c.content for c in p.chunks] == ["Intro text the model wrote without a marker.", "wrapped head.",
                                             "no head here.", "unclosed head."]
    assert p.chunks[1].heading_path == ["T", "A", "X"] and p.chunks[1].continues == "True"
    assert p.chunks[2].continues == "Partial" and p.chunks[2].heading_path == []
    assert p.chunks[3].heading_path == ["T", "B", "Y"]
    merged = merge_chunks(p.chunks, policy="new")
    # True joined the headless preamble, which takes its heading; a missing HEAD inherits.
    assert [m.heading_path for m in merged] == [["T", "A", "X"], ["T", "A", "X"], ["T", "B", "Y"]]
    assert parse_chunks("no markers at all").chunks == []


def test_truncated_answer_is_rejected_by_the_checks() -> None:
    cut = "[CONTINUES]False[/CONTINUES][HEAD]T > A > X[/HEAD]\n1. Step one\n2. Ste"
    problems = check_output(cut, "length", "chunks", [1])
    assert any("truncated" in p for p in problems) and any("trailer" in p for p in problems)
    assert parse_chunks(cut).chunks[0].content.endswith("2. Ste")  # parsing never raises on it


def test_page_markers_between_chunks_lead_the_next_chunk() -> None:
    body = ("<!-- page 3 -->\n[CONTINUES]False[/CONTINUES][HEAD]T > A > X[/HEAD]\nOn three.\n<!-- page 4 -->\n"
            "[CONTINUES]False[/CONTINUES][HEAD]T > B > Y[/HEAD]\nOn four.\n<!-- page 5 -->\n")
    els = parse_markdown("d", [(_render(body).markdown, 3)])
    assert [(e.text, e.page_start) for e in els if e.kind == "paragraph"] == [("On three.", 3), ("On four.", 4)]
    assert [e.page_start for e in els if e.kind == "heading" and e.text == "B"] == [4]


def test_split_path_collapses_inherited_levels() -> None:
    assert split_path(" Doc  >  Sec > Sec ") == ["Doc", "Sec"]


_words = st.text(alphabet="abcdefgh ", min_size=1, max_size=20).map(str.strip).filter(bool)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["True", "False", "Partial"]),
                          st.lists(st.sampled_from(["T", "A", "B", "C"]), min_size=1, max_size=3), _words),
                min_size=1, max_size=8))
def test_rendering_keeps_every_chunk_text_and_never_repeats_a_heading(items) -> None:
    body = "".join(f"[CONTINUES]{f}[/CONTINUES][HEAD]{' > '.join(p)}[/HEAD]\n{w}.\n\n" for f, p, w in items)
    md = render_markdown(merge_chunks(parse_chunks(body).chunks, policy="merge")).markdown
    for _, _, w in items:
        assert w + "." in md
    lines = [ln for ln in md.splitlines() if ln.strip()]
    assert all(not (a.startswith("#") and a == b) for a, b in zip(lines, lines[1:]))
