"""`make demo` answers its own question: the warranty notice's chunk ranks first.

The samples are converted and planned with :func:`chunker.run.local.process_document` (the functions every Ray stage
runs), embedded with the ingest embedder and loaded into Milvus Lite; the question goes through ``jobs.query`` with
the shipped config, exactly as the Makefile's demo target asks it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from chunker.config import load_config
from chunker.eval.samples import SAMPLE_FACTS
from jobs.query import main

REPO = Path(__file__).resolve().parents[1]
DEMO_QUESTION = "How many days do I have to file a warranty claim?"


def test_makefile_asks_the_question_tested_here() -> None:
    makefile = (REPO / "Makefile").read_text()
    assert re.search(r'jobs\.query --config configs/local\.yaml "' + re.escape(DEMO_QUESTION) + '"', makefile)
    assert any(q.question == DEMO_QUESTION for q in SAMPLE_FACTS.questions)


@pytest.fixture(scope="module")
def demo_index(samples_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from chunker.index.embed import Embedder
    from chunker.run.local import process_document
    from chunker.index.store import ChunkStore

    db = tmp_path_factory.mktemp("demo") / "milvus.db"
    cfg = load_config(REPO / "configs" / "local.yaml", [f"milvus.uri={db}"])
    chunks = [c for pdf in sorted(samples_dir.glob("*.pdf")) for c in process_document(pdf, cfg, samples_dir).chunks]
    emb = Embedder(cfg.embed)
    with ChunkStore(cfg.milvus, emb.dim) as store:
        store.upsert(chunks, emb.encode([c.text for c in chunks]))
        store.flush()
    return db


def test_demo_question_ranks_the_warranty_notice_first(demo_index: Path, capsys: pytest.CaptureFixture) -> None:
    expected = next(q for q in SAMPLE_FACTS.questions if q.question == DEMO_QUESTION)
    assert main(["--config", str(REPO / "configs" / "local.yaml"), "--set", f"milvus.uri={demo_index}",
                 "--json", "-k", "5", DEMO_QUESTION]) == 0
    out = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    hits = out[0]["hits"]
    assert hits[0]["source"] == expected.file, [(h["source"], h["text"][:80]) for h in hits]
    assert expected.answer in hits[0]["text"]  # "within 90 days", not the travel policy's "within 30 days"
