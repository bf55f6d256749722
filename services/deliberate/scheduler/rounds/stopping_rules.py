"""The rules of early stopping, as pure functions (docs/scheduler.md, "Early stopping"): what a request turned on
(`options_of`), when a quorum ends the round (`quorum_reason`), and the verdict of a draft stopped on one or on its
confidence. The round that applies them is `streamed.StreamedRound`; the lab's early-stop bound
(`deliberate_bench.replays.early_stop_bound`) replays them on recorded drafts."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from deliberate_api.common.v1 import common_pb2
from deliberate_api.drafter.v1 import drafter_service_pb2
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb

from ...selection import answer_key
from ...selection.adaptive import cross_modal_agreement
from ...selection.confidence import WINDOW_TOKENS, ConfidenceWatch
from ..solve import DraftState


@dataclass(frozen=True)
class Options:
    streaming: bool  # verify while drafting; abort a draft at its first failed hard rule
    quorum: int  # agreeing valid drafts that end the round; 0: wait for every draft
    replace: bool  # start a replacement for an aborted draft
    # The quorum is the default one (the request named none): a decision whose plans are scored against a bound then
    # ends on a plan at the bound rather than on agreement (`decision_reason`).
    default_quorum: bool = False
    cross_modal: bool = False  # a valid prose draft and a valid program agreeing end the round too
    confidence_stop: bool = False  # stop a draft whose token confidence falls below its kind's floor
    # The deployment's floors per kind (--confidence-floors); empty: those the Drafter sends, its model's.
    confidence_floors: Mapping[str, float] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return self.streaming or self.quorum > 0 or self.confidence_stop


def default_quorum(num_drafts: int) -> int:
    """Half the round's drafts, rounded up, and at least two: one draft alone agrees with nobody."""
    return min(num_drafts, max(2, math.ceil(num_drafts / 2)))


def options_of(
    request: pb.SolveRequest,
    num_drafts: int,
    cross_modal: bool = False,
    confidence_stop: bool = False,
    confidence_floors: Mapping[str, float] | None = None,
) -> Options:
    """`cross_modal` (the deployment's --cross-modal-quorum) joins the default quorum only: a request that names
    its quorum gets exactly that many agreeing drafts. `confidence_stop` (the deployment's --confidence-stop) holds
    where the request does not say; `confidence_floors` are the deployment's (--confidence-floors)."""
    if request.HasField("confidence_stop"):
        confidence_stop = request.confidence_stop
    quorum = 0 if request.disable_quorum else (request.quorum or default_quorum(num_drafts))
    streaming = not request.disable_streaming_verification
    quorum_by_default = quorum > 0 and not request.quorum
    return Options(
        streaming=streaming,
        quorum=quorum,
        replace=streaming and request.replace_aborted_drafts,
        cross_modal=cross_modal and quorum_by_default,
        default_quorum=quorum_by_default,
        confidence_stop=confidence_stop,
        confidence_floors=dict(confidence_floors or {}),
    )


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

    def __init__(self, options: Options):
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
