"""Policies: named rankings of one request's candidates over their signals.

A policy says which candidates compete (``valid``: only drafts that passed every hard rule; ``answered``: every
draft that states an answer) and orders them best first, giving each a ``final`` value (what the response
reports as `ScoreComponents.final`). Registering one (`@policy(...)`) makes it a value of the Scheduler's
``--selection-policy``, of `SolveRequest.selection_policy` and a row of every evaluation replay.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from .answers import answer_key
from .learned import shipped
from .signals import Candidate, Table

# The seed's formula: final = α·score + β·agreement + δ·answer_share − γ·latency (a negative weight is a cost).
DEFAULT_WEIGHTS: Mapping[str, float] = {"score": 1.0, "agreement": 0.3, "answer_share": 0.3, "latency": -0.02}
DEFAULT_POLICY = "weighted"

Ranking = list[tuple[Candidate, float]]  # best first, with each candidate's final value
RankFunction = Callable[[Sequence[Candidate], Table, Mapping[str, float]], Ranking]


@dataclass(frozen=True)
class Policy:
    name: str
    competitors: Literal["valid", "answered"]
    rank: RankFunction
    description: str


POLICIES: dict[str, Policy] = {}


def policy(name: str, competitors: Literal["valid", "answered"]) -> Callable[[RankFunction], RankFunction]:
    """Registers a ranking function as the policy `name`; its docstring's first line describes it."""

    def register(function: RankFunction) -> RankFunction:
        if name in POLICIES:
            raise ValueError(f"policy {name!r} is registered twice")
        description = (function.__doc__ or name).strip().splitlines()[0]
        POLICIES[name] = Policy(name, competitors, function, description)
        return function

    return register


def get_policy(name: str) -> Policy:
    """The registered policy `name`; ValueError naming the registered ones otherwise."""
    try:
        return POLICIES[name or DEFAULT_POLICY]
    except KeyError:
        raise ValueError(f"unknown selection policy {name!r}; registered: {', '.join(sorted(POLICIES))}") from None


def weighted_sum(signals: Mapping[str, float], weights: Mapping[str, float]) -> float:
    """Σ weight·signal over the weights' names (a weight naming a signal that was not computed counts 0)."""
    return sum(weight * signals.get(name, 0.0) for name, weight in weights.items())


# --------------------------------------------------------------------------------------------------
# The built-in policies
# --------------------------------------------------------------------------------------------------


@policy("weighted", competitors="valid")
def weighted(candidates: Sequence[Candidate], table: Table, weights: Mapping[str, float]) -> Ranking:
    """The seed's risk-adjusted formula with learned weights.

    final = Σ weight·signal. Drafts with evidence rank before drafts that passed on format alone (a checked answer
    beats an unchecked one whatever their values), and among those the better plan first where a rule pack scores
    plans (the `quality` signal: a feasible plan nearer the optimum wins); equal finals go to the higher answer
    share (when the weights read it), then to the earlier draft.
    """
    finals = {c.draft_id: weighted_sum(table[c.draft_id], weights) for c in candidates}
    reads_share = "answer_share" in weights

    def key(c: Candidate) -> tuple:
        share = table[c.draft_id]["answer_share"] if reads_share else 0.0
        quality = table[c.draft_id].get("quality", 0.0)
        return (not c.evidence, -round(quality, 9), -round(finals[c.draft_id], 9), -share, c.index)

    return [(c, finals[c.draft_id]) for c in sorted(candidates, key=key)]


@policy("best_of", competitors="valid")
def best_of(candidates: Sequence[Candidate], table: Table, weights: Mapping[str, float]) -> Ranking:
    """Best-of-N by the Verifier's score.

    Checked drafts first, the better plan first where a pack scores plans, ties to the earlier draft."""

    def key(c: Candidate) -> tuple:
        return (not c.evidence, -round(table[c.draft_id].get("quality", 0.0), 9), -round(c.score, 9), c.index)

    ordered = sorted(candidates, key=key)
    return [(c, c.score) for c in ordered]


@policy("majority", competitors="answered")
def majority(candidates: Sequence[Candidate], table: Table, weights: Mapping[str, float]) -> Ranking:
    """A plain vote over every draft's answer.

    The answer most drafts reached, valid or not; a tie goes to the answer given first."""
    first_seen: dict[str, int] = {}
    for c in sorted(candidates, key=lambda c: c.index):
        first_seen.setdefault(answer_key(c.answer), c.index)

    def key(c: Candidate) -> tuple:
        return (-round(table[c.draft_id]["vote_share"], 9), first_seen[answer_key(c.answer)], c.index)

    return [(c, table[c.draft_id]["vote_share"]) for c in sorted(candidates, key=key)]


@policy("learned", competitors="valid")
def learned(candidates: Sequence[Candidate], table: Table, weights: Mapping[str, float]) -> Ranking:
    """The weighted ranking with weights fitted on labelled drafts.

    The shipped artefact's weights (selection/learned.py, `make learned-policy`), not the deployment's online ones.
    """
    return weighted(candidates, table, shipped().weights)
