"""Lead-ins with their tables, titles over a split table's later chunks, no fragment chunks, qualifier lines that
are no headings (issue 40, items 1 and 2)."""

from chunker.config import PlannerConfig
from chunker.contract import parse_markdown
from chunker.plan.deterministic import build_chunks, plan
from chunker.plan.health import Health
from chunker.plan.leadin import is_lead_in_text, title_of

CFG = PlannerConfig(target_chars=400, min_chars=120, max_chars=900, merge_fragments="document")
PROSE = ("We lease offices, warehouses and stores under operating leases with terms of up to twenty years, and we "
         "renew most of them when they end; rent is recognised on a straight-line basis over each term.")
ROWS = "".join(f"| Lease cost item {i} | {i * 100} | {i * 90} |\n" for i in range(24))
TABLE = "| | 2023 | 2022 |\n| --- | --- | --- |\n" + ROWS


def _chunks(md: str, cfg: PlannerConfig = CFG):
    els = parse_markdown("d", [(md, 1)])
    chunks = build_chunks(els, plan(els, cfg), cfg, "h")
    assert [i for c in chunks for i in c.element_ids] == [e.element_id for e in els], "every element once, in order"
    return els, chunks


def _body(c) -> str:  # noqa: ANN001
    return c.text.split("\n\n", 1)[1] if c.breadcrumb else c.text


def test_a_lead_in_opens_its_tables_first_chunk_and_titles_the_later_ones():
    lead = "The components of lease cost for the years ended December 31 were as follows (in millions):"
    md = f"# Leases\n\n{PROSE}\n\n{lead}\n\n{TABLE}"
    els, chunks = _chunks(md)
    table_chunks = [c for c in chunks if c.modality == "table"]
    assert len(table_chunks) >= 3, "the table is split over several chunks"
    first = table_chunks[0]
    assert _body(first).startswith(lead + "\n") and "Lease cost item 0" in first.text
    assert lead not in chunks[0].text and chunks[0].modality == "text", "the prose before keeps its own chunk"
    title = title_of(lead)
    for c in table_chunks[1:]:
        assert _body(c).startswith(title + "\n"), "a later chunk of the table says what the table is"
        assert "2023: " in _body(c).splitlines()[1], "and its rows keep their column paths"
    health = Health()
    health.add("d", chunks, els)
    assert health.report()["lead_in_only"] == 0


def test_a_lead_in_stays_with_a_first_row_too_long_for_the_target():
    # Longer than min_chars, and with the first row past max_chars: packing used to flush the lead-in alone.
    lead = ("The company, a corporation of the state of New Jersey, had the domestic and international subsidiaries "
            "that are listed in the table below as of January 1, 2023, each with its place of incorporation:")
    long_row = "| " + "; ".join(f"Subsidiary number {i} of the group, incorporated abroad" for i in range(16)) + " |"
    md = f"# Exhibit 21\n\n{PROSE}\n\n{lead}\n\n| Name |\n| --- |\n{long_row}\n| Short one |\n"
    els, chunks = _chunks(md)
    with_lead = next(c for c in chunks if lead in c.text)
    assert "Subsidiary number 0" in with_lead.text, "the lead-in is not left alone before an oversized row"
    health = Health()
    health.add("d", chunks, els)
    assert health.report()["lead_in_only"] == 0


def test_a_paragraph_that_merely_precedes_a_table_is_not_its_lead_in():
    md = f"# Leases\n\n{PROSE}\n\n{TABLE}"
    _, chunks = _chunks(md)
    assert chunks[0].modality == "text" and PROSE in chunks[0].text
    assert all(PROSE not in c.text for c in chunks[1:])
    assert all(_body(c).startswith("Lease cost item") for c in chunks[1:]), "no title where there is no lead-in"
    # Off: the lead-in stays with the prose, and the health report sees a lead-in alone.
    lead = "Lease cost was as follows:"
    off = CFG.model_copy(update={"table_captions": False, "merge_fragments": "none"})
    els, chunks = _chunks(f"# Leases\n\n{lead}\n\n{TABLE}", off)
    assert _body(chunks[0]) == lead
    health = Health()
    health.add("d", chunks, els)
    assert health.report()["lead_in_only"] == 1


def test_a_lead_in_over_two_lines_goes_with_its_table_whole():
    """The sentence, then the unit on a line of its own: both open the table's chunk, and the later chunks are titled
    by the sentence, not by the unit line. The health report sees the sentence left alone when lead-ins are off."""
    lead, unit = "Future minimum lease payments for the succeeding five fiscal years are as follows:", "($ in millions)"
    md = f"# Leases\n\n{PROSE}\n\n{lead}\n\n{unit}\n\n{TABLE}"
    els, chunks = _chunks(md)
    table_chunks = [c for c in chunks if c.modality == "table"]
    assert _body(table_chunks[0]).startswith(f"{lead}\n{unit}\n") and "Lease cost item 0" in table_chunks[0].text
    assert all(_body(c).startswith(title_of(lead) + "\n") for c in table_chunks[1:])
    health = Health()
    health.add("d", chunks, els)
    assert health.report()["lead_in_only"] == 0
    off = CFG.model_copy(update={"table_captions": False, "merge_fragments": "none"})
    els, chunks = _chunks(f"# Leases\n\n{lead}\n\n{unit}\n\n{TABLE}", off)
    health = Health()
    health.add("d", chunks, els)
    assert health.report()["lead_in_only"] == 1


def test_a_numbered_note_that_introduces_a_table_goes_with_it_and_a_list_before_one_does_not():
    note = "9. **Income Taxes** Income before provision for income taxes was as follows:"
    els, chunks = _chunks(f"# Notes\n\n{PROSE}\n\n{note}\n\n{TABLE}")
    first = next(c for c in chunks if "Lease cost item 0" in c.text)
    assert _body(first).startswith(note + "\n"), "a list item ending the way a lead-in ends leads into its table"
    items = "- Rent is paid monthly in advance.\n- Leases renew at market rates."
    els, chunks = _chunks(f"# Notes\n\n{PROSE}\n\n{items}\n\n{TABLE}")
    first = next(c for c in chunks if "Lease cost item 0" in c.text)
    assert "Leases renew" not in first.text, "a list that merely precedes a table stays with the prose"


def test_what_reads_as_a_lead_in():
    yes = ["Net sales by reportable segment were as follows (dollars in millions):",
           "The following table presents revenue by geography.",
           "Segment operating income is summarized below.",
           "Three Months Ended July 1, 2023 (in millions)",
           "Future minimum payments under these leases are as follows", "As of December 31,", "As at 30 June 2023"]
    no = ["Revenue rose 5% in 2023 on higher volumes.", "See accompanying notes to consolidated financial statements.",
          "x" * 390 + ":" + "y" * 20, "As of December 31, 2022, the Company had no borrowings outstanding.",
          "As of the date of this report"]
    assert all(is_lead_in_text(t) for t in yes), [t for t in yes if not is_lead_in_text(t)]
    assert not any(is_lead_in_text(t) for t in no)
    long = "The following table sets forth " + "the amounts of each kind of cost we incurred " * 6 + ":"
    assert len(title_of(long)) <= 164 and title_of(long).endswith(" ...")


def test_fragments_join_a_neighbour_and_coverage_holds():
    note = "See accompanying notes to consolidated financial statements."
    md = (f"# Statements\n\n## Balance sheet\n\n{TABLE}\n\n{note}\n\n"
          "## Form\n\n(Mark One)\n\n## Quarterly report\n\n" + PROSE + " " + PROSE)
    els, chunks = _chunks(md)
    assert all(len(c.text) >= CFG.min_chars for c in chunks), [c.text for c in chunks if len(c.text) < CFG.min_chars]
    with_note = next(c for c in chunks if note in c.text)
    assert "Lease cost item 23" in with_note.text, "a trailing line joins the chunk before it in its section"
    mark = next(c for c in chunks if "(Mark One)" in c.text)
    assert PROSE in mark.text and mark.breadcrumb == "Statements > Form", \
        "a section too small to stand alone joins the next section's first chunk, its heading kept in the body"
    assert "Quarterly report\n" in mark.text
    # Within sections only: the note still joins its table, the small section stays as it is.
    _, section = _chunks(md, CFG.model_copy(update={"merge_fragments": "section"}))
    assert any(note in c.text and "Lease cost item 23" in c.text for c in section)
    assert any(_body(c) == "(Mark One)" for c in section)
    # None (the default): they stay apart.
    _, kept = _chunks(md, CFG.model_copy(update={"merge_fragments": "none"}))
    assert any(_body(c) == "(Mark One)" for c in kept) and any(_body(c) == note for c in kept)
    assert PlannerConfig().merge_fragments == "none"


def test_fragments_never_break_faq_pairs_or_pass_max_chars():
    faq = "# FAQ\n\n" + "\n\n".join(f"**Can I do thing {i}?**\n\nYes, when the sky is blue." for i in range(4))
    _, chunks = _chunks(faq)
    assert len(chunks) == 4 and all(c.text.count("?") == 1 for c in chunks)
    big = "Words " * 140  # 839 chars: a chunk of it is 842-846, with the fragment 850+
    _, chunks = _chunks(f"# A\n\n{big}\n\n## B\n\nTiny.\n\n## C\n\n{big}", CFG.model_copy(update={"max_chars": 848}))
    assert any(_body(c).strip() == "Tiny." for c in chunks), "no neighbour has room: it stays"
    # A whole document shorter than min_chars is one chunk, whatever it holds.
    _, chunks = _chunks("# Memo\n\nShort.\n\n## Next\n\nAlso short.")
    assert len(chunks) == 1


def test_a_parenthetical_or_unit_line_is_never_a_heading():
    md = f"# Consolidated Balance Sheets\n\n## (unaudited)\n\n### In millions\n\n{PROSE}"
    els, chunks = _chunks(md)
    assert [e.kind for e in els] == ["heading", "paragraph", "paragraph", "paragraph"]
    assert all(c.breadcrumb == "Consolidated Balance Sheets" for c in chunks)


def test_a_run_that_fills_its_chunks_splits_evenly_rather_than_leave_a_tail():
    # Paragraphs of 250, 100 and 100 characters at target 400: greedy packing makes 351 + a 100-character tail;
    # balanced, the middle paragraph moves to the tail and neither chunk is under min_chars or past the target.
    long, mid, last = "A" * 249 + ".", "B" * 99 + ".", "C" * 99 + "."
    md = f"# Notes\n\n{long}\n\n{mid}\n\n{last}"
    cfg = CFG.model_copy(update={"merge_fragments": "none", "min_chars": 150})
    _, greedy = _chunks(md, cfg)
    assert [_body(c) for c in greedy] == [f"{long}\n{mid}", last]
    _, even = _chunks(md, cfg.model_copy(update={"balance_tails": True}))
    assert [_body(c) for c in even] == [long, f"{mid}\n{last}"]
    # Equal units cannot do better than greedy: nothing moves that would make the tail the larger one.
    same = "# Notes\n\n" + "\n\n".join([long] * 3)
    assert [c.text for c in _chunks(same, cfg)[1]] == \
        [c.text for c in _chunks(same, cfg.model_copy(update={"balance_tails": True}))[1]]
    # A table's rows too: the last row alone after a full chunk takes the row before it, titled as the table's
    # later chunks are; the lead-in keeps rows of its own.
    lead = "The components of lease cost for the years ended December 31 were as follows (in millions):"
    rows = "".join(f"| Operating lease cost for item number {i} of the portfolio | {i * 100} | {i * 90} |\n"
                   for i in range(4))
    md = f"# Leases\n\n{lead}\n\n| | 2023 | 2022 |\n| --- | --- | --- |\n{rows}"
    cfg = cfg.model_copy(update={"target_chars": 330})
    _, greedy = _chunks(md, cfg)
    assert [len(_body(c).splitlines()) for c in greedy] == [4, 2], "greedy: lead-in + 3 rows, then title + 1 row"
    _, even = _chunks(md, cfg.model_copy(update={"balance_tails": True}))
    assert [len(_body(c).splitlines()) for c in even] == [3, 3]
    assert _body(even[0]).startswith(lead + "\n") and _body(even[1]).startswith(title_of(lead) + "\n")
    assert "item number 2" in _body(even[1]) and "item number 3" in _body(even[1])


def test_a_figure_without_a_description_is_no_chunk_of_its_own():
    md = f"# Employees\n\n{PROSE}\n\n![Image](figure)\n\n{PROSE}\n\n![Bar chart of revenue by segment, 2021-2023](figure)"
    _, chunks = _chunks(md, CFG.model_copy(update={"merge_fragments": "none"}))
    blank = next(c for c in chunks if "Image" in _body(c).splitlines())
    assert blank.modality == "text" and PROSE in blank.text, "a placeholder packs with the prose around it"
    assert all(c.modality != "figure" for c in chunks if "Image" in _body(c).splitlines())
    described = [c for c in chunks if "Bar chart" in c.text]
    assert len(described) == 1 and described[0].modality == "figure" and PROSE not in described[0].text


def test_a_line_without_words_is_no_chunk_of_its_own():
    # A form's blank ("_") after a table and a rule at a section's start: nothing a question could match.
    md = f"# Strategy 2.2.2\n\n{PROSE}\n\n| Target | Actual |\n| --- | --- |\n| 5 | 4 |\n\n_\n\n## Strategy 2.2.3\n\n" \
         f"____________\n\n{PROSE}"
    _, chunks = _chunks(md, CFG.model_copy(update={"merge_fragments": "none"}))
    assert all(any(ch.isalnum() for ch in _body(c)) for c in chunks)
    table = next(c for c in chunks if "Target" in c.text)
    assert table.modality == "table" and _body(table).endswith("\n_")
    assert any(_body(c).startswith("____________\n" + PROSE[:20]) for c in chunks)


def test_boilerplate_that_repeats_in_a_document_stays_with_what_it_follows():
    note = "See accompanying notes to consolidated financial statements."
    template = "| Description | Target |\n| --- | --- |\n| [To be determined] | Actual |\n"
    md = (f"# Statements\n\n## Balance sheet\n\n{TABLE}\n\n{note}\n\n## Cash flows\n\n{TABLE}\n\n{note}\n\n"
          f"## Strategy 1\n\nStrengthen asset management to cut lifecycle costs.\n\n{template}\n"
          f"## Strategy 2\n\nPromote innovative financing for repairs.\n\n{template}\n"
          "## Item 4\n\nNot applicable.\n\n## Item 5\n\nNot applicable.")
    on = CFG.model_copy(update={"merge_fragments": "none", "join_boilerplate": True})
    _, off = _chunks(md, on.model_copy(update={"join_boilerplate": False}))
    assert sum(_body(c) == note for c in off) == 2, "off (the default): the notes stand alone"
    _, chunks = _chunks(md, on)
    assert all(_body(c) != note for c in chunks) and sum(note in c.text for c in chunks) == 2
    assert all(note not in c.text or "Lease cost item 23" in c.text for c in chunks), "it joins its statement"
    strategy = [c for c in chunks if "To be determined" in c.text]
    assert len(strategy) == 2 and all("Strengthen" in c.text or "Promote" in c.text for c in strategy), \
        "an empty template table repeated on every page stays with the prose it follows"
    # A repeated line that is the whole of its section is still its section's chunk.
    assert sum(_body(c) == "Not applicable." for c in chunks) == 2
    # A row that merely repeats inside a real table stays with its table.
    rows = "| Total | 100 | 90 |\n" + "".join(f"| Item {i} with a longer label | {i} | {i} |\n" for i in range(8))
    md = f"# A\n\nSome prose about the first table here.\n\n| | 2023 | 2022 |\n| --- | --- | --- |\n{rows}\n" \
         f"# B\n\n| | 2023 | 2022 |\n| --- | --- | --- |\n| Total | 100 | 90 |\n| Other | 1 | 2 |\n"
    _, chunks = _chunks(md, on)
    first_table = next(c for c in chunks if "Item 0" in c.text)
    assert first_table.modality == "table" and "Some prose" not in first_table.text


def test_a_lead_in_opens_its_table_across_the_tables_title():
    lead = "The following table summarizes customer deposits and consolidated debt outstanding as of December 31:"
    md = f"# Funding\n\n{PROSE}\n\n{lead}\n\n## TABLE 18: SUMMARY OF CUSTOMER DEPOSITS AND DEBT\n\n{TABLE}"
    els, chunks = _chunks(md)
    first = next(c for c in chunks if lead in c.text)
    assert _body(first).startswith(f"{lead}\nTABLE 18: SUMMARY OF CUSTOMER DEPOSITS AND DEBT\n")
    assert "Lease cost item 0" in first.text and PROSE not in first.text and first.modality == "table"
    assert first.breadcrumb == "Funding", "the chunk sits where its lead-in does; the title stays in its body"
    later = [c for c in chunks if c.modality == "table" and c is not first]
    assert later and all(_body(c).startswith(title_of(lead) + "\n") for c in later)
    # A long heading is a new part of the document, not a title: the lead-in stays where it was.
    part = "Part II. Management's discussion of the results of operations, liquidity and capital resources for the years ended December 31"
    _, chunks = _chunks(f"# Funding\n\n{PROSE}\n\n{lead}\n\n## {part}\n\n{TABLE}",
                        CFG.model_copy(update={"merge_fragments": "none"}))
    assert any(c.text.endswith(lead) for c in chunks)
