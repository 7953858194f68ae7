"""How many times a segment's conversion has started in this run, across workers and nodes.

Ray retries the work of a dead or unreachable actor; the retry bound has to be unlimited (``ray.actor_max_task_retries``
-1), because Ray spends retries while a lost node is still being detected and a small bound ends the whole run. What
then stops a segment that kills its worker every time (a PDF that crashes pdfium, an image that takes the engine
down) is this count: every start leaves one marker in the run folder, and past ``ray.segment_max_attempts`` the
segment fails alone, ``quarantined``, and the run goes on. Markers of a run are cleared when the next run starts.
"""

from __future__ import annotations

import uuid

from chunker.run.layout import ATTEMPTS, RunStore, segment_part
from chunker.types import Problem, SegmentJob, Stage


def start_attempt(store: RunStore, job: SegmentJob, max_attempts: int) -> Problem | None:
    """Record one start of ``job``'s conversion; the problem that fails it when it has started too often."""
    folder = f"{ATTEMPTS}/{segment_part(job.doc_id, job.segment_index)}"
    store.write_bytes(f"{folder}/{uuid.uuid4().hex}", b"")
    n = store.count(folder)
    if n > max_attempts:
        return Problem(Stage.CONVERT, "quarantined",
                       f"conversion started {n} times and its worker died each time; not retried again")
    return None
