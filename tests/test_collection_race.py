"""Shards starting together on a fresh Milvus: the collection is made once and every opener ends with it indexed and
loaded, whoever got there first.

pymilvus' ``create_collection(..., index_params=...)`` is three calls (create, create_index, load), and Milvus Lite's
path here is two (create, then create_index): a second process that arrives between them used to load a collection
without its vector index (a Milvus server refuses that: "there is no vector index on field"), or to lose the create
or index race with a raw ``MilvusException`` the store did not map, and its driver died. Run against a real
``milvus-lite server`` shared by real processes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from store_support import DIM, make_chunks, vecs  # tests/ is on sys.path under pytest

from chunker.config import MilvusConfig
from chunker.index.store import ChunkStore

REPO = Path(__file__).resolve().parents[1]
OPENERS = 3


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    from milvus_lite_server import lite_server

    with lite_server(tmp_path_factory.mktemp("race")) as (uri, _proc):
        yield uri


def test_an_opener_between_create_and_index_builds_the_indexes_itself(server):
    """The moment between the first process' create and its create_index, held still: the collection exists with
    the right schema and properties but no index. The second opener must not load it as it is."""
    from pymilvus import MilvusClient

    from chunker.index import collection as shape

    cfg = MilvusConfig(uri=server, collection="between")
    client = MilvusClient(uri=server)
    real_index = client.create_index
    client.create_index = lambda *a, **k: None  # the first process, stopped right after its create
    shape.create_collection(client, cfg.collection, cfg, DIM, lite=True)
    client.create_index = real_index
    assert client.list_indexes(cfg.collection) == []
    with ChunkStore(cfg, DIM) as store:
        assert {"dense", "sparse", "doc_id", "source_uri"} <= set(client.list_indexes(cfg.collection))
        store.upsert(make_chunks(3, doc="b"), vecs(3))
        assert store.count() == 3
        assert store.search(vecs(3)[1], None, mode="dense", limit=1)[0]["chunk_id"] == "b-1"


def test_a_creator_whose_indexes_another_opener_built_first_goes_on(server, monkeypatch):
    """The first process creates the collection; before its create_index runs, a second process (a real one) opens
    the collection and builds what it finds missing. The first one's create_index then finds indexes there."""
    from pymilvus import MilvusClient

    name = "index_race"
    real_create = MilvusClient.create_collection

    def create_then_other_opens(self, *args, **kwargs):  # noqa: ANN001, ANN202
        real_create(self, *args, **kwargs)
        other = subprocess.run([sys.executable, "-c", OPEN, server, name], cwd=REPO, capture_output=True, text=True,
                               timeout=120)
        assert other.returncode == 0, other.stderr[-3000:]

    monkeypatch.setattr(MilvusClient, "create_collection", create_then_other_opens)
    with ChunkStore(MilvusConfig(uri=server, collection=name), DIM) as store:
        store.upsert(make_chunks(2, doc="r"), vecs(2))
        assert store.count() == 2
        assert {"dense", "sparse", "doc_id", "source_uri"} <= set(store.client.list_indexes(name))


def test_two_creators_that_both_found_no_collection_both_go_on(server, monkeypatch):
    """Both processes asked has_collection before either created it: the second create meets the first one's
    collection (Milvus Lite refuses it, a server accepts an identical one)."""
    from pymilvus import MilvusClient

    name = "create_race"
    first = subprocess.run([sys.executable, "-c", OPEN, server, name], cwd=REPO, capture_output=True, text=True,
                           timeout=120)
    assert first.returncode == 0, first.stderr[-3000:]
    asked: list[str] = []
    real_has = MilvusClient.has_collection

    def stale_once(self, collection_name, *args, **kwargs):  # noqa: ANN001, ANN202
        asked.append(collection_name)
        return False if len(asked) == 1 else real_has(self, collection_name, *args, **kwargs)

    monkeypatch.setattr(MilvusClient, "has_collection", stale_once)
    with ChunkStore(MilvusConfig(uri=server, collection=name), DIM) as store:
        assert store.count() == 0
    assert asked


OPEN = """
import sys
from chunker.config import MilvusConfig
from chunker.index.store import ChunkStore
with ChunkStore(MilvusConfig(uri=sys.argv[1], collection=sys.argv[2]), %d) as store:
    print("rows", store.count())
""" % DIM
