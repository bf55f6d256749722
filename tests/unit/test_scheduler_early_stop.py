"""Early stopping's decisions: when a round may end on a quorum, and the per-request options."""

from __future__ import annotations

from types import SimpleNamespace

from deliberate.scheduler.early_stop_rules import options_of, quorum_cancel_came_too_late, quorum_reason
from deliberate_api.common.v1 import common_pb2
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb


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


def test_every_behaviour_is_switchable_per_request():
    assert options_of(pb.SolveRequest(), 5) == options_of(pb.SolveRequest(quorum=0), 5)
    default = options_of(pb.SolveRequest(), 5)
    assert (default.streaming, default.quorum, default.replace) == (True, 3, False)
    assert options_of(pb.SolveRequest(quorum=2), 5).quorum == 2
    off = options_of(pb.SolveRequest(disable_streaming_verification=True, disable_quorum=True), 5)
    assert not off.active, "both off: the plain round"
    assert not options_of(pb.SolveRequest(disable_streaming_verification=True, replace_aborted_drafts=True), 5).replace


def test_the_default_quorum_is_never_a_single_draft():
    """With 2 drafts, half rounded up is 1: the first valid draft would cancel the other, agreeing with nobody."""
    assert [options_of(pb.SolveRequest(), n).quorum for n in (1, 2, 3, 4, 5, 8)] == [1, 2, 2, 2, 3, 4]
    assert options_of(pb.SolveRequest(quorum=1), 2).quorum == 1, "asked for explicitly, one draft is enough"


def test_a_straggler_that_ended_before_its_cancel_is_whole():
    """The quorum cancels a draft the Drafter has just finished: its text is complete, so it is verified."""
    stopped = SimpleNamespace(abort=pb.DraftAbort(reason="quorum"))
    failed = SimpleNamespace(abort=pb.DraftAbort(reason="hard_rule"))
    whole = common_pb2.Draft(finish_reason=common_pb2.FINISH_REASON_STOP)
    cut = common_pb2.Draft(finish_reason=common_pb2.FINISH_REASON_ABORTED)
    assert quorum_cancel_came_too_late(stopped, whole)
    assert not quorum_cancel_came_too_late(stopped, cut)
    assert not quorum_cancel_came_too_late(failed, whole), "a hard-rule failure stands however the draft ended"
    assert not quorum_cancel_came_too_late(SimpleNamespace(abort=None), whole)


def test_a_valid_prose_draft_and_a_valid_program_that_agree_reach_the_cross_modal_quorum():
    assert quorum_reason(["72", "72.0"], generating=3, quorum=3) == "", "two of a quorum of three"
    reason = quorum_reason(["72", "72.0"], generating=3, quorum=3, kinds=["prose", "program"])
    assert "a valid prose draft and a valid program agree on 72" in reason
    assert quorum_reason(["72", "72"], generating=3, quorum=3, kinds=["prose", "prose"]) == "", "one kind only"
    assert quorum_reason(["72", "70"], generating=3, quorum=3, kinds=["prose", "program"]) == "", "they disagree"


def test_the_cross_modal_quorum_joins_the_default_quorum_only():
    assert options_of(pb.SolveRequest(), 5, cross_modal=True).cross_modal
    assert not options_of(pb.SolveRequest(), 5).cross_modal, "the deployment turned it off"
    assert not options_of(pb.SolveRequest(quorum=3), 5, cross_modal=True).cross_modal, "the request named its quorum"
    assert not options_of(pb.SolveRequest(disable_quorum=True), 5, cross_modal=True).cross_modal
