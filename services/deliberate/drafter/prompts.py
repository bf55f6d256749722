"""How a question becomes N different draft prompts: one strategy hint per draft.

A draft is prose (reasoning in text, ending with a final-answer line) or a program (a short Python program in one
fenced block that prints the answer last). A call's last `program_drafts` drafts are programs, so the prose drafts
keep the indexes and strategies they have without them (`draft_plans`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

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
# drafts ran out of tokens before their final line (bench/deliberate_bench/speed/prompt_budget.py, docs/models.md).
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


# ------------------------------------------------------------------------------------------------ program drafts

PROSE: Literal["prose"] = "prose"
PROGRAM: Literal["program"] = "program"
DraftKind = Literal["prose", "program"]

# Strategy hints of program drafts: ways to write the program, none shared with the prose hints.
PROGRAM_STRATEGIES = (
    "Write the program step by step, one variable per quantity.",
    "Assign every number of the question to a named variable first, then compute the answer from them.",
    "Compute each intermediate result in its own variable, then combine them into the answer.",
    "Put a short comment above each calculation saying what it computes.",
    "Start with a comment stating what is asked, then compute the parts it needs.",
    "Write the calculation for each person or item separately, then add them up.",
)

# Written for the default model (Qwen2.5-Coder-0.5B-Instruct): brief, no imports, names after the quantities, the
# answer printed last, so the Verifier's program check reads the printed value.
PROGRAM_SYSTEM_PROMPT = (
    "You answer questions by writing a short Python program that computes the answer. Plain Python, no imports. "
    "Name one variable after each quantity of the question and write one calculation per line. "
    "The last line is print(answer)."
)
PROGRAM_ENDING = "Write only the program, in one ```python block, ending with print(answer)."
# Prefilled after the assistant header: the model continues inside the code block, and the draft's text starts
# with it (the Drafter prepends it to what the engine returns) so that the Verifier sees one fenced block.
PROGRAM_PREFILL = "```python\n"


@dataclass(frozen=True)
class DraftPlan:
    """What one draft of a call is: its strategy hint and its kind."""

    strategy: str
    kind: DraftKind
    decision: bool = False  # a program that reads the request's data (`ctx`) and prints a JSON plan (decision.py)
    prefill: str = ""  # a decision program's opening (decision_prefill); other programs open with PROGRAM_PREFILL


def program_strategies_for(count: int, round_: int = 0, start: int = 0) -> list[str]:
    """`count` program hints from the `start`-th program of the round on, cycling; a re-draft round starts
    further along, so it tries other ways of writing the program."""
    offset = start + round_ * max(count, 1)
    return [PROGRAM_STRATEGIES[(offset + i) % len(PROGRAM_STRATEGIES)] for i in range(count)]


def draft_plans(
    num_drafts: int, hints: Sequence[str], round_: int = 0, first_index: int = 0, program_drafts: int = 0
) -> list[DraftPlan]:
    """One plan per draft of a call: the first `num_drafts - program_drafts` are prose with the strategies
    `strategies_for` gives them (as without programs), the last `program_drafts` programs with program hints. A
    replacement call (`first_index` past the round's drafts) numbers its programs on from there."""
    programs = max(0, min(program_drafts, num_drafts))
    prose = num_drafts - programs
    plans = [DraftPlan(s, PROSE) for s in strategies_for(num_drafts, hints, round_, first_index)[:prose]]
    plans += [DraftPlan(s, PROGRAM) for s in program_strategies_for(programs, round_, first_index)]
    return plans


def program_user_message(question: str, strategy: str, feedback: str = "") -> str:
    parts = [question.strip(), f"Approach: {strategy}"]
    if feedback.strip():
        parts.append(f"Avoid these problems of earlier attempts: {feedback.strip()}")
    parts.append(PROGRAM_ENDING)
    return "\n\n".join(parts)
