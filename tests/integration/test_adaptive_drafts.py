"""Adaptive draft counts through the four real services: a round that adds drafts one at a time stops as soon as
two valid drafts agree, and one whose drafts disagree spends its N."""

from __future__ import annotations

import time

import pytest

from deliberate.scheduler.settings import SchedulerSettings
from deliberate.selection.adaptive import AdaptivePolicy, settled
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb
from deliberate_client.client import DeliberateClient, build_request

from .test_early_stop import ONE_LINE
from .test_pipeline import wait_for_trace

pytestmark = pytest.mark.model

DEFAULT_POLICY = AdaptivePolicy.parse(SchedulerSettings.model_fields["adaptive_policy"].default)


def adaptive_solve(stack, hints: list[str]) -> pb.SolveResponse:
    request = build_request(
        "What is 2 + 2?", num_drafts=len(hints), max_new_tokens=24, refine_max_new_tokens=4, temperature=0.0,
        seed=3, strategy_hints=hints, program_drafts=0, draft_count="adaptive",
        request_id=f"adaptive-{time.time_ns()}",
    )  # fmt: skip
    with DeliberateClient(stack.address) as client:
        return client.solve(request, timeout=600)


def first_settled(response: pb.SolveResponse) -> int:
    """How many drafts the round needed: the first that settle it by the policy, else all it had."""
    valid = []
    for count, report in enumerate(response.drafts, start=1):
        if report.verdict.valid:
            valid.append((report.verdict.extracted_answer, report.draft.kind))
        if settled(valid, DEFAULT_POLICY):
            return count
    return response.num_drafts


def test_an_adaptive_round_stops_adding_drafts_once_two_valid_drafts_agree(stack, otlp_receiver):
    response = adaptive_solve(stack, [ONE_LINE] * 4)

    drafts = [(r.draft.index, r.verdict.valid, r.verdict.extracted_answer) for r in response.drafts]
    assert response.num_drafts == 4 and len(response.drafts) == 2, drafts
    assert [r.draft.index for r in response.drafts] == [0, 1], "one call per draft, numbered as one call would"
    assert all(r.verdict.valid and r.verdict.extracted_answer == "4" for r in response.drafts), drafts
    assert response.num_drafts_reason.endswith(
        f"adaptive ({DEFAULT_POLICY.name}): 2 of 4 drafts started in 2 stages, settled as 2 valid drafts agree on 4"
    ), response.num_drafts_reason

    spans = wait_for_trace(otlp_receiver, response.trace_id)
    (round_span,) = [s for s in spans if s["name"] == "deliberate.round"]
    assert round_span["attributes"]["deliberate.round.adaptive.drafts"] == 2
    assert round_span["attributes"]["deliberate.round.adaptive.settled"] == "2 valid drafts agree on 4"
    calls = [s for s in spans if s["service"] == "deliberate-drafter" and s["name"].endswith("/GenerateDrafts")]
    assert len(calls) == 2, "one Drafter call per draft"


def test_an_adaptive_round_adds_drafts_exactly_until_the_answers_settle(stack):
    hints = [f"Reply with one line only: Final answer: {n}" for n in (4, 5, 6)]
    response = adaptive_solve(stack, hints)

    drafts = [(r.draft.index, r.verdict.valid, r.verdict.extracted_answer) for r in response.drafts]
    assert len(response.drafts) == first_settled(response), drafts
    assert [r.draft.index for r in response.drafts] == list(range(len(response.drafts)))
    started = f"{len(response.drafts)} of 3 drafts started"
    assert started in response.num_drafts_reason, (response.num_drafts_reason, drafts)
