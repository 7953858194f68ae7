from chunker.contract import SEGMENT_STRIDE, parse_batches, parse_markdown, table_row_sentence
from chunker.types import ConvertedBatch

MD = """<!-- page 3 -->
# Manual

## Setup

Intro text that is
reflowed.

Follow these steps:

1. Open the lid.
2. Turn the valve.
<!-- page 4 -->
3. Close the lid.

| Model | Flow | Price |
| --- | --- | --- |
| A-1 | 10 l/min | 100 |
| B-2 | 20 l/min | |

<!-- table -->
Plan: Gold; Lounge: yes.
Plan: Silver; Lounge: no.
<!-- /table -->

![Figure 1: Pump diagram](figure) <!-- bbox 10 20 110 220 -->
The inlet is on the left.

### Deep

```
code here
```
"""


def test_contract_kinds_pages_and_paths():
    els = parse_markdown("doc", [(MD, 1)])
    kinds = [e.kind for e in els]
    assert kinds == ["heading", "heading", "paragraph", "paragraph", "list", "table_row", "table_row",
                     "table_row", "table_row", "figure", "heading", "code"]
    assert [e.element_id for e in els][:3] == ["doc:0", "doc:1", "doc:2"]
    para = els[2]
    assert para.text == "Intro text that is reflowed." and para.page_start == 3
    steps = els[4]
    assert steps.text.count("\n") == 2 and "Close the lid" in steps.text, "a list continues over a page break"
    assert (steps.page_start, steps.page_end) == (3, 4) and steps.attrs == {"ordered": True}
    assert els[5].text == "Model: A-1; Flow: 10 l/min; Price: 100."
    assert els[6].text == "Model: B-2; Flow: 20 l/min."
    assert els[5].group == els[6].group != els[7].group == els[8].group
    fig = els[9]
    assert fig.bbox == [10.0, 20.0, 110.0, 220.0] and "inlet" in fig.text
    assert els[11].heading_path == ["Manual", "Setup", "Deep"]
    assert els[2].heading_path == ["Manual", "Setup"]


def test_continued_table_keeps_group_and_segments_do_not_collide():
    a = "<!-- page 1 -->\n<!-- table -->\nA: 1; B: 2.\n<!-- /table -->\n"
    b = "<!-- page 2 -->\n<!-- table continued -->\nA: 3; B: 4.\n<!-- /table -->\n"
    els = parse_markdown("d", [(a, 1), (b, 2)], segment_index=2, heading_path=["Top"])
    assert els[0].group == els[1].group
    assert els[0].ordinal == 2 * SEGMENT_STRIDE and els[1].element_id == f"d:{2 * SEGMENT_STRIDE + 1}"
    assert els[0].heading_path == ["Top"]


def test_overlap_batches_are_dropped():
    batches = [
        ConvertedBatch("d", 1, 0, 63, 64, "<!-- page 63 -->\nold text", context_only=True),
        ConvertedBatch("d", 1, 1, 65, 68, "<!-- page 65 -->\nnew text"),
    ]
    els = parse_batches("d", batches, 1)
    assert [e.text for e in els] == ["new text"]


def test_row_sentence_skips_empty_cells_and_writes_no_placeholder_header():
    assert table_row_sentence(["A", ""], ["1", "2"]) == "A: 1; 2."
    assert table_row_sentence(["A"], [""]) == ""
    # No header at all (a two-column schedule): the first cell labels the rest, never "Column 1: 2024; Column 2: ...".
    assert table_row_sentence(["", ""], ["2024", "3,417"]) == "2024: 3,417."
    assert table_row_sentence([], ["Total", "5", "7"]) == "Total: 5; 7."


def test_list_continues_past_blank_line_and_page_marker():
    md = "1. one\n2. two\n\n<!-- page 2 -->\n\n3. three\n\nAfter."
    els = parse_markdown("d", [(md, 1)])
    assert [e.kind for e in els] == ["list", "paragraph"]
    assert els[0].page_end == 2 and "3. three" in els[0].text and els[1].page_start == 2


def test_the_writers_produce_what_the_parser_reads():
    from chunker.contract import figure_line, page_marker, page_numbers, parse_markdown, table_block

    md = "\n".join([
        page_marker(3), "# Pumps", "",
        *table_block(["Part: seal; Interval: 6 months.", "Part: impeller; Interval: 12 months."]), "",
        page_marker(4), *table_block(["Part: bearing; Interval: 24 months."], continued=True), "",
        figure_line("Flow [inlet] to outlet", [1.0, 2.5, 30.0, 40.0]),
    ])
    assert page_numbers(md) == [3, 4]
    els = parse_markdown("d", [(md, 1)])
    rows = [e for e in els if e.kind == "table_row"]
    assert [e.page_start for e in rows] == [3, 3, 4] and len({e.group for e in rows}) == 1, "continued = same table"
    [fig] = [e for e in els if e.kind == "figure"]
    assert fig.text == "Flow (inlet) to outlet" and fig.bbox == [1.0, 2.5, 30.0, 40.0] and fig.page_start == 4


def test_a_label_set_as_a_heading_over_one_value_is_a_label_value_pair():
    # A form's grid read as headings: each label (ending with ":") holds one short value before the next label.
    md = ("## Stakeholders\n\n##### OST-P :\n\nLead agency\n\n##### **FHWA:**\n\nContributing agency\n\n"
          "## Note:\n\nLiability is limited as per the Montreal Convention.\n\n"
          "## Highlights:\n\n- Multiple appetizers\n- Three desserts\n\n"
          "## Remarks:\n\nThe first of two paragraphs.\n\nThe second paragraph.\n")
    els = parse_markdown("d", [(md, 1)])
    got = [(e.kind, e.text) for e in els]
    assert ("paragraph", "OST-P: Lead agency") in got and ("paragraph", "FHWA: Contributing agency") in got
    assert ("paragraph", "Note: Liability is limited as per the Montreal Convention.") in got
    pair = next(e for e in els if e.text == "OST-P: Lead agency")
    assert pair.heading_path == ["Stakeholders"], "the pair sits under the form's own heading"
    # A label over a list, or over more than one block, is a heading of what follows.
    assert ("heading", "Highlights:") in got and ("heading", "Remarks:") in got
    assert next(e for e in els if e.text == "The second paragraph.").heading_path == ["Remarks:"]


def test_a_sentence_cut_between_two_batches_is_one_paragraph_again():
    """The page break between two batches falls inside a sentence: no converter sees both sides, so the parser
    joins them (a batch that opens with the rest of one); anything that can start a paragraph stays apart."""
    first = "<!-- page 4 -->\n# Risks\n\nWe depend on a few suppliers, and a disruption at any of"
    pages = [(first, 4), ("<!-- page 5 -->\nthem could delay our shipments.\n\nWe hold no inventory.", 5)]
    els = parse_markdown("d", pages)
    assert [(e.kind, e.text, e.page_start, e.page_end) for e in els] == [
        ("heading", "Risks", 4, 4),
        ("paragraph", "We depend on a few suppliers, and a disruption at any of them could delay our shipments.", 4, 5),
        ("paragraph", "We hold no inventory.", 5, 5)]
    assert [e.ordinal for e in els] == [0, 1, 2]
    # A word hyphenated across the break keeps its hyphen (it may be a compound: "long-term").
    els = parse_markdown("d", [("The plan covers long-", 4), ("term debt only.", 5)])
    assert [e.text for e in els] == ["The plan covers long-term debt only."]
    # Not joined: the first part ends a sentence; the next batch opens with a capital, a name in lower case
    # ("iPhone"), a lettered item, a heading, a list or a table; or the break is inside one batch.
    for a, b in [("Sales grew.", "then they fell"), ("Sales grew in", "The next year"), ("Sales of the", "iPhone grew"),
                 ("Terms of the", "a. first term"), ("Sales grew in", "# heading"), ("Sales grew in", "- item"),
                 ("Sales grew in", "| a | b |\n| --- | --- |\n| 1 | 2 |")]:
        els = parse_markdown("d", [(a, 4), (b, 5)])
        assert len(els) == 2 and els[0].text == a, (a, b, [e.text for e in els])
    els = parse_markdown("d", [("Sales grew in\n\nthe year.", 4)])
    assert len(els) == 2


def test_a_table_of_contents_title_heads_only_its_entries():
    """A report's "Contents" set one level above its sections would head every chunk of the document ("Contents >
    Performance Details > ..."): it heads what sits under it until the next heading of any level, and a segment
    handed a chain that ends in it drops it at its first heading too."""
    md = ("# Annual Report\n\n# Contents\n\nPerformance Details 32\n\n### Performance Details\n\nResults rose.\n\n"
          "## Table of Contents\n\n## Strategic Goals\n\nThree goals.")
    els = parse_markdown("d", [(md, 1)])
    paths = {e.text: e.heading_path for e in els if e.kind == "paragraph"}
    assert paths == {"Performance Details 32": ["Contents"], "Results rose.": ["Performance Details"],
                     "Three goals.": ["Strategic Goals"]}
    seeded = parse_markdown("d", [("### Results\n\nRose.", 5)], heading_path=["Report", "CONTENTS"],
                            heading_levels=[1, 2])
    assert seeded[-1].heading_path == ["Report", "Results"]
    # A section that only names contents among other words is a section.
    els = parse_markdown("d", [("# Contents of the Kit\n\n## Cables\n\nTwo cables.", 1)])
    assert els[-1].heading_path == ["Contents of the Kit", "Cables"]
