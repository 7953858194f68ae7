"""jobs.evaluate end to end on the generated samples: report shape, baselines beside ours, per-type table."""

from __future__ import annotations

import json
import os

import pytest

from chunker.eval.samples import SAMPLE_FACTS

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def test_evaluate_writes_comparable_report(samples_dir, tmp_path):
    import ray

    from jobs.evaluate import main

    queries = tmp_path / "q.jsonl"
    with queries.open("w") as fh:
        for i, q in enumerate(SAMPLE_FACTS.questions):
            fh.write(json.dumps({"qid": f"s{i}", "type": "Factual" if i % 2 else "Procedural", "question": q.question,
                                 "evidence": [{"doc": q.file, "text": q.answer}]}) + "\n")
    ref = tmp_path / "ref.jsonl"
    ref.write_text(json.dumps({"file_name": "travel-expense-policy.md", "chunks": ["Meals: EUR 42 a day abroad."]})
                   + "\n")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=4, include_dashboard=False, ignore_reinit_error=True, log_to_driver=False)
    try:
        out = tmp_path / "eval"
        assert main(["--corpus", str(samples_dir), "--queries", str(queries), "--reference", str(ref),
                     "--modes", "dense,hybrid", "--output", str(out)]) == 0
        first = json.loads((out / "ingest" / "summary.json").read_text())
        report = json.loads((out / "report.json").read_text())
        md = (out / "report.md").read_text()
        # Again into the same folder without --reuse: every document is converted again (the code may have changed
        # since; the done ledger only knows the config), none skipped as done.
        assert main(["--corpus", str(samples_dir), "--queries", str(queries), "--modes", "hybrid", "--no-baselines",
                     "--output", str(out)]) == 0
        again = json.loads((out / "ingest" / "summary.json").read_text())
    finally:
        ray.shutdown()
    assert first["skipped"] == 0 and again["skipped"] == 0 and again["ok"] == first["ok"] > 0, (first, again)
    systems = {(r["system"], r["mode"]) for r in report["rows"]}
    assert systems == {(s, m) for s in ("ours", "fixed-size 1000/200 (text layer)", "reference chunks")
                       for m in ("dense", "hybrid")}
    ours = {r["mode"]: r for r in report["rows"] if r["system"] == "ours"}
    assert ours["hybrid"]["questions"] == len(SAMPLE_FACTS.questions)
    assert ours["hybrid"]["doc@5"] == 1.0, "every sample question finds its document"
    assert set(report["by_type"]) == {"Factual", "Procedural"}
    assert "| ours | hybrid |" in md and "Command: `python -m jobs.evaluate" in md
    assert "skipped (no --answer-base-url)" in md
    # Our chunks' health rides with the scores, and the ingest wrote its report into the run folder.
    assert "## Chunk health (ours)" in md and report["chunk_health"]["chunks"] == ours["hybrid"]["chunks"]
    assert first["health"]["chunks"] == ours["hybrid"]["chunks"] and (out / "ingest" / "chunk_health.png").is_file()
