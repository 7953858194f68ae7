"""Milvus Lite's per-search floor (jobs.bench.lite_floor) on a small real Lite collection built the way the serving
benchmark builds its 100k one."""

from __future__ import annotations

from pathlib import Path

import pytest

from chunker.config import Config
from jobs.bench import lite_floor
from jobs.bench.serve_data import load_in_child


@pytest.fixture(scope="module")
def lite_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    db = str(tmp_path_factory.mktemp("litefloor") / "bench.db")
    cfg = Config.model_validate({"milvus": {"uri": db}})
    load_in_child(cfg, 400, 16, timeout_s=600)  # its own process: the Lite lock is released when it returns
    return db


def test_every_kind_of_search_is_measured_and_the_ratio_is_the_two_calls(lite_dir: str,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    out_json = Path(lite_dir).parent / "floor.json"
    assert lite_floor.main(["--db", lite_dir, "--questions", "4", "--json", str(out_json)]) == 0
    printed = capsys.readouterr().out
    assert "(400 rows)" in printed and "hybrid / dense" in printed

    import json

    r = json.loads(out_json.read_text())
    assert r["rows"] == 400 and r["questions"] == 4
    ms = r["search_ms"]
    assert set(ms) == {"dense search", "dense floor (one neighbour)", "BM25 search",
                       "BM25 floor (a word no chunk holds)"}
    assert all(0 < v["p50"] <= v["p99"] for v in ms.values())
    d, s = ms["dense search"]["p50"], ms["BM25 search"]["p50"]
    assert r["hybrid_over_dense_p50"] == round((d + s) / d, 2)
    # "Manual" opens every synthetic chunk's breadcrumb: the retriever's common-word rule drops it, as here.
    assert "manual" in r["dropped_common_words"]


def test_a_held_directory_is_refused_by_name(lite_dir: str, capsys: pytest.CaptureFixture[str]) -> None:
    lite, _ = lite_floor.open_collection(lite_dir, "chunks")  # this process holds the directory's lock now
    try:
        assert lite_floor.main(["--db", lite_dir, "--questions", "2"]) == 2
    finally:
        lite.close()
    err = capsys.readouterr().out
    assert lite_dir in err and "holding it" in err


def test_a_missing_collection_is_refused_by_name(lite_dir: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert lite_floor.main(["--db", lite_dir, "--collection", "nope"]) == 2
    assert "'nope'" in capsys.readouterr().out
