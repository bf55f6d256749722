"""Selection: given one request's verdicted drafts, rank them and say why. Pure code, no gRPC.

The Scheduler and every evaluation import this package, so what the product decides is what the evaluation
measures. Three parts:

* `answers` — the one answer identity (and `numbers`, the one number parser);
* `signals` — named numbers per draft (`@signal`), computed for every draft of the request;
* `policies` — named rankings over the signals (`@policy`): `weighted` (the default), `best_of`, `majority`.

`select` runs a policy and gives the status the answer earns: ``verified`` when the best selected draft passed
every hard rule and a substantive check of the answer itself (its evidence, named in the reason),
``computation_checked`` when the only substantive checks were of its computations (arithmetic recomputed, its
program run), ``unchecked`` when it passed every hard rule but nothing substantive applied, ``unverified`` when it
failed a hard rule (no draft passed, or the policy chose a failing one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from . import signals
from .answers import answer_key, answer_value, majority, same_answer
from .policies import DEFAULT_POLICY, DEFAULT_WEIGHTS, POLICIES, Policy, get_policy, policy
from .signals import SIGNALS, Candidate, Table, signal

Status = Literal["verified", "computation_checked", "unchecked", "unverified"]

__all__ = [
    "DEFAULT_POLICY",
    "DEFAULT_WEIGHTS",
    "POLICIES",
    "SIGNALS",
    "Candidate",
    "Policy",
    "Selection",
    "Status",
    "answer_key",
    "answer_value",
    "get_policy",
    "majority",
    "policy",
    "same_answer",
    "select",
    "signal",
]


@dataclass(frozen=True)
class Selection:
    selected: list[Candidate]  # best first
    status: Status
    reason: str
    signals: Table  # draft id → every registered signal
    finals: dict[str, float]  # draft id → the policy's value, for every draft (only competitors are ranked by it)
    ranking: tuple[str, ...]  # every draft id, best first: the competitors as ranked, then the others
    policy: str

    @property
    def verified_by(self) -> list[str]:
        """The substantive checks behind a ``verified`` status (the best draft's evidence); [] otherwise."""
        return list(self.selected[0].evidence) if self.status == "verified" else []


def select(
    candidates: Sequence[Candidate],
    *,
    policy: str = DEFAULT_POLICY,
    weights: Mapping[str, float] = DEFAULT_WEIGHTS,
    max_selected: int = 2,
    overrides: Mapping[str, Mapping[str, float]] | None = None,
) -> Selection:
    """Ranks `candidates` under `policy` and selects the best `max_selected` competitors.

    When nobody competes (no draft passed every hard rule, or none states an answer for a vote), the
    best-scoring draft is selected alone, valid ones first — and its status says what it earned.
    `overrides` replaces computed signal values (draft id → name → value), for replays of recorded decisions.
    """
    if not candidates:
        raise ValueError("no drafts to select from")
    candidates = cross_checked(candidates)
    chosen_policy = get_policy(policy)
    table = signals.compute(candidates, overrides)
    if chosen_policy.competitors == "valid":
        pool = [c for c in candidates if c.valid]
    else:
        pool = [c for c in candidates if answer_key(c.answer)]
    ranked = chosen_policy.rank(pool, table, weights) if pool else []
    competing = {c.draft_id for c in pool}
    rest = sorted(
        (c for c in candidates if c.draft_id not in competing), key=lambda c: (not c.valid, -c.score, c.index)
    )
    # Drafts that do not compete still get the policy's value, so every reported `final` reads the same way.
    valued = ranked + (chosen_policy.rank(rest, table, weights) if rest else [])
    finals = {c.draft_id: final for c, final in valued}
    ordered = [c for c, _ in ranked] + rest
    selected = [c for c, _ in ranked][:max_selected] or [rest[0]]
    status, reason = earned_status(selected[0], candidates, chosen_policy.name)
    return Selection(selected, status, reason, table, finals, tuple(c.draft_id for c in ordered), chosen_policy.name)


CROSS_CHECK = "cross_check"  # the evidence two kinds of solution earn by reaching one answer apart


def cross_checked(candidates: Sequence[Candidate]) -> list[Candidate]:
    """The candidates with cross-check evidence added where a valid program of the round (its `program` check
    passed: it ran in the sandbox and printed the answer) and a valid prose draft reached the same answer — to both,
    so `verified_by` names it whichever of the two is picked. Two kinds of solution agreeing checks the plan, not
    only the arithmetic. Both must have passed their own hard rules."""
    computed = {answer_key(c.answer) for c in candidates if computed_by_program(c)}
    reasoned = {answer_key(c.answer) for c in candidates if reasoned_in_prose(c)}
    agreed = (computed & reasoned) - {""}
    return [
        replace(c, evidence=(*c.evidence, CROSS_CHECK))
        if (computed_by_program(c) or reasoned_in_prose(c))
        and answer_key(c.answer) in agreed
        and CROSS_CHECK not in c.evidence
        else c
        for c in candidates
    ]


def computed_by_program(candidate: Candidate) -> bool:
    return candidate.kind == "program" and candidate.valid and "program" in candidate.evidence


def reasoned_in_prose(candidate: Candidate) -> bool:
    return candidate.kind == "prose" and candidate.valid


# Checks of an answer's computations, not of its plan: a wrong plan computed correctly passes both (on recorded
# GSM8K drafts a pick with these alone was right on about a third of problems, one cross-checked on about two
# thirds: docs/eval.md#the-200-problem-evaluation).
COMPUTATION_EVIDENCE = frozenset({"arithmetic", "program"})


def plan_unchecked(best: Candidate, candidates: Sequence[Candidate]) -> bool:
    """Whether the best draft's evidence checks its computations only and no draft of another kind vouches for its
    answer: a valid prose draft that a program of the round cross-checked on the same answer counts for it."""
    if not set(best.evidence) <= COMPUTATION_EVIDENCE:
        return False
    key = answer_key(best.answer)
    return not any(c.valid and CROSS_CHECK in c.evidence and answer_key(c.answer) == key for c in candidates)


def earned_status(best: Candidate, candidates: Sequence[Candidate], policy_name: str) -> tuple[Status, str]:
    """The status the best selected draft earns, and why."""
    valid = sum(c.valid for c in candidates)
    passed = f"{valid} of {len(candidates)} drafts passed every hard rule"
    by = "" if policy_name == DEFAULT_POLICY else f"; ranked by the {policy_name} policy"
    if not best.valid:
        if valid:
            return "unverified", f"{passed}{by}, which chose draft #{best.index}: it failed a hard rule"
        return "unverified", f"none of {len(candidates)} drafts passed every hard rule{by}"
    if best.evidence and not plan_unchecked(best, candidates):
        return "verified", f"{passed}; checked by {', '.join(best.evidence)}{by}"
    if best.evidence:
        return "computation_checked", (
            f"{passed}; computations checked by {', '.join(best.evidence)}, not the plan "
            f"(no program of the round reached the same answer as a prose draft){by}"
        )
    return "unchecked", f"{passed}, but no substantive check applied to the best of them (only format checks){by}"
