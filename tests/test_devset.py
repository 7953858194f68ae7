"""The development set generator: deterministic, well-formed, and its evidence is really in the documents."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from chunker.eval.devset import ORGS, generate_devset
from chunker.eval.metrics import content_words

pytest.importorskip("fpdf")


@pytest.fixture(scope="module")
def devset(tmp_path_factory: pytest.TempPathFactory):
    return generate_devset(tmp_path_factory.mktemp("devset"), seed=0)


def _digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_same_seed_same_bytes_other_seed_other_content(devset, tmp_path: Path) -> None:
    again = generate_devset(tmp_path / "again", seed=0, orgs=("finance", "health"))
    first = _digest(devset.pdf_dir)
    for name, digest in _digest(again.pdf_dir).items():
        assert first[name] == digest  # an organisation's bytes do not depend on the others being generated
    other = generate_devset(tmp_path / "other", seed=1, orgs=("finance",))
    assert any(first[n] != d for n, d in _digest(other.pdf_dir).items())


def test_size_and_shape(devset) -> None:
    assert 60 <= devset.documents <= 120
    assert 300 <= len(devset.questions) <= 500
    assert {q.org for q in devset.questions} == {"halvorsen", "finance", "health", "software", "freight", "council"}
    assert len(ORGS) == 6
    lines = devset.queries.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(devset.questions)
    qids = set()
    for line in lines:
        rec = json.loads(line)
        assert {"qid", "type", "question", "evidence", "answer"} <= set(rec)
        assert rec["qid"] not in qids
        qids.add(rec["qid"])
        assert rec["evidence"] and all((devset.pdf_dir / e["doc"]).is_file() for e in rec["evidence"])


def test_evidence_words_are_in_the_text_layer(devset) -> None:
    """By construction every fact is printed in its document: its content words are all in the text layer (words
    broken at a line end by a hyphen are joined first)."""
    import pypdfium2 as pdfium

    text: dict[str, set[str]] = {}
    for pdf in devset.pdf_dir.glob("*.pdf"):
        doc = pdfium.PdfDocument(str(pdf))
        raw = "\n".join(doc[i].get_textpage().get_text_range() for i in range(len(doc)))
        doc.close()
        text[pdf.name] = content_words(re.sub("[\u00ad\ufffe\u0002]\\s*", "", raw))
    missing = []
    for q in devset.questions:
        for e in q.evidence:
            lost = content_words(e.text) - text[e.doc]
            if lost:
                missing.append((q.qid, e.doc, sorted(lost)))
    assert not missing, missing[:5]


def test_layouts_the_set_is_for(devset) -> None:
    """Near-duplicate spec sheets, multi-period financial statements and bullet lists in table cells are present."""
    names = {p.name for p in devset.pdf_dir.glob("*.pdf")}
    assert {"HX-100 Specification Sheet.pdf", "HX-200 Specification Sheet.pdf"} <= names
    assert sum(n.startswith("BWH_QR_") for n in names) == 5
    numeric = [q for q in devset.questions if q.type == "Numeric"]
    assert len(numeric) >= 100 and all(re.search(r"\d", q.answer) for q in numeric)
    identity = [q for q in devset.questions if q.type == "Identity"]
    assert len(identity) >= 40
