"""The robustness run: ``jobs.ingest`` over the public malformed PDFs of ``../shared/data/robustness`` (when present)
and a few hundred generated hostile files (:mod:`chunker.eval.hostile`) with normal documents mixed in. Every file
is accounted for, every outcome has a typed reason, every good document is indexed, and the run exits 0."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from chunker.config import config_hash, load_config
from chunker.eval.hostile import generate
from chunker.types import safe_text
from test_faults import indexed_documents

REPO_ROOT = Path(__file__).resolve().parents[1]


def robustness_dir() -> Path | None:
    root = Path(os.environ.get("CHUNKER_SHARED_DATA") or (REPO_ROOT / ".." / "shared" / "data"))
    folder = root / "robustness"
    return folder if folder.is_dir() else None


@pytest.mark.ray
@pytest.mark.slow
def test_every_hostile_file_is_accounted_for_and_every_good_one_indexed(tmp_path, monkeypatch, capsys):
    import ray

    from chunker.run.ledger import Ledger, store_target
    from jobs.ingest import main

    docs = tmp_path / "in"
    made = {safe_text(h.source): h for h in generate(docs / "hostile", seed=7)}
    public = robustness_dir()
    if public is not None:  # the 45 public files (and their manifest.jsonl, a file no pattern matches)
        shutil.copytree(public, docs / "robustness")
    files = sorted(safe_text(os.path.relpath(os.fsdecode(p), docs)) for p in _walk(docs))
    assert len(files) >= 300 + (46 if public else 0)

    db, out = tmp_path / "milvus.db", tmp_path / "run"
    overrides = [f"milvus.uri={db}", "converter.pdf_text.ocr=false"]
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.delenv("CHUNKER_FAULTS", raising=False)
    try:
        rc = main(["--config", "configs/local.yaml", "--input", str(docs), "--output", str(out),
                   *(a for o in overrides for a in ("--set", o))])
    finally:
        ray.shutdown()
    printed = capsys.readouterr().out
    assert rc == 0, printed[-3000:]

    # Every file is in the listing and has exactly one outcome row.
    listed = [ln for part in sorted((out / "listing").iterdir()) for ln in part.read_text().splitlines() if ln]
    rows = pq.read_table(out / "documents").to_pylist()
    assert len(listed) == len(rows) == len(files)
    by_source = {r["source"]: r for r in rows}
    assert sorted(by_source) == files

    for r in rows:
        assert r["status"] in {"ok", "partial", "failed"}, r
        if r["status"] != "ok":
            assert r["problems"] and all(p["stage"] and p["code"] and p["message"] for p in r["problems"]), r
    for name, h in made.items():
        r = by_source[f"hostile/{name}"]
        assert r["status"] in h.expect, (name, h.case, r["status"], r["error"])
        if h.code:
            assert h.code in {p["code"] for p in r["problems"]}, (name, h.case, r["problems"])
    if public is not None:  # the public set's kinds that have one right answer
        assert by_source["robustness/empty.pdf"]["problems"][0]["code"] == "empty"
        assert by_source["robustness/qpdf__enc-long-password.pdf"]["problems"][0]["code"] == "encrypted"
        assert by_source["robustness/manifest.jsonl"]["problems"][0]["code"] == "not_matched"

    # Every good document is ok, indexed (Milvus rows and a ledger entry), and nothing failed is in the index.
    good = [by_source[f"hostile/{name}"] for name, h in made.items() if h.control]
    assert len(good) >= 40 and all(r["status"] == "ok" and r["num_chunks"] > 0 for r in good)
    cfg = load_config("configs/local.yaml", overrides)
    indexed = indexed_documents(cfg)
    assert {r["doc_id"] for r in good} <= set(indexed)
    assert not {r["doc_id"] for r in rows if r["status"] == "failed" and r["doc_id"]} & set(indexed)
    ledger = Ledger(str(out), config_hash(cfg), store_target(cfg.milvus.uri, cfg.milvus.collection))
    assert all(ledger.is_done(r["doc_id"]) for r in good)

    # The summary prints each failure on one line of its own.
    bad = [r for r in rows if r["status"] != "ok"]
    lines = [ln for ln in printed.splitlines() if ln.startswith(("  failed ", "  partial "))]
    assert len(lines) == len(bad), printed[-3000:]


def test_rendering_hostile_pages_stays_within_the_size_cap(tmp_path):
    """What the VLM path renders (chunker.convert.render): huge page boxes (200 x 200 in, 2,778 in, UserUnit 75)
    and degenerate ones come out at most ``render.max_side_px`` on a side, or fail alone with an exception."""
    from chunker.config import RenderConfig
    from chunker.convert.render import RenderedDocument
    from chunker.intake.prepare import check_pdf

    cfg = RenderConfig(max_side_px=512)
    rendered = 0
    for h in generate(tmp_path, seed=3):
        if not h.case.startswith(("huge", "degenerate", "image only", "UserUnit", "text layer")):
            continue
        path = os.path.join(tmp_path, h.source)
        pages, problem = check_pdf(path, load_config(None, []).intake)
        doc = RenderedDocument(path, cfg)
        try:
            for page in range(1, min(pages, 2) + 1):
                try:
                    r = doc.render(page)
                except Exception:  # noqa: BLE001 - a page pdfium cannot draw fails alone (the converter records it)
                    continue
                assert max(r.width, r.height) <= 512 and r.data, (h.source, r.width, r.height)
                rendered += 1
        finally:
            doc.close()
    assert rendered >= 20


def _walk(root: Path) -> list[bytes]:
    """Every file under ``root`` as bytes paths (names need not be UTF-8)."""
    out = []
    for folder, _, names in os.walk(os.fsencode(root)):
        out.extend(os.path.join(folder, n) for n in names)
    return out
