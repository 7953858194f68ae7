"""Telling an unreachable Milvus from a wrong request: the typed errors of a store that is gone, locked or silent.

:class:`chunker.index.store.ChunkStore` wraps every call it makes in :func:`answering` and builds its connection
error with :func:`connect_error`; serving and the bulk sink ask :func:`is_outage` whether an error means "try again
later" (503) rather than "this request or this document is wrong". pymilvus is imported inside the functions.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from chunker.config import MilvusConfig
from chunker.errors import StoreError, StoreUnavailable


def lite_dir_locked(path: Path) -> bool:
    """True when another process holds Milvus Lite's LOCK file in ``path`` (False where it cannot tell)."""
    try:
        import fcntl

        fd = os.open(path / "LOCK", os.O_RDWR)
    except (ImportError, OSError):
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


def is_outage(exc: BaseException) -> bool:
    """True for errors of an unreachable store rather than of a wrong request or a defect: what serving answers
    with 503 and retries later. A server that died after we connected surfaces as a plain ``MilvusException`` with
    code ``CONNECT_FAILED`` (measured with pymilvus 3.0), so the code is checked too."""
    from pymilvus.client.types import Status
    from pymilvus.exceptions import (ConnectError, ConnectionNotExistException, MilvusException,
                                     MilvusUnavailableException)

    if isinstance(exc, (StoreUnavailable, ConnectionError, TimeoutError, ConnectError, ConnectionNotExistException,
                        MilvusUnavailableException)):
        return True
    return isinstance(exc, MilvusException) and getattr(exc, "code", None) == Status.CONNECT_FAILED


def connect_error(cfg: MilvusConfig, server: bool, exc: Exception) -> StoreError:
    """The error to raise when the client for ``cfg.uri`` could not be built: what to do about it, in one line."""
    uri = cfg.uri
    if not server and lite_dir_locked(Path(uri).expanduser()):
        return StoreUnavailable(
            f"Milvus Lite data directory {uri!r} is locked by another process (Lite allows one process per "
            f"directory). Serve it to several processes with `milvus-lite server --data-dir {uri} "
            f"--host 127.0.0.1 --port N` and set milvus.uri=http://127.0.0.1:N"
        )
    if server:
        return StoreUnavailable(
            f"cannot reach Milvus at {uri} ({exc}); start the server, check milvus.uri, or set "
            f"${cfg.token_env} if it needs a token"
        )
    return StoreUnavailable(f"cannot open Milvus Lite at {uri!r}: {exc}")


@contextmanager
def answering(cfg: MilvusConfig, call: str) -> Iterator[None]:
    """Turns 'the server did not answer in time / is gone' into :class:`StoreUnavailable` (typed, by status
    code): pymilvus raises a bare grpc error for a missed deadline and a MilvusException for a lost peer."""
    import grpc
    from pymilvus.client.types import Status
    from pymilvus.exceptions import MilvusException

    gone = (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNAVAILABLE)
    try:
        yield
    except grpc.RpcError as exc:
        code = exc.code() if callable(getattr(exc, "code", None)) else None
        if code not in gone:
            raise
        raise StoreUnavailable(f"Milvus at {cfg.uri} did not answer {call} ({code.name}; deadlines: "
                               f"milvus.call_timeout_s={cfg.call_timeout_s:g} s for reads, "
                               f"milvus.write_timeout_s={cfg.write_timeout_s:g} s for writes)") from None
    except MilvusException as exc:
        if exc.code != Status.CONNECT_FAILED and exc.code not in gone:
            raise
        raise StoreUnavailable(f"Milvus at {cfg.uri} is unreachable ({call}): {exc.message}") from None
