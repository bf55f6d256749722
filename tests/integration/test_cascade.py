"""The cascade through the four real services: a first stage of two greedy drafts that agree ends the round, and
drafts that disagree escalate two at a time until the maximum is spent — the plan and the reason it stopped in the
response, on the round's span and in the CLI's words."""

from __future__ import annotations

import time

import pytest
from google.protobuf import json_format

from deliberate.selection.adaptive import AdaptivePolicy, settled
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb
from deliberate_client.client import DeliberateClient, build_request
from deliberate_client.progress import round_line

from .test_early_stop import ONE_LINE
from .test_pipeline import wait_for_trace

pytestmark = pytest.mark.model


def cascade_solve(stack, hints: list[str], num_drafts: int) -> pb.SolveResponse:
    request = build_request(
        "What is 2 + 2?", num_drafts=num_drafts, max_new_tokens=24, refine_max_new_tokens=4, temperature=0.7,
        seed=3, strategy_hints=hints, program_drafts=0, draft_count="cascade", request_id=f"cascade-{time.time_ns()}",
    )  # fmt: skip
    with DeliberateClient(stack.address) as client:
        return client.solve(request, timeout=600)


def follows_the_rule(response: pb.SolveResponse, step: int = 2) -> list[tuple]:
    """Checks that the cascade stopped exactly where its rule says — every stage before the last unsettled, the last
    settled or the maximum spent — with its drafts numbered as one call would; returns the drafts as (index, valid,
    answer) for messages. Drafts of one stage arrive in the order they finish: a stage is its indexes."""
    first_round = sorted((r for r in response.drafts if r.round == 0), key=lambda r: r.draft.index)
    drafts = [(r.draft.index, r.verdict.valid, r.verdict.extracted_answer) for r in first_round]
    plan, policy = response.round_plan, AdaptivePolicy.parse(response.round_plan.policy)
    assert [r.draft.index for r in first_round] == list(range(len(first_round))), drafts
    assert plan.drafts_started == len(first_round) and plan.stages == (len(first_round) + step - 1) // step, drafts

    def settled_by(count: int) -> str:
        return settled([(r.verdict.extracted_answer, r.draft.kind) for r in first_round[:count] if r.verdict.valid],
                       policy)  # fmt: skip

    for stage in range(1, plan.stages):
        assert not settled_by(step * stage), (stage, drafts)
    reason = settled_by(len(first_round))
    spent = f"not settled: {plan.max_drafts} drafts spent"
    assert plan.stop_reason == (f"settled: {reason}" if reason else spent), drafts
    assert reason or plan.drafts_started == plan.max_drafts, drafts
    return drafts


def test_a_first_stage_whose_greedy_drafts_agree_ends_the_cascade(stack, otlp_receiver):
    response = cascade_solve(stack, [ONE_LINE] * 6, num_drafts=6)

    drafts = follows_the_rule(response)
    plan = response.round_plan
    assert plan.way == "cascade" and plan.max_drafts == 6 and "requested by the client" in plan.max_drafts_reason
    assert plan.policy.endswith("/greedy")
    first_stage = [d for d in drafts if d[0] < 2]
    if all(valid for _, valid, _ in first_stage) and first_stage[0][2] == first_stage[1][2] == "4":
        assert (plan.stages, plan.drafts_started) == (1, 2), drafts
        assert plan.stop_reason == "settled: 2 valid drafts agree on 4"
    assert round_line(plan).startswith("round   cascade ") and f"{plan.drafts_started} of 6 drafts" in round_line(plan)

    spans = wait_for_trace(otlp_receiver, response.trace_id)
    (round_span,) = [s for s in spans if s["name"] == "deliberate.round" and s["attributes"]["deliberate.round"] == 0]
    assert round_span["attributes"]["deliberate.round.way"] == "cascade"
    assert round_span["attributes"]["deliberate.round.stop_reason"] == plan.stop_reason
    (request_span,) = [s for s in spans if s["name"].endswith("/Solve") and s["service"] == "deliberate-scheduler"]
    assert request_span["attributes"]["deliberate.round.stop_reason"] == plan.stop_reason
    said = json_format.Parse(request_span["attributes"]["deliberate.round.plan"], pb.RoundPlan())
    assert said == plan and said.options.max_drafts == 6 and said.options.draft_count == pb.DRAFT_COUNT_CASCADE
    calls = [s for s in spans if s["service"] == "deliberate-drafter" and s["name"].endswith("/GenerateDrafts")]
    if response.rounds == 1:
        assert len(calls) == plan.stages, "one Drafter call per stage"


def test_disagreeing_drafts_escalate_two_at_a_time_until_they_settle_or_the_maximum_is_spent(stack, otlp_receiver):
    hints = [f"Reply with one line only: Final answer: {n}" for n in (4, 5, 6, 7)]
    response = cascade_solve(stack, hints, num_drafts=4)

    follows_the_rule(response)
    plan = response.round_plan
    assert f"{plan.drafts_started} of 4 drafts started in {plan.stages} stage" in response.num_drafts_reason
    spans = wait_for_trace(otlp_receiver, response.trace_id)
    calls = [s for s in spans if s["service"] == "deliberate-drafter" and s["name"].endswith("/GenerateDrafts")]
    if response.rounds == 1:
        assert len(calls) == plan.stages, "one Drafter call per stage"
