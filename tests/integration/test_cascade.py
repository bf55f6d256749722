"""The cascade through the four real services: a first stage of two greedy drafts that agree ends the round, and
drafts that disagree escalate two at a time until the maximum is spent — the plan and the reason it stopped in the
response, on the round's span and in the CLI's words."""

from __future__ import annotations

import time

import pytest

from deliberate.selection.adaptive import AdaptivePolicy, settled
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb
from deliberate_client.cli import round_line
from deliberate_client.client import DeliberateClient, build_request

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


def test_a_first_stage_whose_greedy_drafts_agree_ends_the_cascade(stack, otlp_receiver):
    response = cascade_solve(stack, [ONE_LINE] * 6, num_drafts=6)

    drafts = [(r.draft.index, r.verdict.valid, r.verdict.extracted_answer) for r in response.drafts]
    plan = response.round_plan
    assert (plan.way, plan.stages, plan.drafts_started, plan.max_drafts) == ("cascade", 1, 2, 6), drafts
    assert plan.stop_reason == "settled: 2 valid drafts agree on 4", drafts
    assert plan.policy.endswith("/greedy") and "requested by the client" in plan.max_drafts_reason
    assert [r.draft.index for r in response.drafts] == [0, 1]
    assert round_line(plan).startswith("round   cascade ") and "2 of 6 drafts in 1 stage; settled" in round_line(plan)

    spans = wait_for_trace(otlp_receiver, response.trace_id)
    (round_span,) = [s for s in spans if s["name"] == "deliberate.round"]
    assert round_span["attributes"]["deliberate.round.way"] == "cascade"
    assert round_span["attributes"]["deliberate.round.stop_reason"] == plan.stop_reason
    (request_span,) = [s for s in spans if s["name"].endswith("/Solve") and s["service"] == "deliberate-scheduler"]
    assert request_span["attributes"]["deliberate.round.stop_reason"] == plan.stop_reason
    calls = [s for s in spans if s["service"] == "deliberate-drafter" and s["name"].endswith("/GenerateDrafts")]
    assert len(calls) == 1, "the first stage is one Drafter call"


def test_disagreeing_drafts_escalate_two_at_a_time_until_they_settle_or_the_maximum_is_spent(stack, otlp_receiver):
    hints = [f"Reply with one line only: Final answer: {n}" for n in (4, 5, 6, 7)]
    response = cascade_solve(stack, hints, num_drafts=4)

    first_round = [r for r in response.drafts if r.round == 0]
    drafts = [(r.draft.index, r.verdict.valid, r.verdict.extracted_answer) for r in first_round]
    valid = [(r.verdict.extracted_answer, r.draft.kind) for r in first_round if r.verdict.valid]
    plan, policy = response.round_plan, AdaptivePolicy.parse(response.round_plan.policy)
    assert [r.draft.index for r in first_round] == list(range(len(first_round))), "numbered as one call would"
    assert plan.drafts_started == len(first_round) and plan.stages == (len(first_round) + 1) // 2, drafts
    # Each stage's end was judged by the rule: every stage but the last unsettled, the last settled or the maximum.
    for stage in range(1, plan.stages):
        earlier = [(r.verdict.extracted_answer, r.draft.kind) for r in first_round[: 2 * stage] if r.verdict.valid]
        assert not settled(earlier, policy), (stage, drafts)
    reason = settled(valid, policy)
    assert plan.stop_reason == (f"settled: {reason}" if reason else "not settled: 4 drafts spent"), drafts
    assert f"{plan.drafts_started} of 4 drafts started in {plan.stages} stage" in response.num_drafts_reason
    spans = wait_for_trace(otlp_receiver, response.trace_id)
    calls = [s for s in spans if s["service"] == "deliberate-drafter" and s["name"].endswith("/GenerateDrafts")]
    if response.rounds == 1:
        assert len(calls) == plan.stages, "one Drafter call per stage"
