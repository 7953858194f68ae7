"""Where input files live: local paths, ``file://``, and object storage (``s3://``, ``gs://``, anything
:func:`pyarrow.fs.FileSystem.from_uri` opens), listed lazily and fetched as bytes by whoever needs them.

Listing is a generator that walks one folder level at a time, so a caller can stream a million paths without ever
holding them. S3/MinIO credentials come from the usual AWS variables (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_ENDPOINT_URL`` for MinIO), read by pyarrow itself.

Object keys are arbitrary text ("Annual report é.pdf", "100%.pdf", "q?.pdf"), and pyarrow parses a URI strictly:
the URIs this module hands out are percent-encoded (pyarrow decodes them back to the key), and a URI a user typed
with raw spaces or non-ASCII characters in its key is encoded here before pyarrow sees it.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from urllib.parse import quote, unquote, urlparse

import pyarrow.fs as pafs

_BLOCK = 1 << 20


def is_remote(uri: str) -> bool:
    """True for object-storage URIs (anything with a scheme except ``file://``)."""
    return "://" in uri and not uri.startswith("file://")


def local_path(uri: str) -> str:
    # surrogateescape: a %XX that is no UTF-8 comes back as the byte it names (see text_safe_uri).
    return unquote(urlparse(uri).path, errors="surrogateescape") if uri.startswith("file://") else uri


def text_safe_uri(uri: str) -> str:
    """``uri`` as valid UTF-8 text naming the same file, so it can travel in an Arrow column. A local file name that
    is not UTF-8 (bytes a Linux filesystem allows) reaches Python as lone surrogates (``os.fsdecode``), which Arrow
    refuses; such a path becomes a percent-encoded ``file://`` URI that :func:`local_path` turns back into it."""
    try:
        uri.encode("utf-8")
        return uri
    except UnicodeEncodeError:
        pass
    if is_remote(uri):  # object keys are UTF-8 by definition; nothing to keep
        return uri.encode("utf-8", "replace").decode("utf-8")
    return "file://" + quote(os.fsencode(os.path.abspath(local_path(uri))), safe="/")


def head(uri: str, n: int = 1024) -> bytes:
    """The first ``n`` bytes of a file or object (what a format sniff needs; the rest is never read)."""
    fs, path = open_fs(uri)
    if isinstance(fs, pafs.LocalFileSystem):  # through the OS: pyarrow wants UTF-8 paths, a file name may not be
        with open(path, "rb") as fh:
            return fh.read(n)
    with fs.open_input_file(path) as fh:
        return fh.read(n)


def _split_query(uri: str) -> tuple[str, str]:
    """(URI without its query, ``?query`` or "")."""
    head, sep, query = uri.partition("?")
    return head, sep + query


def encode_key(key: str) -> str:
    """A path or object key as it must appear in a URI (``/`` kept, everything else outside [A-Za-z0-9_.~-]
    percent-encoded); :func:`pyarrow.fs.FileSystem.from_uri` decodes it back."""
    return quote(key, safe="/")


# A key already written as a URI path: unreserved and sub-delimiter characters, ':' '@' '/', and %XX escapes.
_URI_PATH = re.compile(r"(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/]|%[0-9A-Fa-f]{2})*")


def canonical_uri(uri: str) -> str:
    """An object-storage URI pyarrow can parse: a key typed as it is stored (spaces, accents, ``#``, a lone ``%``)
    is percent-encoded, one already encoded is kept. A ``?`` starts the query (pyarrow's options such as
    ``endpoint_override``): a key containing ``?`` must be typed as ``%3F``."""
    if not is_remote(uri):
        return uri
    head, query = _split_query(uri)
    scheme, _, rest = head.partition("://")
    bucket, slash, key = rest.partition("/")
    if _URI_PATH.fullmatch(key):
        return uri
    return f"{scheme}://{bucket}{slash}{encode_key(key)}{query}"


def absolute_uri(uri: str) -> str:
    """The URI that names a file wherever the run looks from: object-store URIs as they are, local paths (and
    ``file://`` URIs) as absolute paths. Document versions are keyed on it, so two inputs with the same relative
    name under different roots stay two documents."""
    return canonical_uri(uri) if is_remote(uri) else os.path.abspath(local_path(uri))


def version_of(uri: str) -> str:
    """``size:mtime_ns`` as the filesystem or object store reports it ("" when it cannot tell): what changes when
    the bytes do, learnt without reading them. (pyarrow does not expose S3 ETags; size and LastModified do.)"""
    try:
        fs, path = open_fs(uri)
        info = fs.get_file_info(path)
    except (OSError, ValueError):
        return ""
    if info.type != pafs.FileType.File or info.mtime_ns is None:
        return ""
    return f"{info.size}:{info.mtime_ns}"


def open_fs(uri: str) -> tuple[pafs.FileSystem, str]:
    """(filesystem, path inside it) for a local path, ``file://`` URI or object-storage URI."""
    if not is_remote(uri):
        return pafs.LocalFileSystem(), os.path.abspath(local_path(uri))
    uri = canonical_uri(uri)
    if uri.startswith("s3://") and "allow_delayed_open" not in uri:
        # A delayed open lets pyarrow send a small object as one PutObject when it is closed, instead of
        # CreateMultipartUpload + UploadPart + CompleteMultipartUpload: a third of the requests per run part.
        uri += ("&" if "?" in uri else "?") + "allow_delayed_open=true"
    return pafs.FileSystem.from_uri(uri)


def join_uri(base_uri: str, rel: str) -> str:
    """``rel`` (a relative path, as stored) under ``base_uri``, keeping the scheme and any query (so workers
    elsewhere can open it)."""
    if is_remote(base_uri):
        head, query = _split_query(canonical_uri(base_uri))
        return head.rstrip("/") + "/" + encode_key(rel.lstrip("/")) + query
    return os.path.join(local_path(base_uri), rel)


def uri_of(fs: pafs.FileSystem, path: str, like: str) -> str:
    """The URI of ``path`` on ``fs`` in the scheme of ``like`` (pyarrow paths carry no scheme), percent-encoded
    and with ``like``'s query (an ``endpoint_override`` must reach every worker that opens it)."""
    if is_remote(like):
        return f"{urlparse(like).scheme}://{encode_key(path)}{_split_query(like)[1]}"
    return path


def matches(name: str, patterns: Iterable[str]) -> bool:
    # Case-insensitive: corpora mix report.PDF and scan.JPG, and S3 keys are whatever the uploader typed.
    low = name.lower()
    return any(fnmatch.fnmatchcase(low, p.lower()) for p in patterns)


def walk(fs: pafs.FileSystem, root: str, recursive: bool = True) -> Iterator[str]:
    """Paths of files under ``root``, sorted within each folder, one folder level listed at a time."""
    if isinstance(fs, pafs.LocalFileSystem):
        yield from _walk_local(root, recursive)
        return
    infos = fs.get_file_info(pafs.FileSelector(root, allow_not_found=True, recursive=False))
    dirs: list[str] = []
    for info in sorted(infos, key=lambda i: i.path):
        if info.type == pafs.FileType.File:
            yield info.path
        elif info.type == pafs.FileType.Directory:
            dirs.append(info.path)
    del infos  # keep only the folder names while descending
    if recursive:
        for d in dirs:
            yield from walk(fs, d, recursive)


def _walk_local(root: str, recursive: bool) -> Iterator[str]:
    with os.scandir(root) as it:
        entries = sorted(it, key=lambda e: e.name)
    dirs = []
    for e in entries:
        if e.is_file():
            yield e.path
        elif e.is_dir() and recursive:
            dirs.append(e.path)
    for d in dirs:
        yield from _walk_local(d, recursive)


def glob_split(pattern: str) -> tuple[str, str]:
    """The fixed folder (or URI prefix) in front of the first wildcard, and the rest of the pattern."""
    head, sep, rest = pattern.partition("://")
    body = rest if sep else pattern
    parts = body.split("/")
    fixed: list[str] = []
    for part in parts:
        if any(ch in part for ch in "*?["):
            break
        fixed.append(part)
    root = "/".join(fixed) or "."
    return (f"{head}://{root}" if sep else root), "/".join(parts[len(fixed):])


def iter_glob(pattern: str) -> Iterator[tuple[str, str]]:
    """(uri, path relative to the glob's fixed folder) of files matching ``pattern``; ``**`` crosses folders."""
    root_uri, rest = glob_split(pattern)
    fs, root = open_fs(root_uri)
    deep = "/" in rest or "**" in rest
    for path in walk(fs, root, recursive=deep):
        rel = path[len(root):].lstrip("/")
        if fnmatch.fnmatchcase(rel, rest) or ("**/" in rest and fnmatch.fnmatchcase(rel, rest.replace("**/", ""))):
            yield uri_of(fs, path, root_uri), rel


def iter_tree(root_uri: str, patterns: list[str]) -> Iterator[tuple[str, str]]:
    """(uri, relative path) of files under a folder or prefix whose name matches one of ``patterns``."""
    for uri, rel, matched in iter_tree_all(root_uri, patterns):
        if matched:
            yield uri, rel


def iter_tree_all(root_uri: str, patterns: list[str]) -> Iterator[tuple[str, str, bool]]:
    """(uri, relative path, whether the name matches ``patterns``) of every file under a folder or prefix."""
    fs, root = open_fs(root_uri)
    for path in walk(fs, root):
        yield uri_of(fs, path, root_uri), path[len(root):].lstrip("/"), matches(path.rsplit("/", 1)[-1], patterns)


def kind(uri: str) -> str:
    """``dir``, ``file`` or ``missing``."""
    fs, path = open_fs(uri)
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.Directory:
        return "dir"
    if info.type == pafs.FileType.File:
        return "file"
    if is_remote(uri) and list(fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))):
        return "dir"  # an S3 prefix without a folder marker
    return "missing"


def fetch(uri: str, dest: Path) -> tuple[str, int]:
    """Copy ``uri`` to the local file ``dest`` while hashing it: (32-hex sha256 prefix, size)."""
    fs, path = open_fs(uri)
    h = hashlib.sha256()
    size = 0
    with fs.open_input_stream(path) as src, open(dest, "wb") as out:
        while block := src.read(_BLOCK):
            h.update(block)
            out.write(block)
            size += len(block)
    return h.hexdigest()[:32], size


def upload(local: Path, uri: str) -> str:
    """Write a local file to ``uri`` (write then move on local disks, so no reader sees half a file)."""
    fs, path = open_fs(uri)
    local = isinstance(fs, pafs.LocalFileSystem)
    if local:  # object storage has no folders to make (create_dir would put a marker object per level)
        fs.create_dir(path.rsplit("/", 1)[0], recursive=True)
    # A name of its own per writer: two inputs with the same bytes upload to the same doc_id at the same moment.
    tmp = f"{path}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp" if local else path
    with open(local, "rb") as src, fs.open_output_stream(tmp) as out:
        while block := src.read(_BLOCK):
            out.write(block)
    if tmp != path:
        fs.move(tmp, path)
    return uri
