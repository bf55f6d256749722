"""The refinement prompt and the thinking-trace marker, built from the selected drafts."""

from __future__ import annotations

import json
from dataclasses import dataclass

SYSTEM_PROMPT = "You turn checked candidate solutions into one clear, correct final answer."


@dataclass(frozen=True)
class SelectedDraft:
    index: int
    text: str
    score: float
    valid: bool
    passed_rules: tuple[str, ...]
    failed_rules: tuple[str, ...]


def thinking_trace(best: SelectedDraft) -> str:
    """`[THINKING_TRACE: Draft#3 scored 0.92, passed budget_check and category_check]`, naming the real rules."""
    parts = [f"Draft#{best.index} scored {best.score:.2f}"]
    if best.passed_rules:
        parts.append(f"passed {join_words(best.passed_rules)}")
    if best.failed_rules:
        parts.append(f"failed {join_words(best.failed_rules)}")
    return f"[THINKING_TRACE: {', '.join(parts)}]"


def join_words(words: tuple[str, ...]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def refine_user_message(question: str, selected: list[SelectedDraft], output_schema: dict | None) -> str:
    candidates = "\n\n".join(
        f"Candidate {n} ({'verified' if d.valid else 'not verified'}, score {d.score:.2f}):\n{d.text.strip()}"
        for n, d in enumerate(selected, start=1)
    )
    ending = (
        f"Give the answer as one JSON object matching this JSON Schema:\n{json.dumps(output_schema)}"
        if output_schema
        else "End with a last line of the form 'Final answer: <answer>'."
    )
    return (
        f"Question:\n{question.strip()}\n\n{candidates}\n\n"
        "Write the final solution: keep what the candidates got right, fix any mistake, be concise. " + ending
    )
