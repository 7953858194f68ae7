"""Benchmark job: report shape (not speed), simulated engine determinism and latency, synthetic corpus sizes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from chunker.backends.base import GenerationRequest
from chunker.backends.simulated import EngineSpec, SimulatedBackend
from chunker.convert.trailer import check_output, page_markers
from chunker.prompts import build_request
from chunker.synthetic import page_counts, write_document
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
    assert {"meta", "efficiency", "scaling", "doc_length", "long_doc", "stages", "plots"} <= set(rep)
    assert rep["meta"]["mode"] == "simulated"
    for key in ("pages_per_s", "capacity_pages_per_s", "efficiency", "steady_efficiency", "occupancy"):
        assert key in rep["efficiency"]
    assert [r["actors"] for r in rep["scaling"]] == [1, 2] and "of_linear" in rep["scaling"][1]
    assert [r["length"] for r in rep["doc_length"]] == [10, 40]
    assert rep["long_doc"]["long"]["segments"] > 1 and rep["long_doc"]["ratio"] > 0
    assert set(rep["stages"]["ms_per_page"]) == {"render", "encode", "convert_pdf_text", "parse", "plan"}
    for name in ("throughput_vs_actors.png", "per_page_vs_length.png", "stage_cost.png"):
        assert (out / name).stat().st_size > 1000
    md = (out / "report.md").read_text()
    for heading in ("(a) Efficiency", "(b) Scaling", "(c) Per-page", "(d) One long", "(e) CPU stages"):
        assert heading in md
    assert rep["efficiency"]["failed_segments"] == 0


def test_real_mode_fails_clearly_without_a_gpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    if shutil.which("nvidia-smi"):
        pytest.skip("a GPU machine: real mode would run")
    from jobs.benchmark import main

    assert main(["--backend", "vllm", "--output", str(tmp_path)]) == 2
    assert "needs NVIDIA GPUs" in capsys.readouterr().err
