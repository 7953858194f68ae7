"""Checks of a configuration against where it runs, before any actor starts.

Pure functions: each returns its problems as one line apiece, naming the config field, so a job can print them all
at once and tests need neither Ray nor a server.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlparse

from chunker.config import Config, MilvusConfig


def is_local_path(uri: str) -> bool:
    """True for a bare path (relative or absolute); ``file://`` is the explicit spelling of a shared mount."""
    return "://" not in uri


def is_server_uri(uri: str) -> bool:
    return "://" in uri


def cluster_path_problems(cfg: Config, num_nodes: int) -> list[str]:
    """What in ``cfg`` cannot work on a cluster of ``num_nodes`` nodes (nothing for a single node).

    A bare path means a folder of the machine that reads it: the driver's working directory is Ray's temporary
    copy of the job, and other nodes cannot see it. A filesystem that every node mounts at the same place is
    written ``file:///mount/...``, which is accepted as the user's explicit word.
    """
    if num_nodes <= 1:
        return []
    problems = []
    if is_local_path(cfg.output.dir):
        problems.append(
            f"output.dir {cfg.output.dir!r} is a local path, but the cluster has {num_nodes} nodes that all write "
            f"run files: use object storage (s3://bucket/prefix, gs://...) or file:///path on a filesystem every "
            f"node mounts at the same place"
        )
    if not is_server_uri(cfg.milvus.uri):
        problems.append(
            f"milvus.uri {cfg.milvus.uri!r} is Milvus Lite, a folder one process on one machine can open; the cluster "
            f"has {num_nodes} nodes: use a Milvus server (milvus.uri=http://host:19530)"
        )
    if cfg.milvus.bulk_uri and is_local_path(cfg.milvus.bulk_uri):
        problems.append(
            f"milvus.bulk_uri {cfg.milvus.bulk_uri!r} is a local folder; the Milvus server imports from its object "
            f"store: use s3://<bucket the server reads>/prefix"
        )
    return problems


def bulk_target_problems(cfg: MilvusConfig, environ: Mapping[str, str] | None = None) -> list[str]:
    """Problems of the bulk-import target of a load into a Milvus server; none when bulk import is off.

    ``environ`` given: the credentials named by ``bulk_access_key_env`` / ``bulk_secret_key_env`` must be set
    there too. The bulk writer never borrows the corpus' storage settings (``AWS_*``): the Milvus server's object
    store is usually another one.
    """
    if not is_server_uri(cfg.uri) or cfg.load_mode == "upsert":
        return []
    problems = []
    hint = "or set milvus.load_mode=upsert to load by upserts only"
    uri = cfg.bulk_uri
    if not uri:
        problems.append(
            f"milvus.bulk_uri is not set: a load into the Milvus server at {cfg.uri} writes BulkWriter files into "
            f"the bucket that server reads; set milvus.bulk_uri=s3://<that bucket>/<prefix> ({hint})"
        )
    elif not uri.startswith("s3://") or not urlparse(uri).netloc:
        problems.append(
            f"milvus.bulk_uri {uri!r} is not s3://bucket/prefix: the Milvus server imports files from its own object "
            f"store, never from this machine's folders ({hint})"
        )
    if not cfg.bulk_endpoint:
        problems.append(
            "milvus.bulk_endpoint is not set: give the http(s)://host:port of the object store the Milvus server "
            "reads (its MinIO, or https://s3.<region>.amazonaws.com); AWS_ENDPOINT_URL is the corpus' store and is "
            "not used for it"
        )
    if environ is not None:
        for field, name in (("bulk_access_key_env", cfg.bulk_access_key_env),
                            ("bulk_secret_key_env", cfg.bulk_secret_key_env)):
            if not environ.get(name):
                problems.append(f"${name} (named by milvus.{field}) is not set: the bulk writer needs the keys of "
                                f"the bucket in milvus.bulk_uri")
    return problems
