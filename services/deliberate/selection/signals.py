"""Signals: named numbers per draft that policies rank by.

A signal is a function of one request's candidates that gives every candidate a number; registering it
(`@signal("name")`) is all it takes for the Scheduler's response (`ScoreComponents.signals`), its draft spans,
the evaluation's records and its replay to carry it, and for the `weighted` policy to weigh it when a weight
of that name is set. Signals see every candidate of the request (valid or not), so they can compare drafts.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from .answers import answer_key
from .confidence import ConfidenceSummary


@dataclass(frozen=True)
class Candidate:
    """One verdicted draft, as selection sees it."""

    draft_id: str
    index: int  # the draft's place in the request (earlier rounds first); ties go to the lower
    valid: bool  # passed every hard rule
    score: float  # the Verifier's score, in [0, 1]
    latency: float = 0.0  # verification latency / verification timeout, clamped to [0, 1]
    answer: str = ""  # the final answer the Verifier extracted
    evidence: tuple[str, ...] = ()  # the substantive checks the draft passed (DraftVerdict.evidence)
    text: str = ""
    completion_tokens: int = 0
    finish_reason: str = ""  # STOP, LENGTH, … (the Drafter's FinishReason name without its prefix)
    kind: str = "prose"  # "prose" or "program" (Draft.kind): two kinds that agree are rarely wrong together
    confidence: ConfidenceSummary | None = None  # None where the engine reported no token probabilities
    # The plan's objective and its ratio to the best possible, where a rule pack scores plans (PlanQuality).
    objective: float | None = None
    objective_ratio: float | None = None


SignalFunction = Callable[[Sequence[Candidate]], list[float]]
SIGNALS: dict[str, SignalFunction] = {}
Table = dict[str, dict[str, float]]  # draft id → signal name → value


def signal(name: str) -> Callable[[SignalFunction], SignalFunction]:
    """Registers a signal under `name` (a plain identifier: it becomes a map key in the contract and a span
    attribute)."""
    if not name.isidentifier():
        raise ValueError(f"a signal name must be an identifier, not {name!r}")

    def register(function: SignalFunction) -> SignalFunction:
        if name in SIGNALS:
            raise ValueError(f"signal {name!r} is registered twice")
        SIGNALS[name] = function
        return function

    return register


def compute(candidates: Sequence[Candidate], overrides: Mapping[str, Mapping[str, float]] | None = None) -> Table:
    """Every registered signal for every candidate. `overrides` (draft id → name → value) replaces computed
    values — a replay uses it to rank with what a Scheduler reported at the time."""
    table: Table = {c.draft_id: {} for c in candidates}
    for name, function in SIGNALS.items():
        values = function(candidates)
        for candidate, value in zip(candidates, values, strict=True):
            table[candidate.draft_id][name] = float(value)
    for draft_id, values in (overrides or {}).items():
        table[draft_id].update(values)
    return table


# --------------------------------------------------------------------------------------------------
# The built-in signals
# --------------------------------------------------------------------------------------------------


@signal("score")
def verifier_score(candidates: Sequence[Candidate]) -> list[float]:
    """The Verifier's score."""
    return [c.score for c in candidates]


@signal("agreement")
def score_agreement(candidates: Sequence[Candidate]) -> list[float]:
    """1 − the population stddev of the request's scores (the seed's β term); one value per request, so it
    never reorders one request's drafts."""
    scores = [c.score for c in candidates]
    value = 1.0 - (statistics.pstdev(scores) if len(scores) > 1 else 0.0)
    return [value] * len(candidates)


@signal("latency")
def verification_latency(candidates: Sequence[Candidate]) -> list[float]:
    """Verification latency over the verification timeout, in [0, 1]."""
    return [c.latency for c in candidates]


@signal("answer_share")
def answer_share(candidates: Sequence[Candidate]) -> list[float]:
    """Share of the valid drafts that reached this draft's answer (self-consistency among checked drafts);
    0 for an invalid draft or one without an answer."""
    valid = [c for c in candidates if c.valid]
    counts = Counter(answer_key(c.answer) for c in valid)
    counts.pop("", None)
    return [counts[answer_key(c.answer)] / len(valid) if c.valid and answer_key(c.answer) else 0.0 for c in candidates]


@signal("vote_share")
def vote_share(candidates: Sequence[Candidate]) -> list[float]:
    """Share of all drafts, valid or not, that reached this draft's answer (a plain vote); 0 without an answer."""
    keys = [answer_key(c.answer) for c in candidates]
    counts = Counter(key for key in keys if key)
    return [counts[key] / len(candidates) if key else 0.0 for key in keys]


@signal("evidence")
def has_evidence(candidates: Sequence[Candidate]) -> list[float]:
    """1 when a substantive check ran and passed on the draft (it earns `verified`), else 0."""
    return [1.0 if c.evidence else 0.0 for c in candidates]


@signal("kind_share")
def kind_share(candidates: Sequence[Candidate]) -> list[float]:
    """Share of the valid drafts of this draft's kind that reached its answer (self-consistency within a kind);
    0 for an invalid draft or one without an answer."""
    values = []
    for c in candidates:
        same_kind = [other for other in candidates if other.valid and other.kind == c.kind]
        key = answer_key(c.answer)
        agreeing = sum(answer_key(other.answer) == key for other in same_kind)
        values.append(agreeing / len(same_kind) if c.valid and key else 0.0)
    return values


@signal("cross_check")
def cross_check(candidates: Sequence[Candidate]) -> list[float]:
    """1 when a valid draft of another kind (a program for prose, prose for a program) reached this valid draft's
    answer: two different kinds of solution agreeing is a check of the plan, not of the arithmetic."""
    answers_by_kind: dict[str, set[str]] = {}
    for c in candidates:
        if c.valid and answer_key(c.answer):
            answers_by_kind.setdefault(c.kind, set()).add(answer_key(c.answer))
    return [
        1.0
        if c.valid
        and answer_key(c.answer)
        and any(answer_key(c.answer) in answers for kind, answers in answers_by_kind.items() if kind != c.kind)
        else 0.0
        for c in candidates
    ]


@signal("quality")
def plan_quality(candidates: Sequence[Candidate]) -> list[float]:
    """How good a valid draft's plan is, in [0, 1]: its objective over the best possible (a rule pack's exact
    optimum), else over the best objective among the request's valid drafts; 0 where no pack scores plans."""
    scored = [c.objective for c in candidates if c.valid and c.objective is not None]
    best = max(scored, default=0.0)
    values = []
    for c in candidates:
        if not c.valid or c.objective is None:
            values.append(0.0)
        elif c.objective_ratio is not None:
            values.append(c.objective_ratio)
        else:
            values.append(c.objective / best if best > 0 else 1.0)
    return values


@signal("cut_off")
def cut_off(candidates: Sequence[Candidate]) -> list[float]:
    """1 when the draft stopped at its token budget (finish reason LENGTH): its last line may not be its answer."""
    return [1.0 if c.finish_reason == "LENGTH" else 0.0 for c in candidates]


@signal("length")
def relative_length(candidates: Sequence[Candidate]) -> list[float]:
    """The draft's tokens over the longest draft's of the request, in [0, 1]."""
    longest = max((c.completion_tokens for c in candidates), default=0)
    return [c.completion_tokens / longest if longest else 0.0 for c in candidates]


@signal("program")
def program_ran(candidates: Sequence[Candidate]) -> list[float]:
    """1 when the draft is a program that ran in the sandbox and printed its answer (the `program` check passed)."""
    return [1.0 if "program" in c.evidence else 0.0 for c in candidates]


def _confidence_signal(name: str, read: Callable[[ConfidenceSummary], float | None], doc: str) -> None:
    def values(candidates: Sequence[Candidate]) -> list[float]:
        return [float(read(c.confidence) or 0.0) if c.confidence is not None else 0.0 for c in candidates]

    values.__doc__ = doc
    signal(name)(values)


_confidence_signal(
    "confidence", lambda c: c.min_window, "The lowest window of token confidence (selection/confidence.py); 0 without."
)
_confidence_signal("tail_confidence", lambda c: c.last_window, "The last window of token confidence; 0 without.")
_confidence_signal("answer_confidence", lambda c: c.answer, "Token confidence over the draft's final line; 0 without.")
_confidence_signal("mean_logprob", lambda c: c.mean_logprob, "Mean log-probability of the sampled tokens; 0 without.")
