"""The dry-run benchmark (``python -m jobs.benchmark dryrun``): its stand-ins produce what the real stages expect, its
figures follow from what it measured, and its tiny form runs the real pipeline on a local runtime and a multi-node
cluster, local disk and S3, reporting every figure (what a run measures is never asserted: a benchmark, not a
timed test)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest

from chunker.contract import parse_batches
from chunker.types import SegmentJob
from jobs.bench.corpus import blank_corpus, blank_pdf
from jobs.bench.cpu import THREAD_KINDS, ThreadSampler
from jobs.bench.dryrun import REPORTED_KINDS, ceiling_fit, figures
from jobs.bench.dryrun_drivers import job_fit
from jobs.bench.dryrun_run import area_of
from jobs.bench.instant import InstantConverter, hash_vectors


def test_blank_pdfs_have_their_pages_and_bytes_of_their_own(tmp_path: Path) -> None:
    import pypdfium2 as pdfium

    paths = blank_corpus(tmp_path, [1, 7, 7], seed=3)
    assert [len(pdfium.PdfDocument(str(p))) for p in paths] == [1, 7, 7]
    assert len({p.read_bytes() for p in paths}) == 3  # distinct content hashes, distinct doc_ids
    assert blank_corpus(tmp_path, [1, 7, 7], seed=3) == paths and blank_pdf(7, "x") == blank_pdf(7, "x")
    with pytest.raises(ValueError):
        blank_pdf(0, "x")


def test_the_instant_converter_answers_the_contract_for_every_owned_page() -> None:
    # The second segment of a 20-page document: pages 9-16 owned, 7-8 converted as context only.
    job = SegmentJob("doc", "/r/doc.pdf", "doc.pdf", 20, 1, 3, 9, 16, 7, 4)
    batches = asyncio.run(InstantConverter().convert(job, None))
    assert [(b.page_start, b.page_end, b.context_only) for b in batches] == [(7, 8, True), (9, 12, False),
                                                                             (13, 16, False)]
    elements = parse_batches("doc", batches, 1)
    assert {p for e in elements for p in range(e.page_start, e.page_end + 1)} == set(range(9, 17))
    assert sum(len(e.text) for e in elements) > 8 * 2000  # about 2,200 characters a page
    assert batches == asyncio.run(InstantConverter().convert(job, None))  # deterministic


def test_hash_vectors_are_unit_deterministic_and_distinct() -> None:
    v = hash_vectors(["a", "b", "a"], 384)
    assert v.shape == (3, 384) and v.dtype == np.float32
    assert np.allclose(np.linalg.norm(v, axis=1), 1.0) and np.array_equal(v[0], v[2]) and not np.allclose(v[0], v[1])


def test_requests_are_counted_by_run_area() -> None:
    assert area_of("corpus/x.pdf") == "inputs"
    assert area_of("runs/r1/ledger/abc/doc.json") == "ledger"
    assert area_of("runs/r1/chunks/doc-00000.parquet") == "chunks"
    assert area_of("runs/r1/attempts/doc-00000/") == "attempts"  # a listing's prefix
    assert area_of("runs/r1/summary.json") == "run" and area_of("") == "bucket"
    # Every folder the run layout writes is an area of its own (an area added there is counted here too).
    from chunker.run.layout import AREAS

    assert len(AREAS) >= 8 and all(area_of(f"runs/r1/{a}/x") == a for a in AREAS)


def _raw(pages: int = 1000, docs: int = 100, chunks: int = 3000, window_pages: int = 900, wall: float = 10.0,
         kinds: dict[str, float] | None = None) -> dict:
    return {"label": "r", "storage": "s3", "runtime": "local", "load_avg_before": [1.0], "load_avg_after": [2.0],
            "milvus_server_cpu_s": 3.0, "s3_server_cpu_s": 1.0,
            "driver_threads_window_cpu_s": kinds or {"driver thread": 0.9, "ray data": 3.6, "writer threads": 2.7,
                                                     "other": 1.8, "benchmark": 5.0},
            "requests": {"total": 900, "by_op": {"PutObject": 600, "HeadObject": 300},
                         "by_area": {"ledger": 200, "chunks": 100}, "by_area_op": {}},
            "cpu": {"cpu_s_by_process": {"actor:PlanStage": 2.0}},
            "summary": {"documents": docs, "pages": pages, "chunks": chunks, "failed": 0, "collection_rows": chunks,
                        "timing": {"driver_steps_s": {"pipeline": 12.0, "load": 6.0, "ledger": 2.0, "commit_wait": 0.1,
                                                      "decode": 0.2, "assemble": 0.1},
                                   "driver_steps_cpu_s": {"load": 1.5, "decode": 0.2, "assemble": 0.1, "ledger": 0.1},
                                   "driver_cpu_window": {"segments": 90, "pages": window_pages, "wall_s": wall,
                                                         "process_cpu_s": 99.0, "thread_cpu_s": 0.9}}}}


def test_figures_follow_from_the_measurements() -> None:
    f = figures(_raw(), [10] * 100, 64, plan_actors=2)
    # 9 s of driver CPU (the benchmark's samplers left out) over 900 pages: 10 ms a page, 100 ms a 10-page document.
    assert f["driver_cpu_ms_per_page"] == 10.0 and f["driver_cpu_ms_per_doc"] == 100.0
    assert f["driver_cpu_ms_per_segment"] == 100.0 and f["driver_cpu_share"] == 0.9
    assert f["driver_cpu_ms_per_doc_by_thread"]["ray data"] == 40.0 and "benchmark" not in f["driver_cpu_share_by_thread"]
    assert f["requests_per_doc"] == 9.0 and f["requests_per_doc_by_area"]["ledger"] == 2.0
    assert f["milvus_rows_per_s"] == 500.0 and f["plan_cpu_ms_per_segment"] == 20.0
    c = f["ceilings_pages_per_s"]
    assert c["driver CPU (1 core)"] == 100.0 and c["plan stage CPU"] == 1000.0
    assert c["Milvus load (lite server)"] == round(500.0 / 3.0, 1)
    assert f["driver_ceiling"]["pages_per_s"] == min(v for k, v in c.items() if k.startswith("driver"))
    assert f["pages_per_s"] == 90.0 and f["commits_threaded"]


def test_a_window_between_two_readings_still_reports_every_thread_kind() -> None:
    # Readings a second apart; the writer's thread lived only between them, so it was never read.
    threads = ThreadSampler(interval_s=1.0)
    threads.samples = [(0.0, {"MainThread": 1.0, "StreamingExecutor-1": 0.5}),
                       (1.0, {"MainThread": 2.0, "StreamingExecutor-1": 0.7})]
    w = threads.between(0.4, 0.41)
    assert set(w) == set(THREAD_KINDS) and w["writer threads"] == 0.0 and w["other"] == 0.0
    assert w["driver thread"] == 0.01 and w["ray data"] == 0.002
    assert set(threads.between(0.4, 0.41, by_name=True)) == {"MainThread", "StreamingExecutor-1"}


def test_a_window_too_short_to_sample_keeps_every_figure_and_says_so() -> None:
    raw = _raw(wall=0.004, kinds={"driver thread": 0.002, "ray data": 0.001})  # no writer or other thread read
    raw["driver_threads_sampling_s"] = 1.0
    win = raw["summary"]["timing"]["driver_cpu_window"]
    win["process_cpu_s"], win["thread_cpu_s"] = 0.0045, 0.003
    f = figures(raw, [10] * 100, 64, plan_actors=2)
    assert set(f["driver_cpu_ms_per_doc_by_thread"]) == set(REPORTED_KINDS)
    assert f["driver_cpu_ms_per_doc_by_thread"]["writer threads"] == 0.0
    assert not f["driver_threads_measured"] and "too short to measure" in f["driver_threads_note"]
    # The totals come from the process's clock read at the window's ends, not from the interpolated split.
    assert f["driver_cpu_ms_per_segment"] == 0.05 and f["driver_cpu_share"] == round(0.0045 / 0.004, 4)
    # Three periods or more: measured by thread, no note; a raw file of an earlier run lacking kinds gets them all.
    f = figures(_raw(wall=3.0, kinds={"ray data": 1.0}), [10] * 100, 64, plan_actors=2)
    assert f["driver_threads_measured"] and "driver_threads_note" not in f
    assert set(f["driver_cpu_ms_per_doc_by_thread"]) == set(REPORTED_KINDS)


def test_the_fit_finds_base_and_cost_per_page() -> None:
    runs = []
    for rate in (10.0, 40.0, 80.0):
        # 0.1 cores whatever the rate plus 4 ms of driver CPU a page: one core at 225 pages/s
        f = figures(_raw(window_pages=int(rate * 10), wall=10.0,
                         kinds={"ray data": 0.5 + 0.02 * rate, "other": 0.5 + 0.02 * rate}),
                    [10] * 100, 64, 1)
        f["label"] = f"at-{rate:g}"
        runs.append(f)
    fit = ceiling_fit(runs)
    assert fit["base_cores"] == 0.1 and fit["cpu_ms_per_10_page_doc"] == 40.0 and fit["pages_per_s"] == 225.0
    assert fit["by_thread"]["ray data"]["cpu_ms_per_10_page_doc"] == 20.0 and fit["gpus_at_5"] == 45
    assert "note" in ceiling_fit(runs[:1])


def test_the_jobs_ceiling_counts_a_drivers_base_apart_from_contention() -> None:
    fit = {"pages_per_s": 225.0, "base_cores": 0.1, "cpu_ms_per_page": 4.0}  # one core at 225 pages/s
    single = {"driver_cpu_ms_per_doc": 44.0}

    def two(per_page_ms: float) -> dict:
        # each driver at 100 pages/s: the base plus its cost per page, as its CPU share
        d = {"cpu_ms_per_doc": 50.0, "cpu_share": 0.1 + per_page_ms / 1000 * 100, "pages_per_s": 100.0}
        return {"drivers": 2, "per_driver": [d, dict(d)]}

    # Same cost per page as alone: more CPU per document at half the rate each (the base), which is not contention.
    quiet = job_fit(fit, single, two(4.0))
    assert quiet["cpu_ratio"] == 1.0 and not quiet["slow_each_other"] and quiet["pages_per_s_job"] == 450.0
    # Twice the cost per page beside each other: they slow each other, and each driver's core carries half the pages.
    busy = job_fit(fit, single, two(8.0))
    assert busy["cpu_ratio"] == 2.0 and busy["slow_each_other"] and busy["pages_per_s_job"] == 225.0
    # Without a window of rows, the per-document ratio to one driver alone stands in.
    bare = {"drivers": 2, "per_driver": [{"cpu_ms_per_doc": 55.0}, {"cpu_ms_per_doc": 55.0}]}
    assert job_fit(fit, single, bare)["cpu_ratio"] == 1.25
    assert "note" in job_fit({"note": "no fit"}, single, two(4.0))


@pytest.mark.ray
@pytest.mark.slow
def test_the_tiny_dry_run_reports_every_figure(tmp_path: Path) -> None:
    from jobs.benchmark import main

    out = tmp_path / "dryrun"
    assert main(["dryrun", "--size", "tiny", "--output", str(out)]) == 0
    rep = json.loads((out / "dryrun.json").read_text())
    runs = {r["label"]: r for r in rep["runs"]}
    assert set(runs) == {"cluster-s3", "flight-4"}
    assert (runs["cluster-s3"]["runtime"], runs["cluster-s3"]["storage"]) == ("cluster", "s3")
    assert (runs["flight-4"]["runtime"], runs["flight-4"]["storage"]) == ("local", "local")
    for label, r in runs.items():
        assert "failed" not in r, (label, r)
        assert r["failed_documents"] == 0 and r["documents"] == r["segments"] > 0
        assert r["collection_rows"] == r["chunks"] > r["pages"] > 0, "every chunk loaded, about 3 a page"
        assert r["driver_cpu_ms_per_doc"] > 0 and r["driver_cpu_ms_per_segment"] > 0
        # Every thread kind, however short the window (0.0 for a kind never read in it; the note says so).
        assert set(r["driver_cpu_ms_per_doc_by_thread"]) == set(REPORTED_KINDS), (label, r)
        assert r["driver_threads_measured"] or "too short to measure" in r["driver_threads_note"]
        assert {"decode", "assemble", "load", "ledger", "iterate"} <= set(r["driver_cpu_ms_per_doc_by_step"])
        assert r["writer_wall_ms_per_doc"]["load"] > 0 and r["writer_wall_ms_per_doc"]["ledger"] > 0
        assert r["milvus_rows_per_s"] > 0 and r["plan_cpu_ms_per_segment"] > 0
        assert r["driver_ceiling"]["pages_per_s"] > 0 and r["driver_ceiling"]["gpus_at_5"] is not None
        assert r["commits_threaded"]
    s3 = json.loads((out / "raw-cluster-s3.json").read_text())
    docs = runs["cluster-s3"]["documents"]
    assert len(s3["nodes"]) == 2
    # Two ledger objects per document (its entry and its URI's), three parts per segment, one input read each.
    assert s3["requests"]["by_area_op"]["ledger:PutObject"] == 2 * docs
    assert all(s3["requests"]["by_area_op"][f"{a}:PutObject"] == docs for a in ("batches", "elements", "chunks"))
    assert s3["requests"]["by_area_op"]["inputs:GetObject"] == docs
    assert runs["cluster-s3"]["requests_per_doc"] > 0
    assert "pages_per_s" in rep["fit"] or "note" in rep["fit"]
    md = (out / "dryrun.md").read_text()
    for section in ("Through the pipeline", "The driver", "Object store, Milvus, plan stage", "Ceilings",
                    "fitted", "documents in flight"):
        assert section in md
    assert all(r["driver_threads_note"] in md for r in runs.values() if not r["driver_threads_measured"])
    assert (out / "dryrun_ceiling.png").stat().st_size > 1000
    # Two drivers in one job: every document once, each driver's own CPU per document, the job's line in the report.
    d = rep["drivers_run"]
    assert "failed" not in d, d
    assert d["documents"] == 8 and d["failed_documents"] == 0 and d["collection_rows"] == d["chunks"] > 0
    assert [p["output"] for p in d["per_driver"]] == ["shard-1-of-2", "shard-2-of-2"]
    assert sum(p["documents"] for p in d["per_driver"]) == 8
    assert all(p["cpu_ms_per_doc"] is None or p["cpu_ms_per_doc"] > 0 for p in d["per_driver"])
    assert "pages_per_s_job" in rep["fit"] and "2 drivers in one job" in md
