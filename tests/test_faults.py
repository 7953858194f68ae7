"""Per-document isolation, proven by fault injection: a document that raises at any stage fails alone, with that
stage and a reason, and the run goes on; only a setup error stops it.

The facility (``CHUNKER_FAULTS``, :mod:`chunker.run.faults`) raises a plain ``RuntimeError`` at a stage boundary,
so these tests exercise the path of an unforeseen defect, not of an error the code expects."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from chunker.config import load_config
from chunker.errors import SetupError
from chunker.eval.hostile import plain
from chunker.run import faults

# Where a fault raised at each hook is reported: rendering is part of conversion, parsing part of planning.
STAGES = {"intake": "intake", "render": "convert", "convert": "convert", "parse": "plan", "plan": "plan",
          "embed": "embed", "write": "write"}


def test_the_variable_is_parsed_in_one_place_and_costs_nothing_when_unset(monkeypatch):
    monkeypatch.delenv(faults.ENV, raising=False)
    faults.check("convert", "anything.pdf")  # off: no-op
    assert faults.active() == ()
    monkeypatch.setenv(faults.ENV, " convert:bad , write:x.pdf:setup ,")
    assert faults.active() == (("convert", "bad", False), ("write", "x.pdf", True))
    faults.check("plan", "bad.pdf")  # another stage: nothing
    with pytest.raises(faults.InjectedFault, match="injected fault at convert for 'dir/bad.pdf'") as info:
        faults.check("convert", "good.pdf", "dir/bad.pdf")
    assert not isinstance(info.value, SetupError), "a plain exception: the path of a defect"
    with pytest.raises(SetupError):
        faults.check("write", "x.pdf")
    for wrong in ("convert", "melt:x", "convert:"):
        monkeypatch.setenv(faults.ENV, wrong)
        with pytest.raises(SetupError, match=faults.ENV):
            faults.active()


def indexed_documents(cfg) -> dict[str, int]:  # noqa: ANN001
    """doc_id -> chunks of it in the Milvus collection."""
    from collections import Counter

    from chunker.index.store import ChunkStore

    with ChunkStore(cfg.milvus, 384) as store:
        rows = store.client.query(store.collection, filter='chunk_id != ""', output_fields=["doc_id"], limit=16384)
    return dict(Counter(r["doc_id"] for r in rows))


def _docs(folder: Path, n: int = 0) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(17)
    for stage in STAGES:
        (folder / f"inject-{stage}.pdf").write_bytes(plain(rng, 2).build())
    for i in range(n):
        (folder / f"fine-{i}.pdf").write_bytes(plain(rng, 2).build())


@pytest.mark.parametrize("hook", ["render", "convert", "parse", "plan"])
def test_each_segment_step_keeps_a_fault_on_its_document(hook, tmp_path, monkeypatch):
    """In-process (chunker.run.local drives the functions the Ray stages call): the faulted document fails at its
    stage with the exception named, a clean one passes."""
    from chunker.run.local import process_document

    _docs(tmp_path)
    monkeypatch.setenv(faults.ENV, f"{hook}:inject-{hook}")
    cfg = load_config("configs/local.yaml", ["converter.pdf_text.ocr=false"])
    bad = process_document(tmp_path / f"inject-{hook}.pdf", cfg).document
    assert bad.status.value == "failed"
    assert [(p.stage.value, p.code) for p in bad.problems] == [(STAGES[hook], "error")]
    assert "InjectedFault" in bad.error and f"at {hook}" in bad.error
    assert process_document(tmp_path / "inject-intake.pdf", cfg).document.status.value == "ok"


@pytest.mark.ray
@pytest.mark.slow
def test_a_fault_at_every_stage_fails_one_document_each_and_the_run_goes_on(samples_dir, tmp_path, monkeypatch,
                                                                            capsys):
    """One real ``jobs.ingest`` run (Ray Data, Milvus Lite, MiniLM): the samples, clean generated documents, and one
    document per stage that raises there."""
    import ray

    from chunker.config import config_hash
    from chunker.run.ledger import Ledger, store_target
    from jobs.ingest import main

    docs = tmp_path / "docs"
    shutil.copytree(samples_dir, docs)
    _docs(docs, n=3)
    db, out = tmp_path / "milvus.db", tmp_path / "run"
    overrides = [f"milvus.uri={db}", "converter.pdf_text.ocr=false", "milvus.upsert_batch=64"]
    monkeypatch.setenv(faults.ENV, ",".join(f"{s}:inject-{s}" for s in STAGES))
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    if ray.is_initialized():
        ray.shutdown()  # the variable must be in the environment of the runtime the job starts
    try:
        rc = main(["--config", "configs/local.yaml", "--input", str(docs), "--output", str(out),
                   *(a for o in overrides for a in ("--set", o))])
    finally:
        ray.shutdown()
    printed = capsys.readouterr().out
    assert rc == 0, printed

    rows = {r["source"]: r for r in pq.read_table(out / "documents").to_pylist()}
    assert sorted(rows) == sorted(p.name for p in docs.iterdir())
    for stage, where in STAGES.items():
        row = rows[f"inject-{stage}.pdf"]
        assert row["status"] == "failed", (stage, row)
        assert {p["stage"] for p in row["problems"]} == {where}, (stage, row["problems"])
        assert f"injected fault at {stage}" in row["error"], (stage, row["error"])
        lines = [ln for ln in printed.splitlines() if f"inject-{stage}.pdf" in ln]
        assert len(lines) == 1 and "failed" in lines[0], (stage, printed)
    assert rows["inject-write.pdf"]["problems"][-1]["code"] == "store_refused"

    good = {name: r for name, r in rows.items() if not name.startswith("inject-")}
    assert len(good) == 7 and all(r["status"] == "ok" and r["num_chunks"] > 0 for r in good.values()), good
    cfg = load_config("configs/local.yaml", overrides)
    indexed = indexed_documents(cfg)
    assert {r["doc_id"] for r in good.values()} == set(indexed)
    assert all(indexed[r["doc_id"]] == r["num_chunks"] for r in good.values())
    ledger = Ledger(str(out), config_hash(cfg), store_target(cfg.milvus.uri, cfg.milvus.collection))
    assert all(ledger.is_done(r["doc_id"]) for r in good.values())
    assert not any(ledger.is_done(rows[f"inject-{s}.pdf"]["doc_id"]) for s in STAGES if s != "intake")
    assert os.environ.get(faults.ENV)  # still set: the failures above are the injected ones
