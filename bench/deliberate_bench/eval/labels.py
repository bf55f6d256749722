"""How `deliberate bench dataset` labels a draft for the judge: against the gold number (GSM8K) or the rules' verdict
(the examples), and which split a problem belongs to."""

from __future__ import annotations

import hashlib
import re

from deliberate.selection import same_answer
from deliberate.verifier.parsing import extract_final_answer
from deliberate_api.common.v1 import common_pb2

SPLITS = ("train", "validation")


# The constraint the Scheduler adds to a free-text request (scheduler/verdicts.py); the GSM8K drafts get it too.
GSM8K_CONSTRAINTS = [{"rulePack": "arithmetic"}]


def split_of(problem_id: str, validation_share: float) -> str:
    """ "validation" for a fixed share of problem ids, "train" for the rest: the same answer on every run and
    machine (sha256, not Python's salted hash)."""
    bucket = int.from_bytes(hashlib.sha256(problem_id.encode()).digest()[:8], "big") / 2**64
    return "validation" if bucket < validation_share else "train"


def normalized(text: str) -> str:
    """The draft text as deduplication compares it: case, whitespace and trailing punctuation ignored."""
    return re.sub(r"\s+", " ", text).strip().rstrip(".!").lower()


def failed_messages(verdict: common_pb2.DraftVerdict) -> list[str]:
    """The messages of the hard rules that failed (what makes a verdict invalid)."""
    return [r.message for r in verdict.rule_results if r.hard and not r.passed]


def gsm8k_label(draft_text: str, gold: str, verdict: common_pb2.DraftVerdict) -> dict:
    """Valid iff the final answer equals the gold one; the error is the rules' messages, else what is wrong
    with the answer. The gold answer itself never appears in the label."""
    answer = extract_final_answer(draft_text)
    if same_answer(answer, gold):
        return {"valid": True, "score": 1.0, "error": None}
    messages = failed_messages(verdict)
    if not messages:
        messages = ["no final answer"] if answer is None else [f"the final answer {answer} is wrong"]
    return {"valid": False, "score": 0.0, "error": "; ".join(messages)}


def rules_label(verdict: common_pb2.DraftVerdict) -> dict:
    """The Verifier's verdict as a label: valid, its score, and the failed hard rules' messages."""
    messages = failed_messages(verdict)
    return {
        "valid": verdict.valid,
        "score": round(verdict.score, 4),
        "error": "; ".join(messages) if messages else (None if verdict.valid else "invalid"),
    }
