"""Benchmark job: report shape (not speed), simulated engine determinism and latency, synthetic corpus sizes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from chunker.backends.base import GenerationRequest
from chunker.backends.simulated import EngineSpec, SimulatedBackend
from chunker.contract import page_numbers as page_markers
from chunker.convert.trailer import check_output
from chunker.convert.prompts import build_request
from chunker.eval.synthetic import page_counts, write_document
from chunker.types import BatchContext


def _request(pages: list[int], rid: str = "doc/s0/b0") -> GenerationRequest:
    return build_request(pages, BatchContext(), "markdown", "v1", [b"x"] * len(pages), [(1109, 1568)] * len(pages),
                         temperature=0.1, max_tokens=8192, request_id=rid)


def test_synthetic_page_counts_are_seeded_heavy_tailed_and_include_forced_lengths() -> None:
    counts = page_counts(200, seed=3, include=(500, 2000), max_pages=1000)
    assert counts == page_counts(200, seed=3, include=(500, 2000), max_pages=1000)
    assert len(counts) == 200 and 500 in counts and 2000 in counts
    rest = sorted(counts)
    rest.remove(500)
    rest.remove(2000)
    assert min(rest) >= 1 and max(rest) <= 1000
    median = rest[len(rest) // 2]
    assert max(rest) > 8 * median  # a heavy tail: the longest documents dwarf the typical one
    with pytest.raises(ValueError):
        page_counts(1, include=(10, 20))


def test_synthetic_document_has_the_pages_asked(tmp_path: Path) -> None:
    import pypdfium2 as pdfium

    path = write_document(tmp_path / "d.pdf", 37, seed=1)
    pdf = pdfium.PdfDocument(str(path))
    try:
        assert len(pdf) == 37
        assert "(page 37)" in pdf[36].get_textpage().get_text_range()
    finally:
        pdf.close()
    assert path.read_bytes() == write_document(tmp_path / "e.pdf", 37, seed=1).read_bytes()


def test_simulated_answers_are_deterministic_and_pass_the_chain_checks() -> None:
    async def go(seed: int) -> tuple[str, int, int]:
        be = SimulatedBackend(seed=seed, time_scale=0.001)
        try:
            res = await be.generate(_request([5, 6, 7, 8]))
        finally:
            await be.close()
        return res.text, res.input_tokens, res.output_tokens

    a, b, c = asyncio.run(go(1)), asyncio.run(go(1)), asyncio.run(go(2))
    assert a == b and a[0] != c[0]
    text = a[0]
    assert page_markers(text.split("<context>")[0]) == [5, 6, 7, 8]
    assert check_output(text, "stop", "markdown", [5, 6, 7, 8]) == []
    assert a[1] >= 4 * 40 * 56  # visual tokens: (1109/28)*(1568/28) per page
    assert 4 * 300 < a[2] < 4 * 800  # ~500 output tokens per page


def test_simulated_latency_grows_with_tokens() -> None:
    spec = EngineSpec(prefill_tokens_per_s=20_000, decode_tokens_per_s=4_000, seq_decode_tokens_per_s=2_000)

    async def latency(pages: list[int]) -> float:
        be = SimulatedBackend(spec=spec, time_scale=0.05)
        try:
            await be.generate(_request(pages))
        finally:
            await be.close()
        return be.stats.latencies[0]

    one, four = asyncio.run(latency([1])), asyncio.run(latency([1, 2, 3, 4]))
    assert four > 2.5 * one > 0


def test_simulated_engine_shares_decode_among_running_sequences() -> None:
    spec = EngineSpec(decode_tokens_per_s=1_000, seq_decode_tokens_per_s=1_000, max_num_seqs=8)

    async def run(n: int) -> float:
        be = SimulatedBackend(spec=spec, time_scale=0.02)
        try:
            await asyncio.gather(*(be.generate(_request([1], f"d{i}")) for i in range(n)))
        finally:
            await be.close()
        return sum(be.stats.latencies) / n

    # Eight sequences share one engine's decode (8x the tokens at the same rate): each takes far longer than one alone.
    assert asyncio.run(run(8)) > 2 * asyncio.run(run(1))


def test_benchmark_tiny_report_shape(tmp_path: Path) -> None:
    from jobs.benchmark import main

    out = tmp_path / "bench"
    assert main(["--tiny", "--no-e2e", "--no-embed", "--output", str(out)]) == 0
    rep = json.loads((out / "report.json").read_text())
    assert {"meta", "efficiency", "order", "scaling", "strong_scaling", "doc_length", "long_doc", "stages",
            "plots"} <= set(rep)
    assert rep["meta"]["mode"] == "simulated"
    for key in ("pages_per_s", "capacity_pages_per_s", "efficiency", "steady_efficiency", "mid80_efficiency",
                "occupancy"):
        assert key in rep["efficiency"]
    assert [r["order"] for r in rep["order"]] == ["arrival", "longest"]
    assert rep["order"][0]["pages"] == rep["order"][1]["pages"] == rep["efficiency"]["pages"]
    for key in ("scaling", "strong_scaling"):
        assert [r["actors"] for r in rep[key]] == [1, 2] and "steady_of_linear" in rep[key][1]
    weak, strong = rep["scaling"], rep["strong_scaling"]
    assert weak[1]["pages"] > weak[0]["pages"] and strong[1]["pages"] == strong[0]["pages"]  # weak grows, strong fixed
    assert [r["length"] for r in rep["doc_length"]] == [10, 40]
    for r in rep["doc_length"]:  # probes among background documents: the run holds more than the probes
        assert r["pages"] > r["length"] * r["probe_docs"] and r["work_s_per_page"] > 0 and r["latency_s"] > 0
    assert rep["long_doc"]["long"]["segments"] > 1 and rep["long_doc"]["ratio"] > 0
    assert set(rep["stages"]["ms_per_page"]) == {"intake", "render", "encode", "convert_pdf_text", "parse", "plan"}
    for name in ("throughput_vs_actors.png", "per_page_vs_length.png", "stage_cost.png"):
        assert (out / name).stat().st_size > 1000
    md = (out / "report.md").read_text()
    for heading in ("(a) Efficiency", "(b) Scaling", "(c) Per-page", "(d) Single-document", "(e) CPU stages",
                    "Per-GPU estimate"):
        assert heading in md
    # The simulated engine stands for the 7B config on an H100 through the KV-aware cost model, and the report
    # carries the per-GPU estimate for the shipped configs, bf16 and FP8, 1,568 and 1,288 px, H100 and H200.
    assert rep["meta"]["engine"].startswith("simulated, cost model: Qwen2.5-VL-7B on H100")
    est = rep["gpu_estimate"]
    assert {(r["model"], r["precision"], r["side_px"], r["gpu"]) for r in est["rows"]} >= {
        (m, p, px, g) for m in ("7B", "3B") for p in ("bf16", "fp8") for px in (1568, 1288) for g in ("h100", "h200")}
    assert "olmOCR-2" in md and "not measured" in md
    assert rep["efficiency"]["failed_segments"] == 0


def test_window_rates_and_longest_first_order() -> None:
    from chunker.types import SegmentJob
    from jobs.bench.engine import Done, order_jobs, window_rates

    # 10 pages per engine-second for 100 s, then a tail of 20 pages over 100 s.
    log = [Done(t=float(t), doc="d", pages=10, work_s=0.0) for t in range(1, 101)]
    log += [Done(t=100.0 + 10 * i, doc="d", pages=2, work_s=0.0) for i in range(1, 11)]
    steady, mid = window_rates(log, drain_at=100.0, engine_s=200.0)
    assert steady == 10.0 and abs(mid - 10.0) < 0.2  # the tail belongs to neither window
    assert window_rates(log, drain_at=0.0, engine_s=200.0)[0] == 0.0  # the queue was never full

    def job(i: int, pages: int) -> SegmentJob:
        return SegmentJob(doc_id=f"d{i}", source_uri="", source="", num_pages=pages, segment_index=0, num_segments=1,
                          page_start=1, page_end=pages, context_start=1, batch_pages=4)

    jobs = [job(0, 5), job(1, 64), job(2, 20), job(3, 64)]
    assert [j.doc_id for j in order_jobs(jobs, "longest")] == ["d1", "d3", "d2", "d0"]
    assert order_jobs(jobs, "arrival") == jobs


def test_real_mode_fails_clearly_without_a_gpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    if shutil.which("nvidia-smi"):
        pytest.skip("a GPU machine: real mode would run")
    from jobs.benchmark import main

    assert main(["--backend", "vllm", "--output", str(tmp_path)]) == 2
    assert "needs NVIDIA GPUs" in capsys.readouterr().err


def test_a_calibration_replaces_the_cost_model_in_the_report(tmp_path: Path) -> None:
    from jobs.benchmark import main

    cal = tmp_path / "engine.json"
    cal.write_text(json.dumps({"engine_spec": {"prefill_tokens_per_s": 30000.0, "decode_tokens_per_s": 6000.0,
                                               "seq_decode_tokens_per_s": 80.0, "max_num_seqs": 48,
                                               "output_tokens_per_page": 500}}))
    out = tmp_path / "bench"
    assert main(["stages", "--tiny", "--no-e2e", "--no-embed", "--calibration", str(cal), "--output", str(out)]) == 0
    rep = json.loads((out / "report.json").read_text())
    assert rep["meta"]["engine"].startswith("simulated, flat rates: prefill 30000 tok/s")
    assert rep["meta"]["concurrency"] == 48 and rep["gpu_estimate"]["calibrated"]["pages_per_s_4x1568"] > 0
    assert "Calibration `" in (out / "report.md").read_text()


def test_a_failing_step_is_reported_and_the_next_still_runs(tmp_path: Path) -> None:
    from jobs.bench.isolate import run_step

    bad = run_step("bad", "json:loads", {"s": "{"}, tmp_path, timeout_s=120)  # raises in the child
    assert bad["failed"].startswith("bad: exit code 1: json.decoder.JSONDecodeError") and Path(bad["log"]).is_file()
    gone = run_step("gone", "os:abort", {}, tmp_path, timeout_s=120)  # a child that dies without a result
    assert gone["failed"].startswith("gone: exit code -6")  # SIGABRT: no result, no traceback
    good = run_step("good", "chunker.run.timing:steady_rate", {"arrivals": [[0, 10], [1, 10], [3, 10], [4, 10]]},
                    tmp_path, timeout_s=120)
    assert good["result"] == 7.5 and good["step_wall_s"] > 0


def test_copies_have_their_own_bytes_and_the_same_pages(tmp_path: Path) -> None:
    import hashlib

    import pypdfium2 as pdfium

    from chunker.eval.synthetic import write_document
    from jobs.bench.corpus import copies

    src = tmp_path / "src"
    write_document(src / "a.pdf", 3, seed=1)
    paths = copies(tmp_path / "x", 3, source=src)
    assert len({hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}) == 3
    texts = set()
    for p in paths:
        pdf = pdfium.PdfDocument(str(p))
        texts.add(tuple(page.get_textpage().get_text_range() for page in pdf))
        pdf.close()
    assert len(texts) == 1 and len(next(iter(texts))) == 3


def test_naive_windows_overlap_and_cover_the_text() -> None:
    from jobs.bench.naive import windows

    text = "".join(chr(97 + i % 26) for i in range(2500))
    w = windows(text, 1000, 200)
    assert [len(x) for x in w] == [1000, 1000, 900] and w[1].startswith(text[800:810])
    assert windows("   ") == []


@pytest.mark.ray
@pytest.mark.slow
def test_benchmark_runs_every_step_as_the_command_does(tmp_path: Path) -> None:
    """`python -m jobs.benchmark` with its end-to-end step, in this one process as the command runs it: the stage
    costs open Milvus Lite and load models before the end-to-end step starts Ray (which once timed out here, after
    Milvus Lite's gRPC client had started in the same process), and the naive pipeline runs beside ours."""
    from jobs.benchmark import main

    out = tmp_path / "bench"
    assert main(["--tiny", "--output", str(out)]) == 0
    rep = json.loads((out / "report.json").read_text())
    st = rep["stages"]
    assert "stage_costs_failed" not in st and st["milvus_rows_per_s"] > 0 and st["embed_chunks_per_s"] > 0
    assert {"torch", "onnx-int8"} <= set(st["embedding"]["backends"])
    rows = {r["name"]: r for r in st["end_to_end"]["rows"]}
    assert set(rows) == {"ours", "naive-onnx-int8", "naive-torch"}
    for name, row in rows.items():
        assert "failed" not in row, (name, row)
        assert row["pages"] == rows["ours"]["pages"] > 0 and row["collection_rows"] == row["chunks"] > 0
    t = rows["ours"]["timing"]
    assert set(t["worker_s"]) == {"intake", "convert", "plan", "embed", "write"} and t["worker_s"]["embed"] > 0
    assert {"ray_init", "store_open", "load"} <= set(t["driver_steps_s"])
    # CPU seconds of the run's own processes: ours counts its Ray runtime (every stage's actors), naive its one process.
    cpu = rows["ours"]["cpu"]["cpu_s_by_process"]
    assert {"driver", "actor:ConvertStage", "actor:PlanStage", "actor:EmbedStage"} <= set(cpu)
    assert cpu["actor:EmbedStage"] > 0 and rows["ours"]["cpu"]["cpu_s_total"] >= sum(cpu.values()) - 0.1
    assert rows["naive-onnx-int8"]["cpu"]["cpu_s_by_process"]["driver"] > 0
    md = (out / "report.md").read_text()
    assert "End to end" in md and "Where our time went" in md and "Embedding backends" in md
    assert "CPU s by process kind" in md
    assert (out / "end_to_end.png").stat().st_size > 1000


def test_cpu_sampler_counts_this_process_and_its_children_by_kind() -> None:
    """CPU seconds come from /proc for this process and its descendants only, named by kind; a child that exits
    keeps what it used up to the sampler's last reading of it."""
    import subprocess
    import sys

    from jobs.bench.cpu import CpuSampler, kind_of

    assert kind_of("ray::MapWorker(MapBatches(EmbedStage)).submit") == "actor:EmbedStage"
    assert kind_of("ray::IDLE") == "ray:idle_workers"
    assert kind_of("/venv/lib/python3.11/site-packages/ray/core/src/ray/raylet/raylet --raylet_socket_name=x") == "ray:raylet"
    assert kind_of("/usr/bin/python -m pytest") is None
    busy = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6: pass\ntime.sleep(1.5)"
    with CpuSampler(interval_s=0.2) as s:
        proc = subprocess.Popen([sys.executable, "-c", busy])
        proc.wait(timeout=60)
    r = s.report()
    assert r["cpu_s_by_process"]["other"] >= 0.5  # the child, read before it exited
    assert "driver" in r["cpu_s_by_process"] and r["wall_s"] >= 1.5
