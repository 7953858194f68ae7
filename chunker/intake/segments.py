"""Cut a document into segments that convert in parallel (the boundary rule is :func:`plan_segments`)."""

from __future__ import annotations

import math

from chunker.config import IntakeConfig
from chunker.types import DocumentRecord, SegmentJob


def plan_segments(doc: DocumentRecord, cfg: IntakeConfig) -> list[SegmentJob]:
    """Cut a document into segments of ``segment_pages`` (the last may be shorter).

    Boundary rule: segment s owns pages [s*S+1, min((s+1)*S, n)]. Every segment after the first also converts the
    ``segment_overlap_pages`` pages before it, only to build its starting context (summary, heading path, open table
    header); that output is dropped. A structure crossing the boundary is therefore cut there: the part on the
    owned pages of each segment becomes that segment's chunks, and the later part keeps its heading path and table
    header from the overlap context. Nothing is dropped or duplicated.
    """
    n, size = doc.num_pages, cfg.segment_pages
    count = max(1, math.ceil(n / size))
    jobs = []
    for s in range(count):
        start = s * size + 1
        end = min((s + 1) * size, n)
        ctx = max(1, start - cfg.segment_overlap_pages) if s > 0 else start
        jobs.append(SegmentJob(doc_id=doc.doc_id, source_uri=doc.source_uri, source=doc.source, num_pages=n,
                               segment_index=s, num_segments=count, page_start=start, page_end=end,
                               context_start=ctx, batch_pages=cfg.batch_pages, identity=doc.identity))
    return jobs
