"""The same bytes at two paths are two documents (one content, each copy its own rows): copies in one run convert
once, no copy loses rows when another changes, a source filter finds every copy, and a copy added later is not
skipped because another copy is done. Real Ray Data, Milvus Lite, the pdf-text converter."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import numpy as np
import pytest

from chunker.config import load_config
from jobs.stages import ConvertStage
from ray_support import ray_runtime_fixture

pytestmark = [pytest.mark.ray, pytest.mark.slow]


ray_runtime = ray_runtime_fixture(by_value=__name__)


class CountingStage(ConvertStage):
    """Notes every conversion it really runs (one line per segment, in the run folder), slowed so that the copies of
    one run are all in flight at once."""

    async def _convert(self, row, marker):  # noqa: ANN001, ANN202
        with open(Path(self.store.root) / "conversions.log", "a") as fh:
            fh.write(f"{row.job.doc_id} {row.job.source}\n")
        await asyncio.sleep(3)
        return await super()._convert(row, marker)


def _cfg(db: Path):
    # One actor with room for every copy at once: concurrent copies used to count each other's starts as deaths.
    return load_config("configs/local.yaml", [f"milvus.uri={db}", "ray.convert_actors=1", "ray.convert_concurrency=8",
                                              "ray.intake_block_rows=8", "ray.status_interval_s=5"])


def _rows(db: Path, prefix: str | None = None) -> list[dict]:
    from chunker.index.filters import QueryFilters, build_filter, render_filter
    from chunker.index.store import ChunkStore

    expr = ""
    if prefix is not None:
        expr = render_filter(*build_filter(QueryFilters(source_prefix=prefix)))
    with ChunkStore(_cfg(db).milvus, 384) as store:
        return store.client.query(store.collection, filter=expr, output_fields=["chunk_id", "doc_id", "source"],
                                  limit=10000, consistency_level="Strong")


def _search(db: Path, text: str, prefix: str) -> list[dict]:
    from chunker.index.filters import QueryFilters, build_filter
    from chunker.index.store import ChunkStore

    expr, params = build_filter(QueryFilters(source_prefix=prefix))
    with ChunkStore(_cfg(db).milvus, 384) as store:
        return store.search(np.zeros(384, dtype=np.float32), text, mode="sparse", limit=5, filter_expr=expr,
                            filter_params=params)


def _conversions(run: Path) -> list[str]:
    log = run / "conversions.log"
    return log.read_text().splitlines() if log.exists() else []


def test_copies_are_documents_of_their_own_that_convert_once(ray_runtime, tmp_path):
    from chunker.eval.synthetic import write_document
    from jobs.ingest import run_ingest

    root = tmp_path / "docs"
    write_document(root / "a" / "x.pdf", 2, seed=11, title="Harbour crane maintenance")
    for folder in ("b", "c"):
        (root / folder).mkdir(parents=True)
        shutil.copyfile(root / "a" / "x.pdf", root / folder / "x.pdf")
    write_document(root / "other.pdf", 2, seed=12, title="Warehouse lighting survey")
    db, run = tmp_path / "m.db", tmp_path / "run"

    s1 = run_ingest(_cfg(db), str(root), str(run), convert_stage=CountingStage)
    assert (s1.documents, s1.ok, s1.failed) == (4, 4, 0), s1.problems
    conversions = _conversions(run)
    x_id = {line.split()[0] for line in conversions if line.endswith("x.pdf")}
    assert len(x_id) == 1 and sum(line.endswith("x.pdf") for line in conversions) == 1, \
        f"three copies in one run converted once: {conversions}"
    by_source: dict[str, set[str]] = {}
    for r in _rows(db):
        by_source.setdefault(r["source"], set()).add(r["chunk_id"])
    assert set(by_source) == {"a/x.pdf", "b/x.pdf", "c/x.pdf", "other.pdf"}
    copies = [by_source[f"{f}/x.pdf"] for f in "abc"]
    assert len({len(c) for c in copies}) == 1 and not (copies[0] & copies[1]), "each copy has its own rows"
    # A filter on a folder finds the copy in it, whatever the other copies did.
    assert {r["source"] for r in _rows(db, "a/")} == {"a/x.pdf"}
    assert {r["source"] for r in _search(db, "Harbour crane maintenance", "b/")} == {"b/x.pdf"}

    # b/x.pdf changes: its old rows go, a/ and c/ keep theirs and are still found; nothing else is converted.
    write_document(root / "b" / "x.pdf", 3, seed=13, title="Harbour crane maintenance, revised")
    s2 = run_ingest(_cfg(db), str(root), str(run), convert_stage=CountingStage)
    assert (s2.ok, s2.skipped, s2.failed) == (1, 3, 0), s2.problems
    after = {}
    for r in _rows(db):
        after.setdefault(r["source"], set()).add(r["chunk_id"])
    assert after["a/x.pdf"] == copies[0] and after["c/x.pdf"] == copies[2], "the unchanged copies keep their rows"
    assert after["b/x.pdf"] and not (after["b/x.pdf"] & copies[1]), "the changed copy's old rows are gone"
    hits = _search(db, "Harbour crane maintenance", "a/")
    assert hits and {h["source"] for h in hits} == {"a/x.pdf"}

    # A copy added later is a document of its own, not skipped because a/x.pdf is done.
    (root / "d").mkdir()
    shutil.copyfile(root / "a" / "x.pdf", root / "d" / "x.pdf")
    s3 = run_ingest(_cfg(db), str(root), str(run), convert_stage=CountingStage)
    assert (s3.ok, s3.skipped) == (1, 4), s3.problems
    assert {r["source"] for r in _rows(db, "d/")} == {"d/x.pdf"}
    assert {r["source"] for r in _rows(db, "a/")} == {"a/x.pdf"}
