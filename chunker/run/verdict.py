"""The one rule that decides a document's status, from typed facts only (never from message text).

A document that failed intake, or was skipped, keeps that outcome. Otherwise its segments decide:

* every segment failed (conversion raised or timed out, planning broke coverage, ...) -> ``failed``;
* some segment failed -> ``partial``;
* pages left empty (neither the model nor the text layer could read them) -> ``partial``;
* more fallback pages than ``converter.max_fallback_share`` of the converted pages -> ``partial``;
* otherwise ``ok``; fallback pages within the share are still named among the problems, so they stay visible;
* and whatever the above said, a document that yields no chunk at all (blank pages, images without OCR) is
  ``failed`` (``no_text``): nothing of it is indexed, and a status must not say otherwise.

After that, the write stage has the last word (:func:`write_verdict`): a document whose rows the store refused is
``failed``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from chunker.types import ConvertedBatch, DocumentRecord, Problem, Stage, Status, page_ranges


@dataclass
class SegmentFacts:
    """What the verdict needs of one segment: small enough for the driver to keep per document in flight."""

    segment_index: int
    pages: int  # pages the segment owns
    failed: bool = False  # no chunks from this segment: a step raised, timed out or broke coverage
    problems: list[Problem] = field(default_factory=list)  # why it failed (or what it lost)
    fallback_pages: list[int] = field(default_factory=list)
    lost_pages: list[int] = field(default_factory=list)
    lost_reasons: list[str] = field(default_factory=list)  # the batch errors behind the lost pages

    @classmethod
    def from_batches(cls, segment_index: int, pages: int, batches: list[ConvertedBatch]) -> "SegmentFacts":
        owned = [b for b in batches if not b.context_only]
        return cls(segment_index=segment_index, pages=pages,
                   fallback_pages=sorted({p for b in owned for p in b.fallback_pages}),
                   lost_pages=sorted({p for b in owned for p in b.lost_pages}),
                   lost_reasons=[b.error for b in owned if b.lost_pages and b.error])


def document_verdict(doc: DocumentRecord, segments: list[SegmentFacts], max_fallback_share: float,
                     num_chunks: int | None = None) -> tuple[Status, list[Problem]]:
    """The document's status and problems: the only function in the project that decides a status.
    ``num_chunks``: the chunks its segments gave (None: not known, the no-text rule is not applied)."""
    status, problems = _segments_verdict(doc, segments, max_fallback_share)
    if num_chunks == 0 and status in (Status.OK, Status.PARTIAL):
        pages = sum(s.pages for s in segments if not s.failed)
        where = "its page" if pages == 1 else f"its {pages} pages"
        return Status.FAILED, [*problems, Problem(Stage.CONVERT, "no_text", f"nothing to index: {where} gave no "
                                                  "text to chunk (no text layer, or only running headers)")]
    return status, problems


def _segments_verdict(doc: DocumentRecord, segments: list[SegmentFacts],
                      max_fallback_share: float) -> tuple[Status, list[Problem]]:
    if doc.status in (Status.FAILED, Status.SKIPPED):
        return doc.status, list(doc.problems)
    if not segments:
        return Status.FAILED, [*doc.problems, Problem(Stage.CONVERT, "no_output", "no segment of the document came back")]
    many = len(segments) > 1
    problems: list[Problem] = list(doc.problems)
    for s in sorted(segments, key=lambda s: s.segment_index):
        for p in s.problems:
            problems.append(Problem(p.stage, p.code, f"segment {s.segment_index}: {p.message}" if many else p.message))
    failed = [s for s in segments if s.failed]
    if len(failed) == len(segments):
        return Status.FAILED, problems
    status = Status.PARTIAL if failed else Status.OK
    done = [s for s in segments if not s.failed]
    total = sum(s.pages for s in done)
    if total == 0:
        return Status.PARTIAL, [*problems, Problem(Stage.CONVERT, "no_pages", "no pages converted")]
    lost = sorted({p for s in done for p in s.lost_pages})
    if lost:
        status = Status.PARTIAL
        why = "; ".join(dict.fromkeys(r for s in done for r in s.lost_reasons))
        problems.append(Problem(Stage.CONVERT, "pages_lost",
                                f"pages {page_ranges(lost)} left empty" + (f" ({why})" if why else "")))
    fallback = sorted({p for s in done for p in s.fallback_pages})
    if fallback:
        share = len(fallback) / total
        msg = f"{len(fallback)} of {total} pages ({share:.0%}) fell back to the text layer: pages {page_ranges(fallback)}"
        if share > max_fallback_share:
            status = Status.PARTIAL
            problems.append(Problem(Stage.CONVERT, "fallback_share", f"{msg}; above max_fallback_share {max_fallback_share}"))
        else:
            problems.append(Problem(Stage.CONVERT, "fallback_pages", f"{msg}; within max_fallback_share {max_fallback_share}"))
    return status, problems


def write_verdict(doc: DocumentRecord, problem: Problem) -> tuple[Status, list[Problem]]:
    """A document the write stage could not take (the store refused its rows, or the writer failed on it) is
    ``failed`` whatever its segments said: what of it got into the store is deleted again, so nothing is indexed."""
    return Status.FAILED, [*doc.problems, problem]
