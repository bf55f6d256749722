"""A request's round plan, resolved once at the Scheduler's edge: the cascade by default with its maximum, shrunk to
the first stage under saturation and to the client's num_drafts; all at once where asked or where drafts are spread
over replicas; and the words the response says about how the round went."""

from __future__ import annotations

import pytest

from deliberate.scheduler.drafter_load import Decision
from deliberate.scheduler.round_plan import SATURATED, resolve
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
