"""The cascade through the four real services: a first stage of two greedy drafts that agree ends the round, and
drafts that disagree escalate two at a time until the maximum is spent — the plan and the reason it stopped in the
response, on the round's span and in the CLI's words."""

from __future__ import annotations

import time

import pytest

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


def test_disagreeing_drafts_escalate_two_at_a_time_until_the_maximum_is_spent(stack, otlp_receiver):
    hints = [f"Reply with one line only: Final answer: {n}" for n in (4, 5, 6, 7)]
    response = cascade_solve(stack, hints, num_drafts=4)

    drafts = [(r.draft.index, r.verdict.valid, r.verdict.extracted_answer) for r in response.drafts]
    answers = [a for _, valid, a in drafts if valid]
    if len(set(answers)) < len(answers):
        pytest.skip(f"the model wrote agreeing answers despite the hints: {drafts}")
    plan = response.round_plan
    assert (plan.stages, plan.drafts_started) == (2, 4), drafts
    assert plan.stop_reason == "not settled: 4 drafts spent"
    assert [r.draft.index for r in response.drafts] == [0, 1, 2, 3], "numbered as one call would"
    assert (
        "cascade (" in response.num_drafts_reason and "4 of 4 drafts started in 2 stages" in response.num_drafts_reason
    )
    spans = wait_for_trace(otlp_receiver, response.trace_id)
    calls = [s for s in spans if s["service"] == "deliberate-drafter" and s["name"].endswith("/GenerateDrafts")]
    assert len(calls) == 2, "one Drafter call per stage"
