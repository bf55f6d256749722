"""What a decision program is told about the functions a rule pack defines in its sandbox.

A pack that gives the request's decision programs functions of its own (the credit pack's `score_offer`: the risk
model as the seed's "built-in simulator") says how the Drafter describes them in its `decision_prompt`, and defines
the functions themselves in `decision_functions`: one entry point per pack (`deliberate.rule_packs`). The Drafter
loads only the packs a request names, and a pack module needs neither Redis nor the Verifier to load.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DecisionPrompt:
    """The Drafter puts `help` and `example` in the program prompt in place of the exact engine's (`best_rows`)
    and gives the programs `strategies`, one each, cycling."""

    help: str  # each function's signature, what it returns, how often it may be called
    example: str  # a worked question and the program that answers it with the functions
    strategies: tuple[str, ...]


def decision_prompt_of(pack_names) -> DecisionPrompt | None:
    """The decision prompt of the first named pack that has one (`RulePack.decision_prompt`); None when none has.
    Loads only the named packs (`packs.pack_class`)."""
    from .packs import pack_class  # packs reads DecisionPrompt from here

    for name in pack_names:
        pack = pack_class(name)
        if pack is not None and pack.decision_prompt is not None:
            return pack.decision_prompt
    return None
