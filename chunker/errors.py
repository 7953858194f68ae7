"""The one error root of the project, and the two families a run tells apart.

* :class:`SetupError`: the run cannot go on (no model, package, GPU or store; a wrong schema; a wrong input argument
  or config). It stops a run at once, with one line, wherever it is raised, also inside a Ray actor.
* :class:`DocumentError`: one document (or one segment of it) cannot be processed. It fails that document alone,
  with the stage and a short code, and the run goes on.

Everything else the project raises on purpose derives from :class:`ChunkerError`; an exception that is not a
``ChunkerError`` is a defect (or a third-party surprise) and is reported as such on the document it hit.
"""

from __future__ import annotations

from chunker.types import Problem, Stage


class ChunkerError(Exception):
    """Root of every error this project raises on purpose."""


class SetupError(ChunkerError):
    """The run cannot go on as configured; the message says what to install, start or change."""


class DocumentError(ChunkerError):
    """One document cannot be processed; it fails alone with ``stage`` and ``code``."""

    def __init__(self, message: str, *, stage: Stage, code: str) -> None:
        super().__init__(message)
        self.stage = stage
        self.code = code

    def problem(self) -> Problem:
        return Problem(self.stage, self.code, str(self))

    def __reduce__(self):  # noqa: ANN204 - keyword-only arguments survive pickling (Ray ships errors between processes)
        return (_document_error, (type(self), str(self), self.stage, self.code))


class StoreError(ChunkerError):
    """The vector store cannot be used as configured; the message says what to do."""


class StoreUnavailable(StoreError, SetupError):
    """The Milvus server (or the Lite data directory) cannot be reached or opened."""


class SchemaMismatch(StoreError, SetupError):
    """An existing collection was built with another schema version or embedding dimension."""


def _document_error(cls: type[DocumentError], message: str, stage: Stage, code: str) -> DocumentError:
    return cls(message, stage=stage, code=code)


def find_setup_error(exc: BaseException) -> SetupError | None:
    """The :class:`SetupError` inside ``exc``'s chain, if any.

    Ray re-raises an actor's exception as a ``RayTaskError`` that is also an instance of the original class
    (``RayTaskError.as_instanceof_cause``, ray/exceptions.py) and chains it under Ray Data's own errors
    (``UserCodeException``); an actor whose ``__init__`` raised dies with an ``ActorDiedError`` holding the
    ``RayTaskError`` in its ``args``. Walking those links finds the original by type.
    """
    seen: set[int] = set()
    stack: list[BaseException] = [exc]
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, SetupError):
            # Ray's wrapper is a SetupError too, but its text is the whole remote traceback: prefer the original.
            original = getattr(e, "cause", None)
            return original if isinstance(original, SetupError) else e
        # Ray keeps the original in ``cause`` (RayTaskError) or only in ``args`` (ActorDiedError from __init__).
        linked = (e.__cause__, e.__context__, getattr(e, "cause", None), *getattr(e, "args", ()))
        stack.extend(x for x in linked if isinstance(x, BaseException))
    return None
