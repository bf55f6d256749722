"""What a decision program is told about the functions a rule pack defines in its sandbox.

A pack that gives the request's decision programs functions of its own (the credit pack's `score_offer`: the risk
model as the seed's "built-in simulator") declares how the Drafter describes them under the entry-point group
`deliberate.decision_prompts`, by the pack's name. It is its own entry point, text only, so the Drafter reads it
without the Verifier's dependencies; the pack's `decision_functions` defines the functions themselves.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cache
from importlib.metadata import entry_points

log = logging.getLogger("deliberate.decision_prompts")

ENTRY_POINT_GROUP = "deliberate.decision_prompts"


@dataclass(frozen=True)
class DecisionPrompt:
    """The Drafter puts `help` and `example` in the program prompt in place of the exact engine's (`best_rows`)
    and gives the programs `strategies`, one each, cycling."""

    help: str  # each function's signature, what it returns, how often it may be called
    example: str  # a worked question and the program that answers it with the functions
    strategies: tuple[str, ...]


@cache
def decision_prompts() -> dict[str, DecisionPrompt]:
    """Every installed pack's decision prompt, by pack name, loaded on first use."""
    prompts = {}
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        try:
            prompt = entry.load()
        except Exception:  # a broken third-party prompt must not stop the Drafter
            log.exception("decision prompt failed to load", extra={"entry_point": entry.value})
            continue
        if isinstance(prompt, DecisionPrompt):
            prompts[entry.name] = prompt
    return prompts


def decision_prompt_of(pack_names) -> DecisionPrompt | None:
    """The decision prompt of the first named pack that has one; None when none has."""
    prompts = decision_prompts()
    return next((prompts[name] for name in pack_names if name in prompts), None)
