"""The per-request error every backend raises for trouble the caller may retry (or route around)."""

from __future__ import annotations

from chunker.errors import ChunkerError


class BackendRequestError(ChunkerError):
    """One request failed; ``retryable`` says whether the same request may succeed later (timeouts, 5xx, garbled
    replies) or must change first (``retryable=False``: e.g. too many images or a prompt too long: split the batch).
    Fatal conditions are :class:`~chunker.backends.base.BackendUnavailable` / :class:`~chunker.backends.base.EngineDead`.
    """

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = True) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable
