"""What the dense leg embeds for a chunk: the document's identity once, never twice."""

from __future__ import annotations

from chunker.index.embed import passage
from chunker.types import Chunk


def _chunk(text: str, identity: str) -> Chunk:
    return Chunk("d-1", "d", ["d:1"], text, text.split("\n\n", 1)[0], 1, 1, "text", "rules", "h", identity=identity)


def test_identity_leads_a_chunk_that_does_not_name_its_document() -> None:
    c = _chunk("Item 7 > Liquidity\n\nCash and cash equivalents were $24,687 million.",
               "FORM 10-Q; Apple Inc.; For the quarterly period ended April 1, 2023")
    assert passage(c) == "FORM 10-Q; Apple Inc.; For the quarterly period ended April 1, 2023\n" + c.text
    assert passage(c, identity=False) == c.text


def test_identity_is_not_repeated_before_a_breadcrumb_that_opens_with_it() -> None:
    # A one-title document: the title is the identity and the breadcrumb's root. Blanks and letter case aside.
    c = _chunk("CloudWay 24  Baggage Allowance Policy > Cabin Baggage\n\nOne bag of 7 kg.",
               "CloudWay 24 Baggage allowance policy")
    assert passage(c) == c.text
    # The identity only as a part of the breadcrumb root, or further down the text, still leads.
    inner = _chunk("Baggage > Cabin\n\nCloudWay 24 Baggage Allowance Policy allows one bag.",
                   "CloudWay 24 Baggage Allowance Policy")
    assert passage(inner).startswith("CloudWay 24 Baggage Allowance Policy\nBaggage > Cabin")


def test_a_blank_identity_adds_nothing() -> None:
    c = _chunk("Heading\n\nBody.", "  ")
    assert passage(c) == c.text


def test_a_run_of_rows_writes_its_column_paths_once_for_the_embedder() -> None:
    # Rows as the contract's figure_row_sentence writes them: the first keeps its paths, later rows with the same
    # paths read "label | unit | figures"; a row whose paths differ starts a new run with its own paths.
    rows = [
        "Net sales | in millions | Three Months Ended July 1, 2023: $81,797; Three Months Ended June 25, 2022: $82,959",
        "Cost of sales | in millions | Three Months Ended July 1, 2023: 45,384; Three Months Ended June 25, 2022: (47,074)",
        "Gross margin % | Nine Months Ended July 1, 2023: 44.1%; Nine Months Ended June 25, 2022: —",
    ]
    c = _chunk("Income > Segments\n\nThe following table shows net sales (in millions):\n" + "\n".join(rows), "")
    assert passage(c, compact=True).split("\n")[2:] == [
        "The following table shows net sales (in millions):",
        rows[0],
        "Cost of sales | in millions | 45,384; (47,074)",
        rows[2],
    ]
    # The stored text is what a reader gets; only the embedder's copy is shorter.
    assert rows[1] in c.text
    assert passage(c) == c.text  # off by default (embed.compact_rows)


def test_lines_that_are_not_rows_of_figures_pass_as_they_are() -> None:
    # A form's pairs hold words, not figures; a prose line with a colon and a bar is prose; two such lines in a
    # row with the same "paths" must not lose their values.
    text = ("Report\n\nLocation: Springfield; Date & Time: 12 May 2021, 14:05\n"
            "Location: Shelbyville; Date & Time: 13 May 2021, 09:10\n"
            "Owner | Operator: Springfield Flying Club; Registration: N123AB\n"
            "Owner | Operator: Springfield Flying Club; Registration: N123AB")
    c = _chunk(text, "")
    assert passage(c, compact=True) == text
