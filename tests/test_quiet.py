"""What a person sees: the ingest's one progress line and summary, not Ray's or the libraries' logs."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from jobs.progress import Progress

REPO = Path(__file__).resolve().parents[1]


def test_progress_line_counts_documents_of_the_listing_and_estimates_the_rest() -> None:
    lines: list[str] = []
    p = Progress(60.0, export_metrics=False, emit=lines.append, total=10)
    p.t0 -= 20.0  # 20 s in
    for _ in range(4):
        p.document("ok")
    p.document("failed")
    p.segment(30, 0)
    p.written(90)
    line = p.line()
    assert "documents 5/10 (failed 1)" in line and "pages 30 (1.5/s)" in line and "chunks 90" in line
    assert "ETA 20 s" in line  # 5 of 10 documents in 20 s: 20 s more at that pace
    assert "tokens" not in line  # pdf-text writes no model tokens: nothing to say about them
    p.total = None
    assert "ETA" not in p.line()  # a manifest read by Ray: no total, no estimate


def test_progress_rewrites_one_line_on_a_terminal() -> None:
    out = io.StringIO()
    p = Progress(60.0, export_metrics=False, total=2, live=True, stream=out)
    with p:
        p.document("ok")
    text = out.getvalue()
    assert text.startswith("\r[ingest ") and text.endswith("\n") and text.count("\n") == 1
    assert "documents 1/2" in text


@pytest.mark.ray
@pytest.mark.slow
def test_ingest_output_fits_on_one_screen(samples_dir: Path, tmp_path: Path) -> None:
    """The demo's ingest, as `make demo` runs it (its own local Ray runtime, Milvus Lite in the driver)."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "RAY_AUTH_MODE": "disabled"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    res = subprocess.run(
        [sys.executable, "-m", "jobs.ingest", "--config", "configs/local.yaml", "--input", str(samples_dir),
         "--output", str(tmp_path / "run"), "--set", f"milvus.uri={tmp_path / 'm.db'}"],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    text = res.stdout + res.stderr
    assert res.returncode == 0, text[-3000:]
    assert "== ingest summary" in res.stdout and "ok: 4" in res.stdout
    lines = text.splitlines()
    assert len(lines) < 40, text
    for noise in ("logging_progress", "Running Dataset", "Method not implemented", "Traceback", "faiss.loader",
                  "Started a local Ray instance", "GOAWAY",
                  "constructor arguments in the object store"):  # Ray's E-line for restartable actor stages
        assert noise not in text, noise
