"""The optional LLM judge: strict parsing of its reply, a real run on the embedded model, and its timeout."""

from __future__ import annotations

import asyncio

import pytest

from deliberate.verifier.judge import JUDGE_WEIGHT, Judge, JudgeAnswer, JudgeResult, parse_judge_reply


def test_a_well_formed_reply_is_accepted_even_with_llm_damage():
    answer = parse_judge_reply(
        "Sure! {\u201cvalid\u201d: true, \u201cscore\u201d: 0.8, \u201cerror\u201d: \u201c\u201d}"
    )
    assert answer == JudgeAnswer(valid=True, score=0.8, error="")


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        ("I think it is fine.", "judge reply is not JSON: "),
        ('{"valid": "yes", "score": 0.5}', "judge reply is malformed at valid: "),
        ('{"valid": true, "score": 7}', "judge reply is malformed at score: "),
        ('{"score": 0.5}', "judge reply is malformed at valid: "),
    ],
)
def test_a_malformed_reply_is_refused_with_a_reason(reply, message):
    result = parse_judge_reply(reply)
    assert isinstance(result, str) and result.startswith(message)


def test_the_judge_blends_into_the_score_only_when_usable():
    usable = JudgeResult(valid=True, score=0.5, error="", latency_s=0.1, usable=True)
    assert usable.blend(1.0) == pytest.approx(1 - JUDGE_WEIGHT * 0.5)
    unusable = JudgeResult(valid=True, score=0.0, error="judge timed out", latency_s=5, usable=False)
    assert unusable.blend(0.9) == 0.9


@pytest.mark.model
def test_the_embedded_model_gives_a_verdict_or_a_clear_reason(embedded_engine):
    judge = Judge(embedded_engine, timeout_s=120, max_new_tokens=24)
    result = asyncio.run(judge.judge("What is 2 + 3?", "2 + 3 = 5. Final answer: 5"))
    assert result.latency_s > 0
    assert 0.0 <= result.score <= 1.0
    if not result.usable:  # the 135M model often answers in prose: that must be said, not guessed
        assert result.error.startswith(("judge reply is not JSON", "judge reply is malformed"))


@pytest.mark.model
def test_a_slow_judge_times_out_without_blocking(embedded_engine):
    judge = Judge(embedded_engine, timeout_s=0.05, max_new_tokens=200)
    result = asyncio.run(judge.judge("What is 2 + 3?", "2 + 3 = 5"))
    assert not result.usable
    assert result.error == "judge timed out after 0.05s"
    assert result.latency_s < 5, "the engine's work was aborted, not waited for"
