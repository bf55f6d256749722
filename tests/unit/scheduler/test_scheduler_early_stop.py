"""Early stopping's decisions: when a round may end on a quorum, when a draft's confidence stops it, and the
per-request options."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from deliberate.engines.models import confidence_floors
from deliberate.scheduler.round_options import round_options
from deliberate.scheduler.round_plan import stopping_of
from deliberate.scheduler.rounds.stopping_rules import (
    ConfidenceStops,
    cancel_came_too_late,
    decision_reason,
    quorum_reason,
    scored_against_bound,
    stopped_verdict,
)
from deliberate.scheduler.settings import SchedulerSettings
from deliberate.selection.confidence import STOP_MIN_TOKENS, WINDOW_TOKENS, parse_floors
from deliberate_api.common.v1 import common_pb2
from deliberate_api.drafter.v1 import drafter_service_pb2
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb


def stopping(request: pb.SolveRequest, num_drafts: int, **deployment):
    """What stops the round of this request: its options, flat or grouped, read as the plan reads them."""
    return stopping_of(round_options(request), num_drafts, **deployment)


def test_a_quorum_of_agreeing_valid_drafts_ends_the_round():
    reason = quorum_reason(["72", "72.0", "72.00"], generating=2, quorum=3)
    assert reason.startswith("quorum: 3 drafts passed every hard rule and agree on '72'")
    assert quorum_reason(["72", "72", "70"], generating=2, quorum=3) == "", "two agree, two may still disagree"


def test_a_lead_the_drafts_still_generating_cannot_overturn_ends_the_round():
    assert "cannot overturn" in quorum_reason(["72", "72"], generating=1, quorum=3)
    assert quorum_reason(["72", "72", "70"], generating=1, quorum=3) == "", "72 could still be tied"
    assert quorum_reason(["72"], generating=0, quorum=3) == "", "a single vote is no lead over nothing pending"


def test_drafts_without_an_answer_are_no_votes():
    assert quorum_reason(["", ""], generating=0, quorum=1) == ""


def plan_verdict(objective: float, bound: float | None, valid: bool = True) -> common_pb2.DraftVerdict:
    quality = common_pb2.PlanQuality(name="total ctr", objective=objective, description=f"total ctr {objective}")
    if bound is not None:
        quality.bound = bound
    return common_pb2.DraftVerdict(valid=valid, quality=quality)


def test_a_decision_scored_against_a_bound_ends_on_a_plan_at_the_bound_not_on_agreement():
    agreeing = [plan_verdict(0.1546, 0.3426)] * 4  # four prose plans at 0.45 of the optimum (ads-001)
    assert scored_against_bound(agreeing) and decision_reason(scored_against_bound(agreeing)) == ""
    at_bound = scored_against_bound([*agreeing, plan_verdict(0.3426, 0.3426)])
    assert decision_reason(at_bound) == "optimum: a valid plan reaches the bound (total ctr 0.3426)"
    # The optimum's sum in another order differs in the last bits: still at the bound.
    assert decision_reason(scored_against_bound([plan_verdict(0.1 + 0.2 + 0.3, 0.3 + 0.2 + 0.1)]))
    # Invalid plans, and plans with no bound (credit, promotion), are not scored against one: the quorum applies.
    assert scored_against_bound([plan_verdict(0.5, 0.5, valid=False), plan_verdict(0.5, None)]) == []
    default, named = stopping(pb.SolveRequest(), 5), stopping(pb.SolveRequest(quorum=3), 5)
    assert default.default_quorum and not named.default_quorum, "a quorum the request names is kept as asked"
    assert not stopping(pb.SolveRequest(disable_quorum=True), 5).default_quorum


def test_every_behaviour_is_switchable_per_request():
    assert stopping(pb.SolveRequest(), 5) == stopping(pb.SolveRequest(quorum=0), 5)
    default = stopping(pb.SolveRequest(), 5)
    assert (default.streaming, default.quorum, default.replace) == (True, 3, False)
    assert stopping(pb.SolveRequest(quorum=2), 5).quorum == 2
    off = stopping(pb.SolveRequest(disable_streaming_verification=True, disable_quorum=True), 5)
    assert not off.active, "both off: the plain round"
    assert not stopping(pb.SolveRequest(disable_streaming_verification=True, replace_aborted_drafts=True), 5).replace


def test_the_default_quorum_is_never_a_single_draft():
    """With 2 drafts, half rounded up is 1: the first valid draft would cancel the other, agreeing with nobody."""
    assert [stopping(pb.SolveRequest(), n).quorum for n in (1, 2, 3, 4, 5, 8)] == [1, 2, 2, 2, 3, 4]
    assert stopping(pb.SolveRequest(quorum=1), 2).quorum == 1, "asked for explicitly, one draft is enough"


def test_a_straggler_that_ended_before_its_cancel_is_whole():
    """The quorum cancels a draft the Drafter has just finished: its text is complete, so it is verified."""
    stopped = SimpleNamespace(abort=pb.DraftAbort(reason="quorum"))
    failed = SimpleNamespace(abort=pb.DraftAbort(reason="hard_rule"))
    whole = common_pb2.Draft(finish_reason=common_pb2.FINISH_REASON_STOP)
    cut = common_pb2.Draft(finish_reason=common_pb2.FINISH_REASON_ABORTED)
    assert cancel_came_too_late(stopped, whole)
    assert not cancel_came_too_late(stopped, cut)
    assert not cancel_came_too_late(failed, whole), "a hard-rule failure stands however the draft ended"
    assert not cancel_came_too_late(SimpleNamespace(abort=None), whole)
    unsure = SimpleNamespace(abort=pb.DraftAbort(reason="confidence"))
    assert cancel_came_too_late(unsure, whole), "a confidence stop is no verdict on a text that is whole"


def test_a_valid_prose_draft_and_a_valid_program_that_agree_reach_the_cross_modal_quorum():
    assert quorum_reason(["72", "72.0"], generating=3, quorum=3) == "", "two of a quorum of three"
    reason = quorum_reason(["72", "72.0"], generating=3, quorum=3, kinds=["prose", "program"])
    assert "a valid prose draft and a valid program agree on 72" in reason
    assert quorum_reason(["72", "72"], generating=3, quorum=3, kinds=["prose", "prose"]) == "", "one kind only"
    assert quorum_reason(["72", "70"], generating=3, quorum=3, kinds=["prose", "program"]) == "", "they disagree"


def test_the_cross_modal_quorum_joins_the_default_quorum_only():
    assert stopping(pb.SolveRequest(), 5, cross_modal=True).cross_modal
    assert not stopping(pb.SolveRequest(), 5).cross_modal, "the deployment turned it off"
    assert not stopping(pb.SolveRequest(quorum=3), 5, cross_modal=True).cross_modal, "the request named its quorum"
    assert not stopping(pb.SolveRequest(disable_quorum=True), 5, cross_modal=True).cross_modal


FLOORS = {"prose": 5.0, "program": 4.0}


def delta(*confidences: float, floor: float = 0.0) -> drafter_service_pb2.DraftDelta:
    return drafter_service_pb2.DraftDelta(token_confidences=confidences, confidence_floor=floor)


def test_the_confidence_stop_is_the_deployments_unless_the_request_says():
    assert not stopping(pb.SolveRequest(), 5).confidence_stop, "the deployment's default, given here as off"
    assert stopping(pb.SolveRequest(), 5, confidence_stop=True).confidence_stop
    assert stopping(pb.SolveRequest(confidence_stop=True), 5).confidence_stop
    assert not stopping(pb.SolveRequest(confidence_stop=False), 5, confidence_stop=True).confidence_stop
    alone = stopping(pb.SolveRequest(disable_streaming_verification=True, disable_quorum=True), 5, confidence_stop=True)
    assert alone.active, "the confidence stop alone still streams the round"
    assert not SchedulerSettings().confidence_stop, "off by default (the replay on the tuning problems chose so)"


def test_a_draft_is_stopped_once_its_window_falls_below_its_kinds_floor_never_before_the_minimum():
    stops = ConfidenceStops(stopping(pb.SolveRequest(), 5, confidence_stop=True))
    draft = common_pb2.Draft(id="d0", kind="prose")
    for token in range(STOP_MIN_TOKENS - 1):  # hesitant from the start, but not judged yet
        draft.text += "x\n" if token % 10 == 9 else "x"
        draft.usage.completion_tokens += 1
        assert stops.check(draft, delta(1.0, floor=5.0 if token == 0 else 0.0)) is None
    draft.text += "x"
    draft.usage.completion_tokens += 1
    abort = stops.check(draft, delta(1.0))
    assert abort is not None and abort.reason == "confidence", "the floor its first delta offered holds"
    assert f"last {WINDOW_TOKENS} tokens fell to 1.00, below the prose floor 5.00" in abort.message
    assert (abort.at.tokens, abort.at.chars, abort.at.line) == (STOP_MIN_TOKENS, len(draft.text), 4)


def test_the_deployments_floors_override_the_drafters_and_no_floor_never_stops():
    deployment = ConfidenceStops(stopping(pb.SolveRequest(), 5, confidence_stop=True, confidence_floors=FLOORS))
    confident = common_pb2.Draft(id="p", kind="program")
    assert all(deployment.check(confident, delta(6.0, floor=9.0)) is None for _ in range(100)), "4.0 is the floor"
    offered_none = ConfidenceStops(stopping(pb.SolveRequest(), 5, confidence_stop=True))
    unsure = common_pb2.Draft(id="s", kind="prose")
    assert all(offered_none.check(unsure, delta(0.0)) is None for _ in range(100)), "no model floor: never stopped"
    off = ConfidenceStops(stopping(pb.SolveRequest(confidence_stop=False), 5, confidence_stop=True))
    assert all(off.check(unsure, delta(0.0, floor=5.0)) is None for _ in range(100))
    assert deployment.check(common_pb2.Draft(id="q", kind="program"), delta()) is None, "no confidences: no judging"


def test_a_draft_stopped_on_its_confidence_leaves_the_vote_saying_why():
    abort = pb.DraftAbort(reason="confidence", message="token confidence fell to 3.10")
    verdict = stopped_verdict("d0", abort)
    assert not verdict.valid
    assert verdict.rule_results[0].rule_id == "confidence"
    assert verdict.rule_results[0].message == "its token confidence stopped the draft before its end: " + abort.message
    assert stopped_verdict("d1", pb.DraftAbort(reason="quorum")).rule_results[0].rule_id == "quorum"


def test_the_0_5b_models_profile_has_calibrated_floors_and_a_bad_floor_fails_at_start_up():
    assert confidence_floors("qwen2.5-coder-0.5b") == {"prose": 6.351, "program": 6.397}
    assert confidence_floors("embedded") == {}  # the 1.5B model: not calibrated yet, the stop abstains
    assert confidence_floors("smollm2-135m") == {} and confidence_floors("/models/mine.gguf") == {}
    assert SchedulerSettings(confidence_floors="prose=6.4").confidence_floors_of_kind == {"prose": 6.4}
    with pytest.raises(ValueError, match="kind=number"):
        SchedulerSettings(confidence_floors="prose=high")
    with pytest.raises(ValueError, match="kind=number"):
        parse_floors("=6.4")
