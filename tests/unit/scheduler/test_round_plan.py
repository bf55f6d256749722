"""A request's round plan, resolved once at the Scheduler's edge: the cascade by default with its maximum, shrunk to
the first stage under saturation and to the client's num_drafts; all at once where asked or where drafts are spread
over replicas; and the words the response says about how the round went."""

from __future__ import annotations

import pytest

from deliberate.core.requests import InvalidArgument
from deliberate.scheduler.drafter_load import Decision
from deliberate.scheduler.limits import SOLVE
from deliberate.scheduler.round_options import round_options
from deliberate.scheduler.round_plan import SATURATED, resolve, to_proto
from deliberate.scheduler.settings import SchedulerSettings
from deliberate.scheduler.solve import RoundOutcome
from deliberate.selection.adaptive import PROGRAM, AdaptivePolicy
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb

SETTINGS = SchedulerSettings(cascade_policy="cscscscs/start2/step2/q2+x/greedy", cascade_max_drafts=6)
IDLE = Decision(num_drafts=3, reason="utilization 10% → 3 drafts", utilization=0.1)


def plan_of(request: pb.SolveRequest, decision: Decision = IDLE, spreads: bool = False, programs: int = 1):
    return resolve(request, SETTINGS, decision, programs, "", spreads)


def test_the_default_is_the_cascade_up_to_its_maximum_with_the_policys_programs():
    plan = plan_of(pb.SolveRequest(prompt="q"))
    assert plan.way == "cascade" and plan.staged
    assert plan.policy == AdaptivePolicy.parse("cscscscs/start2/step2/q2+x/greedy")
    assert (plan.max_drafts, plan.programs) == (6, 3), "the first 6 of the order: c s c s c s"
    assert plan.max_reason == "at most 6 drafts (--cascade-max-drafts)"


def test_the_clients_num_drafts_lowers_the_maximum():
    plan = plan_of(pb.SolveRequest(prompt="q", num_drafts=3))
    assert (plan.max_drafts, plan.programs) == (3, 2)
    assert "3 requested by the client" in plan.max_reason


def test_under_saturation_the_escalation_shrinks_to_the_first_stage_first():
    busy = Decision(num_drafts=3, reason="utilization 91% → 3 drafts, saturated", utilization=SATURATED + 0.06)
    plan = plan_of(pb.SolveRequest(prompt="q"), busy)
    assert plan.max_drafts == 2, "the first stage (a program and a prose draft) still runs whole"
    assert plan.max_reason.startswith("first stage only (2 drafts): utilization 91%")


def test_a_request_without_programs_gets_a_cascade_of_prose():
    assert plan_of(pb.SolveRequest(prompt="q", program_drafts=0)).programs == 0
    assert plan_of(pb.SolveRequest(prompt="q"), programs=0).programs == 0, "its data too large for the sandbox"


def test_the_plan_says_whether_the_client_fixed_its_programs_for_the_re_draft_rounds():
    assert plan_of(pb.SolveRequest(prompt="q", program_drafts=0)).programs_fixed
    assert plan_of(pb.SolveRequest(prompt="q", round=pb.RoundOptions(program_drafts=1))).programs_fixed
    assert not plan_of(pb.SolveRequest(prompt="q")).programs_fixed


@pytest.mark.parametrize(
    ("request_", "spreads"),
    [(pb.SolveRequest(prompt="q", draft_count=pb.DRAFT_COUNT_ALL_AT_ONCE), False), (pb.SolveRequest(prompt="q"), True)],
)
def test_all_at_once_where_the_request_asks_or_drafts_are_spread_over_replicas(request_, spreads):
    plan = plan_of(request_, spreads=spreads)
    assert (plan.way, plan.policy, plan.max_drafts, plan.max_reason) == ("all_at_once", None, 3, IDLE.reason)


def test_an_adaptive_request_keeps_the_adaptive_policy_and_the_load_n():
    plan = plan_of(pb.SolveRequest(prompt="q", draft_count=pb.DRAFT_COUNT_ADAPTIVE))
    assert plan.way == "adaptive" and plan.policy.name == SETTINGS.adaptive_policy and plan.max_drafts == 3


def test_the_outcome_says_what_settled_the_round_or_that_nothing_did():
    plan = plan_of(pb.SolveRequest(prompt="q"))
    settled = RoundOutcome(plan, 1, 2, "a valid prose draft and a valid program agree on 72")
    assert settled.stop_reason == "settled: a valid prose draft and a valid program agree on 72"
    assert settled.note == (
        "cascade (cscscscs/start2/step2/q2+x/greedy): 2 of 6 drafts started in 1 stage, settled as a valid prose "
        "draft and a valid program agree on 72"
    )
    spent = RoundOutcome(plan, 3, 6, "")
    assert spent.stop_reason == "not settled: 6 drafts spent" and spent.note.endswith("in 3 stages, not settled")
    late = RoundOutcome(plan, 2, 4, "deadline: 3.0 s left, the last stage took 9.5 s")
    assert late.stop_reason == late.settled_as and "stopped by the deadline: 3.0 s left" in late.note


def test_a_cascades_kinds_follow_its_order_in_stages():
    policy = AdaptivePolicy.parse("cscscscs/start2/step2/q2+x/greedy")
    kinds = policy.kinds_for(6, 3)
    assert policy.stages(kinds) == [[PROGRAM, "prose"], [PROGRAM, "prose"], [PROGRAM, "prose"]]
    assert AdaptivePolicy.parse("csss/start1/step2/q2").stages(["program", "prose", "prose", "prose"]) == [
        ["program"], ["prose", "prose"], ["prose"]
    ]  # fmt: skip


def test_a_decision_cascades_from_one_greedy_decision_program_and_settles_on_a_plan():
    plan = resolve(pb.SolveRequest(prompt="q", output_schema="{}"), SETTINGS, IDLE, 1, "bounded", False)
    assert plan.policy == AdaptivePolicy.parse(SETTINGS.decision_cascade_policy) and plan.decision == "bounded"
    assert plan.policy.stages(plan.policy.kinds_for(plan.max_drafts, plan.programs))[0] == [PROGRAM]


def test_a_free_text_cascade_ranks_by_its_own_policy_unless_the_request_names_one():
    assert plan_of(pb.SolveRequest(prompt="q")).selection == SETTINGS.cascade_selection_policy == "majority"
    assert plan_of(pb.SolveRequest(prompt="q", selection_policy="best_of")).selection == "best_of"
    decision = resolve(pb.SolveRequest(prompt="q", output_schema="{}"), SETTINGS, IDLE, 1, "unbounded", False)
    assert decision.selection == SETTINGS.selection_policy == "weighted", "a decision's plans keep the formula"
    assert plan_of(pb.SolveRequest(prompt="q"), spreads=True).selection == "weighted"


def test_the_grouped_options_win_over_the_flat_fields_which_keep_working():
    flat = pb.SolveRequest(prompt="q", num_drafts=4, program_drafts=1, disable_quorum=True, selection_policy="best_of")
    assert round_options(flat) == pb.RoundOptions(max_drafts=4, program_drafts=1, quorum=0, selection_policy="best_of")
    both = pb.SolveRequest()
    both.CopyFrom(flat)
    both.round.CopyFrom(pb.RoundOptions(max_drafts=2, quorum=2, streaming_verification=False))
    options = round_options(both)
    assert (options.max_drafts, options.program_drafts, options.quorum) == (2, 1, 2), "unset in the group: flat"
    assert options.HasField("streaming_verification") and not options.streaming_verification
    assert options.selection_policy == "best_of"
    nothing = round_options(pb.SolveRequest(prompt="q"))
    assert not any(nothing.HasField(name) for name in ("quorum", "program_drafts", "confidence_stop"))


@pytest.mark.parametrize(
    ("flat", "grouped"),
    [
        ({"disable_default_arithmetic": True}, {"default_arithmetic": False}),
        ({"disable_thinking_trace": True}, {"thinking_trace": False}),
        (
            {"disable_quorum": True, "disable_streaming_verification": True},
            {"quorum": 0, "streaming_verification": False},
        ),
        ({"num_drafts": 3, "program_drafts": 0}, {"max_drafts": 3, "program_drafts": 0}),
        ({"final_text": pb.FINAL_TEXT_REFINE}, {"final_text": pb.FINAL_TEXT_REFINE}),
        ({"draft_count": pb.DRAFT_COUNT_ALL_AT_ONCE}, {"draft_count": pb.DRAFT_COUNT_ALL_AT_ONCE}),
    ],
)
def test_a_flat_field_and_its_grouped_twin_resolve_to_one_plan(flat, grouped):
    by_flat = plan_of(pb.SolveRequest(prompt="q", **flat))
    by_group = plan_of(pb.SolveRequest(prompt="q", round=pb.RoundOptions(**grouped)))
    assert by_flat == by_group != plan_of(pb.SolveRequest(prompt="q"))


def test_the_response_says_every_option_as_resolved():
    plan = resolve(pb.SolveRequest(prompt="q", round=pb.RoundOptions(quorum=0)), SETTINGS, IDLE, 1, "", False)
    said = to_proto(plan, stages=1, drafts_started=2, stop_reason="settled: agree").options
    # Every field is set: the request's where it said one, else the settings'.
    assert all(said.HasField(field.name) for field in said.DESCRIPTOR.fields if field.has_presence)
    assert (said.draft_count, said.max_drafts, said.program_drafts) == (pb.DRAFT_COUNT_CASCADE, 6, 3)
    assert said.quorum == 2, "a cascade stops on its policy's quorum (q2), not on the all-at-once quorum"
    assert said.default_arithmetic and said.thinking_trace and not said.consensus_prefix
    assert said.selection_policy == "majority" and said.final_text == pb.FINAL_TEXT_PASS_THROUGH


def test_the_edge_checks_the_grouped_options_and_names_the_grouped_field():
    settings = SchedulerSettings()
    with pytest.raises(InvalidArgument, match=r"^round\.max_drafts: must be in \[0, 8\], got 9"):
        SOLVE.check(pb.SolveRequest(prompt="q", round=pb.RoundOptions(max_drafts=9)), settings)
    with pytest.raises(
        InvalidArgument, match=r"^round\.program_drafts: must be at most round\.max_drafts \(2\), got 3"
    ):
        SOLVE.check(pb.SolveRequest(prompt="q", round=pb.RoundOptions(max_drafts=2, program_drafts=3)), settings)
    with pytest.raises(InvalidArgument, match=r"^round\.selection_policy: 'coin' is not one of"):
        SOLVE.check(pb.SolveRequest(prompt="q", round=pb.RoundOptions(selection_policy="coin")), settings)
    SOLVE.check(
        pb.SolveRequest(prompt="q", num_drafts=2, round=pb.RoundOptions(max_drafts=4, program_drafts=3)), settings
    )
