"""Answer-level evaluation: answer each question from its retrieved chunks, then have a judge model label the answer,
following the protocol of the vision-guided chunking paper (appendix A.2): does the retrieved knowledge hold the
answer (``is_answer_exist``), and was the answer correct, a hallucination, or an abstention (``response_quality``).

Any OpenAI-compatible endpoint serves both roles; nothing runs without one.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass

from chunker.errors import ChunkerError
from chunker.backends.base import GenerationRequest, ModelBackend

ANSWER_SYSTEM = (
    "You answer questions about an organisation's documents using only the numbered sources given. "
    "Cite nothing outside them. When the sources do not hold the answer, say that you cannot answer from them."
)

JUDGE_SYSTEM = (
    "You grade a question-answering system. You see a question, the numbered sources it retrieved and its answer. "
    "Reply with one JSON object and nothing else."
)

JUDGE_RULES = """Fill these keys:
- "is_answer_exist": true when the sources contain what is needed to answer the question, directly or by a plain
  inference; false when they are unrelated or insufficient.
- "response_quality": "correct" when the answer is accurate and supported by the sources; "hallucinate" when it
  states anything the sources do not support, or treats unrelated sources as relevant; "abstain" when it declines
  or says the sources do not hold the answer.
- "answer_ids": the source numbers that support the answer (or should have); [] when none do."""

QUALITIES = ("correct", "hallucinate", "abstain")


def sources_block(passages: list[str], max_chars: int = 6000) -> str:
    out, used = [], 0
    for i, p in enumerate(passages, 1):
        piece = p[: max(0, max_chars - used)]
        if not piece:
            break
        out.append(f"[{i}] {piece}")
        used += len(piece)
    return "\n\n".join(out)


def answer_request(question: str, passages: list[str], max_tokens: int = 400) -> GenerationRequest:
    user = f"Sources:\n{sources_block(passages)}\n\nQuestion: {question}\nAnswer briefly."
    return GenerationRequest(system=ANSWER_SYSTEM, user=user, temperature=0.0, max_tokens=max_tokens)


def judge_request(question: str, passages: list[str], answer: str) -> GenerationRequest:
    user = (f"Question: {question}\n\nSources:\n{sources_block(passages)}\n\nAnswer: {answer}\n\n{JUDGE_RULES}")
    schema = {
        "type": "object",
        "properties": {
            "is_answer_exist": {"type": "boolean"},
            "response_quality": {"enum": list(QUALITIES)},
            "answer_ids": {"type": "array", "items": {"type": "integer"}},
        },
        "required": ["is_answer_exist", "response_quality", "answer_ids"],
    }
    return GenerationRequest(system=JUDGE_SYSTEM, user=user, temperature=0.0, max_tokens=200, json_schema=schema)


@dataclass
class Judgement:
    is_answer_exist: bool
    response_quality: str
    answer_ids: list[int]


class JudgementError(ChunkerError, ValueError):
    """The judge's reply is not the JSON the protocol asks for."""


def parse_judgement(text: str) -> Judgement:
    m = re.search(r"\{.*\}", text, re.S)
    if not m:
        raise JudgementError(f"no JSON object in the judge's reply: {text[:120]!r}")
    try:
        data = json.loads(m.group(0))
    except json.JSONDecodeError as exc:
        raise JudgementError(f"judge reply is not valid JSON ({exc.msg})") from None
    quality = str(data.get("response_quality", "")).strip().lower()
    if quality not in QUALITIES:
        raise JudgementError(f"response_quality {quality!r} is not one of {', '.join(QUALITIES)}")
    exist = data.get("is_answer_exist")
    if isinstance(exist, str):
        exist = exist.strip().lower() == "true"
    ids = [int(i) for i in data.get("answer_ids", []) if str(i).lstrip("-").isdigit()]
    return Judgement(bool(exist), quality, ids)


@dataclass
class AnswerScore:
    qid: str
    answer: str
    judgement: Judgement | None
    error: str = ""


async def _one(qid: str, question: str, passages: list[str], answerer: ModelBackend, judge: ModelBackend,
               slots: asyncio.Semaphore) -> AnswerScore:
    async with slots:
        try:
            answer = (await answerer.generate(answer_request(question, passages))).text.strip()
            verdict = await judge.generate(judge_request(question, passages, answer))
            return AnswerScore(qid, answer, parse_judgement(verdict.text))
        except Exception as exc:  # one question's trouble is counted, not fatal
            return AnswerScore(qid, "", None, f"{type(exc).__name__}: {exc}")


async def evaluate_answers(items: list[tuple[str, str, list[str]]], answerer: ModelBackend, judge: ModelBackend,
                           concurrency: int = 8) -> list[AnswerScore]:
    """``items`` = (qid, question, retrieved passages in rank order)."""
    slots = asyncio.Semaphore(concurrency)
    return list(await asyncio.gather(*(_one(q, text, p, answerer, judge, slots) for q, text, p in items)))


def summarise(scores: list[AnswerScore]) -> dict[str, float | int]:
    judged = [s.judgement for s in scores if s.judgement is not None]
    n = len(judged)

    def share(pred) -> float:  # noqa: ANN001 - a small local predicate
        return round(sum(1 for j in judged if pred(j)) / n, 4) if n else 0.0

    return {
        "questions": len(scores),
        "judged": n,
        "errors": len(scores) - n,
        "accuracy": share(lambda j: j.response_quality == "correct"),
        "hallucination_rate": share(lambda j: j.response_quality == "hallucinate"),
        "abstain_rate": share(lambda j: j.response_quality == "abstain"),
        "answer_in_context": share(lambda j: j.is_answer_exist),
    }
