"""Early stopping through the four real services: a draft aborted at the line where its arithmetic went wrong,
and a quorum that starts refinement and cancels the two drafts still generating, with the spans to prove both.

SmolLM2 answers a one-line strategy in a few tokens while the others still run, which makes the stragglers
certain."""

from __future__ import annotations

import time

import pytest

from deliberate.verifier.arithmetic import check_arithmetic
from deliberate_api.common.v1 import common_pb2
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb
from deliberate_client.client import DeliberateClient, build_request

from .test_pipeline import wait_for_trace

pytestmark = pytest.mark.model

BUDGET = 160
ONE_LINE = "Reply with one line only: Final answer: 4"
LONG = "First write a long poem about the sea, at least twenty lines, then answer."


def spans_by_draft(otlp_receiver, trace_id: str, name: str) -> dict[str, dict]:
    spans = wait_for_trace(otlp_receiver, trace_id)
    return {s["attributes"]["deliberate.draft.id"]: s for s in spans if s["name"] == name}


def test_a_draft_is_aborted_at_the_line_where_its_arithmetic_went_wrong(stack, otlp_receiver):
    request = build_request(
        "Copy this line exactly as your first line: 48 * 2 = 92\nThen explain how many clips Natalia sold.",
        num_drafts=1, max_new_tokens=BUDGET, refine_max_new_tokens=4, temperature=0.0, seed=3,
        request_id=f"abort-{time.time_ns()}",
    )  # fmt: skip
    with DeliberateClient(stack.address) as client:
        response = client.solve(request, timeout=600)

    aborted = [r for r in response.drafts if r.aborted.reason == "hard_rule"]
    assert aborted, f"no draft was aborted: {[r.draft.text for r in response.drafts]}"
    report = aborted[0]
    at = report.aborted.at
    assert report.aborted.rule_id == "arithmetic" and "48 * 2 = 92 (actually 96)" in report.aborted.message
    # The draft stopped right after the wrong line: that line is the last complete one it was judged on.
    judged = report.draft.text[: at.chars]
    wrong_line = judged.rstrip("\n").rsplit("\n", 1)[-1]
    assert check_arithmetic(wrong_line).wrong, f"line {at.line} is the wrong one: {wrong_line!r}"
    assert judged.count("\n") == at.line and not check_arithmetic(judged[: -len(wrong_line) - 1]).wrong
    assert report.draft.finish_reason == common_pb2.FINISH_REASON_ABORTED
    assert at.tokens <= report.draft.usage.completion_tokens < BUDGET, "stopped long before its budget"
    assert not report.verdict.valid and report.verdict.rule_results[0].failed_at == at
    assert response.early_stop.aborted >= 1

    lifecycle = spans_by_draft(otlp_receiver, response.trace_id, "deliberate.draft")[report.draft.id]
    attributes = lifecycle["attributes"]
    assert attributes["deliberate.draft.outcome"] == "aborted"
    assert attributes["deliberate.draft.abort.reason"] == "hard_rule"
    assert attributes["deliberate.draft.abort.rule"] == "arithmetic"
    assert attributes["deliberate.draft.abort.line"] == at.line
    assert attributes["deliberate.draft.abort.chars"] == at.chars
    verified = spans_by_draft(otlp_receiver, response.trace_id, "verifier.verify_draft")[report.draft.id]
    assert verified["attributes"]["deliberate.draft.abort.tokens"] == at.tokens
    generated = spans_by_draft(otlp_receiver, response.trace_id, "drafter.draft")[report.draft.id]
    assert generated["attributes"]["deliberate.draft.finish_reason"] == "FINISH_REASON_ABORTED"


def test_a_quorum_starts_refinement_and_cancels_the_two_stragglers(stack, otlp_receiver):
    request = build_request(
        "What is 2 + 2?", num_drafts=5, max_new_tokens=BUDGET, refine_max_new_tokens=4, temperature=0.0, seed=3,
        strategy_hints=[ONE_LINE, LONG, ONE_LINE, LONG, ONE_LINE], request_id=f"quorum-{time.time_ns()}",
    )  # fmt: skip
    request.quorum = 3
    with DeliberateClient(stack.address) as client:
        response = client.solve(request, timeout=600)

    early_stop = response.early_stop
    assert early_stop.reached and early_stop.quorum == 3, early_stop
    assert early_stop.reason.startswith("quorum: 3 drafts passed every hard rule and agree on '4'")
    assert early_stop.cancelled == 2
    stragglers = [r for r in response.drafts if r.aborted.reason == "quorum"]
    assert len(stragglers) == 2, "which two is up to the engine's scheduling; the long hints are slower"
    for report in stragglers:
        assert report.draft.finish_reason == common_pb2.FINISH_REASON_ABORTED
        assert report.draft.usage.completion_tokens < BUDGET and not report.selected
        assert not report.verdict.valid and report.verdict.rule_results[0].rule_id == "quorum"
    agreeing = [r for r in response.drafts if r.verdict.valid]
    assert len(agreeing) == 3 and {r.verdict.extracted_answer for r in agreeing} == {"4"}
    assert set(response.selected_draft_ids) <= {r.draft.id for r in agreeing}
    assert response.status in (pb.SOLVE_STATUS_VERIFIED, pb.SOLVE_STATUS_UNCHECKED)

    lifecycle = spans_by_draft(otlp_receiver, response.trace_id, "deliberate.draft")
    generated = spans_by_draft(otlp_receiver, response.trace_id, "drafter.draft")
    for report in stragglers:
        assert lifecycle[report.draft.id]["attributes"]["deliberate.draft.abort.reason"] == "quorum"
        assert lifecycle[report.draft.id]["attributes"]["deliberate.draft.outcome"] == "aborted"
        assert generated[report.draft.id]["attributes"]["deliberate.draft.finish_reason"] == "FINISH_REASON_ABORTED"
    for report in agreeing:
        assert generated[report.draft.id]["attributes"]["deliberate.draft.finish_reason"] == "FINISH_REASON_STOP"


def test_early_stopping_switched_off_waits_for_every_draft(stack):
    request = build_request(
        "What is 2 + 2?", num_drafts=3, max_new_tokens=24, refine_max_new_tokens=4, temperature=0.0, seed=3,
        strategy_hints=[ONE_LINE, LONG, ONE_LINE],
    )  # fmt: skip
    request.disable_streaming_verification = request.disable_quorum = True
    with DeliberateClient(stack.address) as client:
        response = client.solve(request, timeout=600)
    assert response.early_stop == pb.EarlyStop()
    assert all(not r.HasField("aborted") for r in response.drafts)
    assert all(r.draft.finish_reason != common_pb2.FINISH_REASON_ABORTED for r in response.drafts)
