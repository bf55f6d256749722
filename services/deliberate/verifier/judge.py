"""The optional LLM judge: a semantic second opinion on drafts that already pass every hard rule.

It answers `{"valid": bool, "score": 0..1, "error": "…"}`; the reply is parsed as JSON (with repair) and
then validated strictly. A judge that times out or answers nonsense changes nothing about the draft: its
verdict says so in `error` and the rules' verdict stands.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError

from deliberate_api.common.v1 import common_pb2

from ..core.convert import duration
from ..engines.base import Completion, Engine, SamplingParams
from .parsing import parse_json

# Share of the final score that comes from the judge when it gave a usable verdict.
JUDGE_WEIGHT = 0.3

SYSTEM_PROMPT = "You check solutions for consistency. You answer only with JSON."
INSTRUCTIONS = (
    "Does the solution do what it says, step by step, and answer the question? "
    'Reply with one JSON object: {"valid": true or false, "score": a number from 0 to 1, '
    '"error": "what is wrong, or empty"}.'
)


class JudgeAnswer(BaseModel):
    model_config = ConfigDict(extra="ignore")
    valid: StrictBool
    score: float = Field(ge=0.0, le=1.0)
    error: str | None = ""  # a trained judge answers null for "nothing wrong" (docs/judge.md)


def judge_user_message(question: str, draft_text: str) -> str:
    """What the judge is asked about one draft; `deliberate bench train-judge` trains on exactly this."""
    return f"Question:\n{question.strip()}\n\nSolution:\n{draft_text.strip()}\n\n{INSTRUCTIONS}"


@dataclass(frozen=True)
class JudgeResult:
    valid: bool
    score: float
    error: str
    latency_s: float
    usable: bool  # False when the judge timed out or its reply did not parse

    def to_proto(self) -> common_pb2.JudgeVerdict:
        return common_pb2.JudgeVerdict(
            valid=self.valid, score=self.score, error=self.error, latency=duration(self.latency_s)
        )

    def blend(self, rule_score: float) -> float:
        return (1 - JUDGE_WEIGHT) * rule_score + JUDGE_WEIGHT * self.score if self.usable else rule_score


def parse_judge_reply(text: str) -> JudgeAnswer | str:
    """The judge's reply as a validated answer, or a message saying why it is unusable."""
    parsed = parse_json(text)
    if parsed.error is not None:
        return f"judge reply is not JSON: {parsed.error}"
    try:
        return JudgeAnswer.model_validate(parsed.value)
    except ValidationError as error:
        first = error.errors()[0]
        return f"judge reply is malformed at {'.'.join(map(str, first['loc'])) or 'reply'}: {first['msg']}"


class Judge:
    def __init__(self, engine: Engine, timeout_s: float, max_new_tokens: int = 64, hard: bool = False):
        self.engine = engine
        self.timeout_s = timeout_s
        self.hard = hard
        self.params = SamplingParams(temperature=0.0, max_new_tokens=max_new_tokens, presence_penalty=0.0,
                                     frequency_penalty=0.0)  # fmt: skip

    async def judge(self, question: str, draft_text: str) -> JudgeResult:
        started = time.perf_counter()
        prompt = self.engine.format_chat(SYSTEM_PROMPT, judge_user_message(question, draft_text))
        try:
            reply = await asyncio.wait_for(self.generate(prompt), self.timeout_s)
        except TimeoutError:
            return JudgeResult(True, 0.0, f"judge timed out after {self.timeout_s:g}s", self.elapsed(started), False)
        answer = parse_judge_reply(reply)
        if isinstance(answer, str):
            return JudgeResult(True, 0.0, answer, self.elapsed(started), False)
        return JudgeResult(answer.valid, answer.score, answer.error or "", self.elapsed(started), True)

    async def generate(self, prompt: str) -> str:
        async for event in self.engine.stream([prompt], self.params):
            if isinstance(event, Completion):
                return event.text
        return ""

    @staticmethod
    def elapsed(started: float) -> float:
        return time.perf_counter() - started
