"""What the Scheduler adds for a decision: the data its programs read, the mix moved toward programs on a re-draft,
the answer's plan quality and a reference plan only beside an UNVERIFIED answer; the better feasible plan ranks
first."""

from __future__ import annotations

import json
from types import SimpleNamespace

from deliberate.scheduler.decisions import (
    add_plan_quality,
    as_plan,
    decision_data_of,
    first_round_programs,
    shifted_to_programs,
)
from deliberate.scheduler.settings import SchedulerSettings
from deliberate.selection import Candidate, select
from deliberate_api.common.v1 import common_pb2
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb

CATALOG = [{"id": 7, "cost": 100, "ctr": 0.02, "category": "a"}]


def decision(**fields) -> pb.SolveRequest:
    request = pb.SolveRequest(prompt="q", output_schema='{"type": "object"}', **fields)
    return request


def test_a_decision_program_reads_the_context_and_the_packs_data_params():
    request = decision()
    request.context.update({"budget": 500})
    pack = request.constraints.add(rule_pack="ad_selection")
    pack.params.update({"budget": 600, "catalog": CATALOG, "picks": 1, "unknown": 2})
    request.constraints.add(cel_expression="size(plan.selected_ids) == 1")
    # the rule's numbers too (the program counts to `picks`); a param the pack does not declare as data stays out
    assert decision_data_of(request) == {"budget": 500, "catalog": CATALOG, "picks": 1}
    request.context.update({"catalog": []})  # the context's own entry wins
    assert decision_data_of(request)["catalog"] == []


def test_a_decision_a_pack_solves_exactly_gets_more_programs_than_one_it_does_not():
    ads, credit = decision(), decision()
    ads.constraints.add(rule_pack="ad_selection").params.update({"budget": 600, "catalog": CATALOG, "picks": 1})
    credit.constraints.add(rule_pack="credit")
    settings = SchedulerSettings(decision_program_drafts=1, bounded_decision_program_drafts=4)
    assert first_round_programs(ads, 5, settings) == 4  # the ad pack scores plans against its optimum
    assert first_round_programs(ads, 3, settings) == 2  # one draft stays prose
    assert first_round_programs(credit, 5, settings) == 1
    ads.program_drafts = 0
    assert first_round_programs(ads, 5, settings) == 0  # the request's own count wins


def program_verdict(message: str, ran: bool) -> common_pb2.DraftVerdict:
    program = common_pb2.RuleResult(rule_id="program", passed=ran, message=message, hard=True)
    return common_pb2.DraftVerdict(rule_results=[program])


# A failed round whose program printed a plan that broke a rule, and one whose programs never ran to a plan.
PROGRAM_RAN = [program_verdict('program passed: printed {"selected_ids":[1,2]}', ran=True)]
PROGRAMS_FAILED = [program_verdict("program failed: the ```python block opened on line 1 is never closed", ran=False)]


def test_a_failed_decision_round_moves_half_its_prose_drafts_to_programs():
    # 3 prose: 2 of them become programs
    assert shifted_to_programs(decision(), 2, 5, PROGRAM_RAN, programs_fixed=False) == 4
    assert shifted_to_programs(decision(), 4, 5, PROGRAM_RAN, programs_fixed=False) == 5
    assert shifted_to_programs(decision(), 5, 5, PROGRAM_RAN, programs_fixed=False) == 5
    # no program yet: prose failed, programs are tried
    assert shifted_to_programs(decision(), 0, 5, programs_fixed=False) == 3
    assert shifted_to_programs(decision(program_drafts=1), 1, 5, PROGRAM_RAN, programs_fixed=True) == 1  # kept
    # free text: the tuned mix stays
    assert shifted_to_programs(pb.SolveRequest(prompt="q"), 2, 5, PROGRAM_RAN, programs_fixed=False) == 2


def test_a_round_whose_programs_never_ran_to_a_plan_keeps_its_mix():
    assert shifted_to_programs(decision(), 1, 3, PROGRAMS_FAILED, programs_fixed=False) == 1
    assert shifted_to_programs(decision(), 1, 3, [*PROGRAMS_FAILED, *PROGRAM_RAN], programs_fixed=False) == 2


def quality(objective: float, bound: float | None = None) -> common_pb2.PlanQuality:
    q = common_pb2.PlanQuality(name="total ctr", objective=objective, description="d", rule_pack="ad_selection")
    if bound is not None:
        q.bound, q.ratio = bound, objective / bound
    return q


def test_the_reference_plan_stands_only_beside_an_unverified_answer_and_never_replaces_it():
    reference = common_pb2.ReferencePlan(answer='{"selected_ids":[7]}', rule_pack="ad_selection")
    best = common_pb2.DraftVerdict(quality=quality(0.2, 0.25))
    verified = pb.SolveResponse(answer='{"selected_ids":[8]}', status=pb.SOLVE_STATUS_VERIFIED)
    add_plan_quality(verified, best, reference)
    assert not verified.HasField("reference_plan") and verified.quality.ratio == 0.2 / 0.25
    unverified = pb.SolveResponse(answer='{"selected_ids":[1]}', status=pb.SOLVE_STATUS_UNVERIFIED)
    add_plan_quality(unverified, common_pb2.DraftVerdict(), reference)
    assert unverified.reference_plan == reference and unverified.answer == '{"selected_ids":[1]}'
    assert not unverified.HasField("quality")


def test_a_decision_program_reaches_the_refiner_as_its_plan():
    program = common_pb2.Draft(id="d", kind="program", text="```python\nprint(1)\n```")
    verdict = common_pb2.DraftVerdict(extracted_answer='{"selected_ids":[7]}')
    plan = as_plan(SimpleNamespace(draft=program, verdict=verdict), decision())
    assert json.loads(plan.text) == {"selected_ids": [7]} and plan.kind == "prose" and plan.id == "d"
    free = as_plan(SimpleNamespace(draft=program, verdict=verdict), pb.SolveRequest(prompt="q"))
    assert free is program


def test_among_feasible_plans_the_one_nearer_the_optimum_wins():
    def plan(draft_id: str, index: int, ratio: float | None, objective: float, score: float = 1.0) -> Candidate:
        return Candidate(
            draft_id,
            index,
            True,
            score,
            answer=draft_id,
            evidence=("budget_check",),
            objective=objective,
            objective_ratio=ratio,
        )

    worse, better = plan("a", 0, 0.6, 0.15), plan("b", 1, 0.95, 0.24)
    for policy in ("weighted", "best_of"):
        selection = select([worse, better], policy=policy)
        assert selection.selected[0].draft_id == "b", policy
        assert selection.signals["b"]["quality"] == 0.95
    no_bound = select([plan("c", 0, None, 8000.0), plan("d", 1, None, 10000.0)])  # ratio to the best of the request
    assert no_bound.selected[0].draft_id == "d" and no_bound.signals["c"]["quality"] == 0.8
