"""The rules of early stopping, as pure functions (docs/scheduler.md, "Early stopping"): when a quorum ends the round
(`quorum_reason`), and the verdict of a draft stopped on one or on its confidence; what a request turned on is its
plan's (`round_plan.Stopping`). The round that applies them is `streamed.StreamedRound`; the lab's early-stop bound
(`deliberate_bench.replays.early_stop_bound`) replays them on recorded drafts."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from deliberate_api.common.v1 import common_pb2
from deliberate_api.drafter.v1 import drafter_service_pb2
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb

from ...selection import answer_key
from ...selection.adaptive import cross_modal_agreement
from ...selection.confidence import WINDOW_TOKENS, ConfidenceWatch
from ..round_plan import Stopping
from ..solve import DraftState


def quorum_reason(valid_answers: list[str], generating: int, quorum: int, kinds: Sequence[str] = ()) -> str:
    """Why the round may end now ("" when it may not): `quorum` valid drafts agree, or the leading answer's
    votes exceed the runner-up's and the `generating` drafts' together, so no outcome of theirs changes it; given
    the valid drafts' `kinds` (the cross-modal quorum), also a valid prose draft and a valid program that agree."""
    if kinds and (agreement := cross_modal_agreement(zip(valid_answers, kinds, strict=True))):
        return f"quorum: {agreement}"
    counts = Counter(answer_key(answer) for answer in valid_answers if answer)
    if not counts:
        return ""
    ranked = counts.most_common(2)
    (answer, votes), second = ranked[0], (ranked[1][1] if len(ranked) > 1 else 0)
    if votes >= quorum:
        return f"quorum: {votes} drafts passed every hard rule and agree on {answer!r} (quorum {quorum})"
    if generating and votes > second + generating:
        return f"quorum: {votes} drafts agree on {answer!r}; the {generating} still generating cannot overturn it"
    return ""


# A plan whose objective is within this share of its bound is at the bound (the objective and the bound are sums
# of the same floats, added in other orders).
AT_BOUND = 1 - 1e-9


def scored_against_bound(verdicts: Sequence[common_pb2.DraftVerdict]) -> list[common_pb2.PlanQuality]:
    """The qualities of the valid plans that a rule pack scored against a bound (the ad pack's exact optimum)."""
    return [v.quality for v in verdicts if v.valid and v.HasField("quality") and v.quality.HasField("bound")]


def decision_reason(qualities: Sequence[common_pb2.PlanQuality]) -> str:
    """Why a round whose plans are scored against a bound may end now ("" when it may not): a valid plan reaches the
    bound, so no draft still generating can beat it. Agreement is no such reason: the plans small models agree on
    are the popular ones, not the best (recorded: four prose drafts agreeing on a plan at 0.45 of the optimum
    stopped the program that computes the optimum, ads-pipeline-solver)."""
    best = max(qualities, key=lambda q: q.objective, default=None)
    if best is None or best.objective < best.bound * AT_BOUND:
        return ""
    return f"optimum: a valid plan reaches the bound ({best.description or best.name})"


# Stops that are not a verdict on the draft's text: a draft that finished whole before its cancel arrived is
# verified like any other.
STOPS_WITHOUT_VERDICT = ("quorum", "confidence")


def cancel_came_too_late(state: DraftState, draft: common_pb2.Draft) -> bool:
    """A draft's cancel on a quorum or on its confidence raced with its end and lost: the Drafter finished it
    whole."""
    stopped = state.abort is not None and state.abort.reason in STOPS_WITHOUT_VERDICT
    return stopped and draft.finish_reason != common_pb2.FINISH_REASON_ABORTED


def stopped_verdict(draft_id: str, abort: pb.DraftAbort) -> common_pb2.DraftVerdict:
    """The verdict of a draft stopped on a quorum or on its confidence before it was verified: not valid, never
    selected."""
    stopper = "quorum" if abort.reason == "quorum" else "its token confidence"
    message = f"{stopper} stopped the draft before its end: {abort.message}"
    return common_pb2.DraftVerdict(
        draft_id=draft_id,
        valid=False,
        rule_results=[common_pb2.RuleResult(rule_id=abort.reason, passed=False, message=message, hard=True)],
    )


class ConfidenceStops:
    """The confidence stop of a round's drafts: one watch per draft, fed the token confidences of its deltas, with
    the floor of its kind that the deployment sets or, where it sets none, the Drafter sent with its first delta."""

    def __init__(self, options: Stopping):
        self.on, self.floors = options.confidence_stop, options.confidence_floors
        self.offered: dict[str, float] = {}  # draft id → the floor its first delta offered (0: none)
        self.watches: dict[str, ConfidenceWatch] = {}

    def check(self, draft: common_pb2.Draft, delta: drafter_service_pb2.DraftDelta) -> pb.DraftAbort | None:
        """The abort of a draft whose window fell below its kind's floor with this delta (the draft's text and
        tokens so far, the delta's included, are where), or None."""
        if not self.on:
            return None
        offered = self.offered.setdefault(draft.id, delta.confidence_floor)
        floor = self.floors.get(draft.kind or "prose") if self.floors else (offered or None)
        if floor is None or not delta.token_confidences:
            return None
        watch = self.watches.setdefault(draft.id, ConfidenceWatch(floor))
        if not any(watch.add(value) for value in delta.token_confidences):
            return None
        message = (
            f"token confidence over the last {WINDOW_TOKENS} tokens fell to {watch.mean:.2f}, below the "
            f"{draft.kind or 'prose'} floor {floor:.2f}"
        )
        at = common_pb2.DraftPosition(
            chars=len(draft.text), tokens=draft.usage.completion_tokens, line=draft.text.count("\n") + 1
        )
        return pb.DraftAbort(reason="confidence", message=message, at=at)
