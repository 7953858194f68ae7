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
