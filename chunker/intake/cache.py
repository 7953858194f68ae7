"""A node-local cache of fetched object-store files: one download per document per node, not one per segment.

Intake fetches an original to hash it, and every segment of a long document needs the PDF again on whichever node
converts it (a 32-segment PDF was fetched 33 times). Entries live under one folder per run on each node's local
disk, keyed by URI and version (size and modification time: a changed object is a new entry), with the content
hash beside them so a cached file is never hashed twice.

Processes on one node share the folder safely with ``flock``: a fetch holds the entry's lock exclusively (a second
process waits for it and then reuses the file), a reader holds it shared while it uses the file, and eviction
(least recently used first, beyond ``max_bytes``) only removes entries nobody holds. The driver removes each node's
folder when the run ends (:func:`remove`).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from chunker.intake import sources

Fetch = Callable[[str, Path], tuple[str, int]]  # (uri, destination) -> (content hash, size), as sources.fetch


def run_folder(run_uri: str) -> Path:
    """This node's cache folder for the run writing to ``run_uri`` (same name on every node)."""
    key = hashlib.sha256(run_uri.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / "chunker-fetch" / key


def remove(folder: str | Path) -> bool:
    """Delete one run's cache folder on this node (what the driver runs on every node at the end)."""
    folder = Path(folder)
    existed = folder.exists()
    shutil.rmtree(folder, ignore_errors=True)
    return existed


class FetchCache:
    def __init__(self, folder: str | Path, max_bytes: int, fetch: Fetch | None = None) -> None:
        self.folder = Path(folder)
        self.max_bytes = int(max_bytes)
        self._fetch = fetch or (lambda uri, dest: sources.fetch(uri, dest))
        self.fetches = 0  # downloads made through this object (for tests and logs)

    def _key(self, uri: str, version: str) -> str:
        return hashlib.sha256(f"{uri}\0{version}".encode("utf-8", "surrogateescape")).hexdigest()[:32]

    @contextmanager
    def open(self, uri: str, version: str = "") -> Iterator[tuple[Path, str, int]]:
        """``(local path, content hash, size)`` of ``uri``, fetched unless this node has it; the file stays in place
        until the context ends. Fetch errors propagate (the caller decides what they mean for the document)."""
        key = self._key(uri, version)
        self.folder.mkdir(parents=True, exist_ok=True)  # only on a node that fetches something
        data, meta = self.folder / f"{key}.bin", self.folder / f"{key}.sha"
        fd = os.open(self.folder / f"{key}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            if not (data.exists() and meta.exists()):
                # Upgrade: Linux may drop the shared lock first, so check again once exclusive.
                fcntl.flock(fd, fcntl.LOCK_EX)
                if not (data.exists() and meta.exists()):
                    tmp = self.folder / f"{key}.part"
                    digest, size = self._fetch(uri, tmp)
                    self.fetches += 1
                    os.replace(tmp, data)
                    meta.write_text(f"{digest} {size}")
                fcntl.flock(fd, fcntl.LOCK_SH)
            digest, size = meta.read_text().split()
            os.utime(data)  # most recently used
            self._evict(keep=key)
            yield data, digest, int(size)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def _evict(self, keep: str) -> None:
        entries = []
        for p in self.folder.glob("*.bin"):
            try:
                st = p.stat()
            except FileNotFoundError:
                continue
            entries.append((st.st_mtime, st.st_size, p))
        total = sum(size for _, size, _ in entries)
        for _, size, p in sorted(entries):
            if total <= self.max_bytes:
                return
            key = p.stem
            if key == keep:
                continue
            fd = os.open(self.folder / f"{key}.lock", os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue  # in use on this node: keep it
            try:
                for suffix in (".bin", ".sha"):
                    (self.folder / f"{key}{suffix}").unlink(missing_ok=True)
                total -= size
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
