import asyncio
import json

import httpx
import pytest

from chunker.eval.answer_eval import (JudgementError, answer_request, evaluate_answers, judge_request, parse_judgement,
                                 summarise)
from chunker.backends.openai_backend import OpenAIBackend
from chunker.config import ModelConfig


def test_parse_judgement_accepts_the_protocol_and_refuses_the_rest():
    j = parse_judgement('Sure: {"is_answer_exist": "true", "response_quality": "Correct", "answer_ids": [1, "2"]}')
    assert (j.is_answer_exist, j.response_quality, j.answer_ids) == (True, "correct", [1, 2])
    with pytest.raises(JudgementError, match="not one of"):
        parse_judgement('{"is_answer_exist": true, "response_quality": "great", "answer_ids": []}')
    with pytest.raises(JudgementError, match="no JSON"):
        parse_judgement("I think it is correct")
    with pytest.raises(JudgementError, match="valid JSON"):
        parse_judgement('{"is_answer_exist": tru}')


def test_prompts_number_the_sources_and_ask_for_the_schema():
    req = answer_request("Q?", ["alpha", "beta"])
    assert "[1] alpha" in req.user and "[2] beta" in req.user and req.temperature == 0.0
    jreq = judge_request("Q?", ["alpha"], "an answer")
    assert jreq.json_schema["properties"]["response_quality"]["enum"] == ["correct", "hallucinate", "abstain"]
    assert "Answer: an answer" in jreq.user


def test_end_to_end_over_an_openai_compatible_endpoint():
    verdicts = {"q1": "correct", "q2": "hallucinate", "q3": "garbage"}

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        user = body["messages"][-1]["content"]
        text = user if isinstance(user, str) else " ".join(p.get("text", "") for p in user)
        qid = next(q for q in verdicts if f"about {q}" in text)
        if "response_quality" in text:  # the judge's turn
            reply = json.dumps({"is_answer_exist": qid != "q2", "response_quality": verdicts[qid], "answer_ids": [1]})
        else:
            reply = f"answer for {qid}"
        return httpx.Response(200, json={"choices": [{"message": {"content": reply}, "finish_reason": "stop"}],
                                         "usage": {"prompt_tokens": 5, "completion_tokens": 3}})

    backend = OpenAIBackend(ModelConfig(name="judge", base_url="http://127.0.0.1:9/v1"),
                            transport=httpx.MockTransport(handler))
    items = [(q, f"Question about {q}?", ["a source"]) for q in verdicts]
    scores = asyncio.run(evaluate_answers(items, backend, backend, concurrency=2))
    by = {s.qid: s for s in scores}
    assert by["q1"].answer == "answer for q1" and by["q1"].judgement.response_quality == "correct"
    assert by["q3"].judgement is None and "response_quality" in by["q3"].error
    summary = summarise(scores)
    assert summary == {"questions": 3, "judged": 2, "errors": 1, "accuracy": 0.5, "hallucination_rate": 0.5,
                       "abstain_rate": 0.0, "answer_in_context": 0.5}
