"""What every organisation generator shares: the question record and the collector that writes PDFs and
questions as it goes."""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path

from chunker.eval.devset.pdfdoc import DevPdf


@dataclass
class Evidence:
    doc: str  # file name of a document that holds the fact
    text: str  # the fact as written in that document (content words must be recoverable from its chunks)


@dataclass
class Question:
    qid: str
    type: str  # Factual | Table | Numeric | Identity | Procedural
    question: str
    evidence: list[Evidence]
    answer: str = ""  # short answer; its figures are what num@5 looks for
    org: str = ""


@dataclass
class Corpus:
    """Collects the documents and questions of one generation run."""

    out: Path
    rng: random.Random
    questions: list[Question] = field(default_factory=list)
    docs: dict[str, str] = field(default_factory=dict)  # file name -> organisation
    pages: int = 0

    def save(self, pdf: DevPdf, name: str, org: str) -> str:
        if name in self.docs:
            raise ValueError(f"duplicate document name {name!r}")
        (self.out / "pdf").mkdir(parents=True, exist_ok=True)
        pdf.output(str(self.out / "pdf" / name))
        self.docs[name] = org
        self.pages += pdf.page_no()
        return name

    def ask(self, org: str, qtype: str, question: str, evidence: list[tuple[str, str]], answer: str = "") -> None:
        qid = f"{org}-{sum(1 for q in self.questions if q.org == org) + 1:03d}"
        self.questions.append(Question(qid, qtype, question, [Evidence(d, t) for d, t in evidence], answer, org))

    def pick(self, options: list[str] | tuple[str, ...]) -> str:
        """One phrasing of several, so questions do not all read alike."""
        return self.rng.choice(list(options))

    def write_queries(self) -> Path:
        path = self.out / "queries.jsonl"
        with path.open("w", encoding="utf-8") as fh:
            for q in self.questions:
                rec = asdict(q)
                fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
        return path


def money(value: float, decimals: int = 0) -> str:
    """Financial-statement style: thousands commas, negatives in parentheses."""
    text = f"{abs(value):,.{decimals}f}"
    return f"({text})" if value < 0 else text
