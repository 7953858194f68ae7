"""ChunkStore against Milvus servers: a real `milvus-lite server` over HTTP (and a Milvus server when
MILVUS_TEST_URI is set), the index settings a server URI may ask for, and deadlines when a server freezes."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from store_support import DIM, ids, make_chunks, vecs  # tests/ is on sys.path under pytest

from chunker.config import MilvusConfig
from chunker.index.filters import QueryFilters, build_filter
from chunker.index.store import ChunkStore, StoreError, StoreUnavailable


def roundtrip(cfg: MilvusConfig) -> None:
    s = ChunkStore(cfg, DIM, collection="server_roundtrip")
    try:
        chunks = make_chunks(6, doc="srv")
        assert s.upsert(chunks, vecs(6)) == 6
        assert s.count() == 6
        assert s.search(vecs(6)[2], "number 2", mode="hybrid", limit=1)[0]["chunk_id"] == "srv-2"
        expr, params = build_filter(QueryFilters(doc_id="srv", page_min=5))
        assert ids(s.search(vecs(6)[2], None, mode="dense", limit=10, filter_expr=expr, filter_params=params)) == {
            "srv-3", "srv-4", "srv-5"}
    finally:
        s.drop()
        s.close()


@pytest.mark.milvus_server
def test_milvus_server_roundtrip() -> None:
    uri = os.environ.get("MILVUS_TEST_URI")
    if not uri:
        pytest.skip("MILVUS_TEST_URI is not set")
    roundtrip(MilvusConfig(uri=uri))


@pytest.fixture(scope="module")
def lite_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, subprocess.Popen]]:
    """A `milvus-lite server` on a loopback port: a real gRPC Milvus endpoint that tests may also freeze."""
    from milvus_lite_server import lite_server as start

    with start(tmp_path_factory.mktemp("srv")) as server:
        yield server


def test_lite_server_over_http(lite_server: tuple[str, subprocess.Popen]) -> None:
    roundtrip(MilvusConfig(uri=lite_server[0]))


def test_index_settings_are_validated_by_field(lite_server: tuple[str, subprocess.Popen], tmp_path: Path) -> None:
    from chunker.config import ConfigError, load_config

    with pytest.raises(ConfigError, match="milvus.index_type DISKANN does not build on Milvus Lite"):
        load_config(None, [f"milvus.uri={tmp_path / 'x.db'}", "milvus.index_type=DISKANN"])
    with pytest.raises(ConfigError, match=r"milvus.index_type: Input should be 'AUTOINDEX'"):
        load_config(None, ["milvus.index_type=IVF_PQ"])
    with pytest.raises(ConfigError, match=r"milvus.ivf_nprobe \(64\) must not exceed milvus.ivf_nlist \(32\)"):
        load_config(None, ["milvus.ivf_nlist=32", "milvus.ivf_nprobe=64"])
    assert load_config(None, ["milvus.uri=http://milvus:19530", "milvus.index_type=DISKANN"]).milvus.index_type == "DISKANN"
    # Lite behind `milvus-lite server` looks like a server by its URI: refused once its version says Lite.
    with pytest.raises(StoreError, match="milvus.index_type DISKANN does not build on Milvus Lite"):
        ChunkStore(MilvusConfig(uri=lite_server[0], index_type="DISKANN"), DIM, collection="never")


def test_a_frozen_server_fails_within_the_call_timeout(lite_server: tuple[str, subprocess.Popen]) -> None:
    uri, proc = lite_server
    s = ChunkStore(MilvusConfig(uri=uri, call_timeout_s=1.0, write_timeout_s=2.0), DIM, collection="frozen")
    try:
        s.upsert(make_chunks(5), vecs(5))
        assert s.search(vecs(5)[1], "number 1", mode="hybrid", limit=1)[0]["chunk_id"] == "d1-1"
        os.kill(proc.pid, signal.SIGSTOP)  # accepts connections (the kernel does), never answers
        try:
            for call in (lambda: s.search(vecs(5)[1], "number 1", mode="hybrid", limit=1),
                         lambda: s.search(vecs(5)[1], None, mode="dense", limit=1), s.ready,
                         lambda: s.delete_doc("d1")):  # a write: its own deadline, or the lost peer
                t0 = time.monotonic()
                with pytest.raises(StoreUnavailable, match=r"Milvus at \S+ (did not answer|is unreachable)"):
                    call()
                # Without a deadline a search waited ~70 s here (gRPC keepalive); with one, about the deadline.
                assert time.monotonic() - t0 < 4.0
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        assert s.search(vecs(5)[1], "number 1", mode="hybrid", limit=1)[0]["chunk_id"] == "d1-1"  # and it recovers
    finally:
        s.drop()
        s.close()
