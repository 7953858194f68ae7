"""jobs.query: JSON lines in the documented shape, clear errors for bad input and an empty index."""

from __future__ import annotations

import json

import pytest

from chunker.config import load_config
from chunker.types import Chunk
from jobs.query import main


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    from chunker.index.embed import Embedder
    from chunker.index.store import ChunkStore

    db = tmp_path_factory.mktemp("q") / "m.db"
    cfg = load_config("configs/local.yaml", [f"milvus.uri={db}"])
    texts = {"a.pdf": "Pumps > Seals\n\nReplace the mechanical seal every 8,000 hours.",
             "sub/b.pdf": "Travel > Meals\n\nThe meal allowance abroad is EUR 42 a day."}
    chunks = [Chunk(chunk_id=f"c{i}", doc_id=f"d{i}", element_ids=[f"d{i}:0"], text=t, breadcrumb=t.split("\n")[0],
                    page_start=2, page_end=3, modality="text", planner="deterministic", config_hash="h", source=s)
              for i, (s, t) in enumerate(texts.items())]
    emb = Embedder(cfg.embed)
    with ChunkStore(cfg.milvus, emb.dim) as store:
        store.upsert(chunks, emb.encode([c.text for c in chunks]))
        store.flush()
    return db


def test_json_lines_have_the_documented_fields(index, tmp_path, capsys):
    qfile = tmp_path / "q.jsonl"
    qfile.write_text(json.dumps({"qid": "m1", "question": "What is the meal allowance abroad?"}) + "\n\n")
    assert main(["--set", f"milvus.uri={index}", "--queries", str(qfile), "--json", "-k", "2"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines() if x.startswith("{")]
    assert len(lines) == 1 and lines[0]["qid"] == "m1"
    hit = lines[0]["hits"][0]
    assert {"chunk_id", "score", "source", "doc_id", "page_start", "page_end", "breadcrumb", "text"} <= set(hit)
    assert hit["source"] == "sub/b.pdf" and (hit["page_start"], hit["page_end"]) == (2, 3)


def test_bad_queries_file_names_the_line(index, tmp_path, capsys):
    qfile = tmp_path / "bad.jsonl"
    qfile.write_text('{"question": "ok?"}\n{"qid": 2}\n')
    assert main(["--set", f"milvus.uri={index}", "--queries", str(qfile)]) == 2  # bad input, not a defect
    assert "line 2: needs a non-empty 'question'" in capsys.readouterr().err
    assert main(["--set", f"milvus.uri={index}", "--queries", str(tmp_path / "missing.jsonl")]) == 2
    assert "queries file not found" in capsys.readouterr().err


def test_empty_index_is_a_clear_error(tmp_path, capsys):
    assert main(["--set", f"milvus.uri={tmp_path / 'empty.db'}", "anything"]) == 4
    assert "holds no chunks" in capsys.readouterr().err
