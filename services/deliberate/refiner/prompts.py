"""The refinement prompt and the thinking-trace marker, built from the selected drafts."""

from __future__ import annotations

import json
from dataclasses import dataclass

from ..selection.final_text import thinking_trace

SYSTEM_PROMPT = "You turn checked candidate solutions into one clear, correct final answer."
# A free-text answer is a short worked solution a person can follow, not the bare result (docs/refiner.md).
WORKED_ANSWER = (
    "Show the steps in plain text, one short line each with its computation, then end with a last line of the form "
    "'Final answer: <answer>', the answer in plain text (no LaTeX, no \\boxed)."
)


@dataclass(frozen=True)
class SelectedDraft:
    index: int
    text: str
    score: float
    valid: bool
    passed_rules: tuple[str, ...]
    failed_rules: tuple[str, ...]


def thinking_trace_of(best: SelectedDraft) -> str:
    return thinking_trace(best.index, best.score, best.passed_rules, best.failed_rules)


def refine_user_message(question: str, selected: list[SelectedDraft], output_schema: dict | None) -> str:
    candidates = "\n\n".join(
        f"Candidate {n} ({'verified' if d.valid else 'not verified'}, score {d.score:.2f}):\n{d.text.strip()}"
        for n, d in enumerate(selected, start=1)
    )
    ending = (
        f"Give the answer as one JSON object matching this JSON Schema:\n{json.dumps(output_schema)}"
        if output_schema
        else WORKED_ANSWER
    )
    return (
        f"Question:\n{question.strip()}\n\n{candidates}\n\n"
        "Write the final solution: keep what the candidates got right, fix any mistake, be concise. " + ending
    )
