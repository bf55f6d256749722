"""How a question becomes N different draft prompts: one strategy hint per draft."""

from __future__ import annotations

import json
from collections.abc import Sequence

DEFAULT_STRATEGIES = (
    "Solve it step by step, writing every calculation.",
    "List the known quantities first, then compute what is asked.",
    "Work backwards from what the question asks for.",
    "Break the problem into small sub-problems and solve each one.",
    "Estimate the answer first, then compute it exactly and compare.",
    "Write an equation for the unknown, then solve it.",
    "Explain your reasoning briefly, then check it once.",
    "Use a table of the values involved, then compute the result.",
)

# Brief on purpose: the default model (Qwen2.5-Coder-0.5B) otherwise writes code and long prose, and most
# drafts ran out of tokens before their final line (bench/prompt_budget.py, docs/models.md).
SYSTEM_PROMPT = (
    "You are a careful problem solver. Reason in short steps, one calculation per line, in plain text "
    "(no code). Then state the result."
)

FREE_TEXT_ENDING = "Be brief. End with a last line of the form 'Final answer: <answer>'."
# Small models tend to echo a schema back; asking for "the object, not the schema" curbs it.
JSON_ENDING = "End with your answer as one JSON object (the object itself, not the schema) that follows:\n{schema}"
# Decoding constrained to the schema: the whole draft is the object, so the reasoning goes into it or nowhere.
CONSTRAINED_JSON_ENDING = "Answer with one JSON object (the object itself, not the schema) that follows:\n{schema}"


def strategies_for(num_drafts: int, hints: Sequence[str], round_: int = 0, first_index: int = 0) -> list[str]:
    """The client's hints first, then the defaults that are not already used, cycling if N is large.
    A re-draft round starts further along the defaults, so it tries other strategies. Drafts from
    `first_index` on (a replacement draft) take the strategies that follow the round's first ones."""
    total = first_index + num_drafts
    chosen = [hint for hint in hints[:total] if hint.strip()]
    spare = [s for s in DEFAULT_STRATEGIES if s not in chosen] or list(DEFAULT_STRATEGIES)
    offset = round_ * num_drafts
    while len(chosen) < total:
        chosen.append(spare[(len(chosen) + offset) % len(spare)])
    return chosen[first_index:]


def draft_user_message(
    question: str, strategy: str, output_schema: dict | None, feedback: str = "", constrained: bool = False
) -> str:
    if output_schema:
        ending = (CONSTRAINED_JSON_ENDING if constrained else JSON_ENDING).format(schema=json.dumps(output_schema))
    else:
        ending = FREE_TEXT_ENDING
    parts = [question.strip(), f"Approach: {strategy}"]
    if feedback.strip():
        parts.append(f"Avoid these problems of earlier attempts: {feedback.strip()}")
    parts.append(ending)
    return "\n\n".join(parts)
