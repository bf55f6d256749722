"""The rules of early stopping, as pure functions (docs/scheduler.md, "Early stopping"): what a request turned on
(`options_of`), when a quorum ends the round (`quorum_reason`), and the verdict of a draft stopped on one. The round
that applies them is `early_stop.EarlyStopRound`; `bench/early_stop_bound.py` replays them on recorded drafts."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from deliberate_api.common.v1 import common_pb2
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb

from ..selection import answer_key
from ..selection.adaptive import cross_modal_agreement
from .solve import DraftState


@dataclass(frozen=True)
class Options:
    streaming: bool  # verify while drafting; abort a draft at its first failed hard rule
    quorum: int  # agreeing valid drafts that end the round; 0: wait for every draft
    replace: bool  # start a replacement for an aborted draft
    cross_modal: bool = False  # a valid prose draft and a valid program agreeing end the round too

    @property
    def active(self) -> bool:
        return self.streaming or self.quorum > 0


def default_quorum(num_drafts: int) -> int:
    """Half the round's drafts, rounded up, and at least two: one draft alone agrees with nobody."""
    return min(num_drafts, max(2, math.ceil(num_drafts / 2)))


def options_of(request: pb.SolveRequest, num_drafts: int, cross_modal: bool = False) -> Options:
    """`cross_modal` (the deployment's --cross-modal-quorum) joins the default quorum only: a request that names
    its quorum gets exactly that many agreeing drafts."""
    quorum = 0 if request.disable_quorum else (request.quorum or default_quorum(num_drafts))
    streaming = not request.disable_streaming_verification
    return Options(
        streaming=streaming,
        quorum=quorum,
        replace=streaming and request.replace_aborted_drafts,
        cross_modal=cross_modal and quorum > 0 and not request.quorum,
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


def quorum_cancel_came_too_late(state: DraftState, draft: common_pb2.Draft) -> bool:
    """A straggler's cancel raced with its end and lost: the Drafter finished it whole."""
    stopped_on_quorum = state.abort is not None and state.abort.reason == "quorum"
    return stopped_on_quorum and draft.finish_reason != common_pb2.FINISH_REASON_ABORTED


def stopped_verdict(draft_id: str, abort: pb.DraftAbort) -> common_pb2.DraftVerdict:
    """The verdict of a draft stopped on a quorum before it was verified: not valid, never selected."""
    message = f"quorum stopped the draft before its end: {abort.message}"
    return common_pb2.DraftVerdict(
        draft_id=draft_id,
        valid=False,
        rule_results=[common_pb2.RuleResult(rule_id="quorum", passed=False, message=message, hard=True)],
    )
