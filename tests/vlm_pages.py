"""Shared by the VLM converter's tests: page "images" that name their page, well-formed model answers with the
context trailer, a text-layer fallback that records what it was asked for, and the one status rule on a document."""

from __future__ import annotations

import json

from chunker.backends.base import GenerationRequest
from chunker.run.verdict import SegmentFacts, document_verdict


def document_status(batches: list, max_fallback_share: float) -> tuple[str, str]:
    """The verdict (chunker.run.verdict, the one status rule) on one document made of these batches."""
    from chunker.types import DocumentRecord, problems_text

    owned = [b for b in batches if not b.context_only]
    pages = sum(b.page_end - b.page_start + 1 for b in owned)
    doc = DocumentRecord("d", "d.pdf", "d.pdf", pages)
    status, problems = document_verdict(doc, [SegmentFacts.from_batches(0, pages, batches)], max_fallback_share)
    return str(status), problems_text(problems)


class FakeImages:
    """Page "images" that name their document and page, so the engine can tell what it was sent."""

    mime = "image/jpeg"

    def __init__(self, doc_id: str) -> None:
        self.doc_id = doc_id

    def image(self, page: int) -> bytes:
        return f"{self.doc_id}:{page}".encode()

    def size(self, page: int) -> tuple[int, int]:
        return (12, 16)


def pages_of(req: GenerationRequest) -> tuple[str, list[int]]:
    names = [img.decode().rsplit(":", 1) for img in req.images]
    return names[0][0], [int(p) for _, p in names]


def trailer(summary: str, path: list[str] | None = None, table: str = "") -> str:
    return "<context>" + json.dumps({"summary": summary, "heading_path": path or [], "open_table": table}) + "</context>"


def page_answer(doc: str, pages: list[int]) -> str:
    """A valid markdown-mode answer: a title on page 1, a part heading every 10 pages, one paragraph per page."""
    out = []
    for p in pages:
        out.append(f"<!-- page {p} -->")
        if p == 1:
            out += [f"# {doc}", ""]
        if p % 10 == 1:
            out += [f"## Part {p // 10}", ""]
        out += [f"Text of {doc} page {p}.", ""]
    path = [doc, f"Part {(pages[-1] - 1) // 10}"]
    return "\n".join(out) + trailer(f"{doc} read up to page {pages[-1]}", path)



class TextFallback:
    def __init__(self, fail: bool = False) -> None:
        self.calls: list[list[int]] = []
        self.fail = fail

    def markdown_for_pages(self, source_uri: str, pages: list[int]) -> str:
        self.calls.append(list(pages))
        if self.fail:
            raise OSError("cannot open PDF")
        return "\n".join(f"<!-- page {p} -->\nFallback text of page {p}.\n" for p in pages)

