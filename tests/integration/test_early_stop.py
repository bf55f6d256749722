"""Early stopping through the four real services: a draft aborted at the line where its arithmetic went wrong,
a quorum that starts refinement and cancels the drafts still generating, with the spans to prove both, and the
confidence stop fed by the token confidences the Drafter streams.

With greedy decoding SmolLM2 answers GSM8K's first question (Natalia's clips) with `48/5 = 12` on its first
line and goes on for three more lines, which makes a wrong line early in a draft near certain."""

from __future__ import annotations

import time

import pytest

from deliberate.selection.confidence import STOP_MIN_TOKENS
from deliberate.verifier.arithmetic import check_arithmetic
from deliberate_api.common.v1 import common_pb2
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb
from deliberate_client.client import DeliberateClient, build_request

from .conftest import gsm8k_questions
from .test_pipeline import wait_for_trace

pytestmark = pytest.mark.model

BUDGET = 160
ONE_LINE = "Reply with one line only: Final answer: 4"
LONG = "First write a long poem about the sea, at least twenty lines, then answer."
# A straggler must still be generating when the quorum lands, however slow the machine: counting this far takes
# more than STRAGGLER_BUDGET tokens, so it cannot end by itself first (a poem sometimes did, on a loaded machine).
COUNT = "First count from 1 to 1000, one number per line, then answer."
STRAGGLER_BUDGET = 512


def spans_by_draft(otlp_receiver, trace_id: str, name: str) -> dict[str, dict]:
    spans = wait_for_trace(otlp_receiver, trace_id)
    return {s["attributes"]["deliberate.draft.id"]: s for s in spans if s["name"] == name}


def test_a_draft_is_aborted_at_the_line_where_its_arithmetic_went_wrong(stack, otlp_receiver):
    request = build_request(
        gsm8k_questions(1)[0]["question"], num_drafts=1, max_new_tokens=BUDGET, refine_max_new_tokens=4,
        temperature=0.0, seed=3, request_id=f"abort-{time.time_ns()}",
    )  # fmt: skip
    with DeliberateClient(stack.address) as client:
        response = client.solve(request, timeout=600)

    aborted = [r for r in response.drafts if r.aborted.reason == "hard_rule"]
    assert aborted, f"no draft was aborted: {[r.draft.text for r in response.drafts]}"
    report = aborted[0]
    at = report.aborted.at
    assert report.aborted.rule_id == "arithmetic" and "(actually " in report.aborted.message
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
    # No round had a valid draft: the best attempt (UNVERIFIED) may be the aborted draft itself.
    selected = report.draft.id in response.selected_draft_ids
    assert attributes["deliberate.draft.outcome"] == ("selected" if selected else "aborted")
    assert attributes["deliberate.draft.abort.reason"] == "hard_rule"
    assert attributes["deliberate.draft.abort.rule"] == "arithmetic"
    assert attributes["deliberate.draft.abort.line"] == at.line
    assert attributes["deliberate.draft.abort.chars"] == at.chars
    verified = spans_by_draft(otlp_receiver, response.trace_id, "verifier.verify_draft")[report.draft.id]
    assert verified["attributes"]["deliberate.draft.abort.tokens"] == at.tokens
    generated = spans_by_draft(otlp_receiver, response.trace_id, "drafter.draft")[report.draft.id]
    assert generated["attributes"]["deliberate.draft.finish_reason"] == "FINISH_REASON_ABORTED"


def test_a_quorum_starts_refinement_and_cancels_the_stragglers(stack, otlp_receiver):
    """Two one-line answers agree while the drafts told to count to 1000 first still generate: the quorum (2)
    starts refinement and cancels them. Which drafts finish first is up to the engine's batch, and SmolLM2 does
    not always follow its hint (a counting draft may answer at once, a one-line draft may not answer), so the round
    has 3 one-line and 5 counting drafts; the test asks for at least two stragglers and checks every one."""
    request = build_request(
        "What is 2 + 2?", num_drafts=8, max_new_tokens=STRAGGLER_BUDGET, refine_max_new_tokens=4, temperature=0.0,
        seed=3, strategy_hints=[ONE_LINE, COUNT, ONE_LINE, COUNT, COUNT, ONE_LINE, COUNT, COUNT],
        request_id=f"quorum-{time.time_ns()}",
    )  # fmt: skip
    request.quorum = 2
    with DeliberateClient(stack.address) as client:
        response = client.solve(request, timeout=600)

    drafts = [(r.draft.index, r.draft.finish_reason, r.verdict.extracted_answer, r.draft.text) for r in response.drafts]
    early_stop = response.early_stop
    assert early_stop.reached and early_stop.quorum == 2, (early_stop, drafts)
    assert early_stop.reason.startswith("quorum: "), early_stop
    stragglers = [r for r in response.drafts if r.aborted.reason == "quorum"]
    assert len(stragglers) == early_stop.cancelled >= 2, (early_stop, drafts)
    for report in stragglers:
        assert report.draft.finish_reason == common_pb2.FINISH_REASON_ABORTED
        assert report.draft.usage.completion_tokens < STRAGGLER_BUDGET and not report.selected
        assert not report.verdict.valid and report.verdict.rule_results[0].rule_id == "quorum"
    agreeing = [r for r in response.drafts if r.verdict.valid]
    assert len(agreeing) >= 2 and len({r.verdict.extracted_answer for r in agreeing}) == 1, drafts
    assert set(response.selected_draft_ids) <= {r.draft.id for r in agreeing}
    assert response.status in (pb.SOLVE_STATUS_VERIFIED, pb.SOLVE_STATUS_COMPUTATION_CHECKED, pb.SOLVE_STATUS_UNCHECKED)

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


def test_the_confidence_stop_cuts_the_drafts_of_a_kind_below_its_floor(stack, otlp_receiver):
    """The test stack's prose floor is above any token confidence and it has no program floor (conftest): asked for,
    the confidence stop cuts each prose draft at its first judged token, from the confidences its deltas carry,
    and lets the program run to its end. Streaming verification and the quorum are off, so nothing else stops a
    draft; asked for nothing, the same stack stops none."""
    request = build_request(
        gsm8k_questions(1)[0]["question"], num_drafts=2, max_new_tokens=BUDGET, refine_max_new_tokens=4,
        temperature=0.0, seed=3, request_id=f"confidence-{time.time_ns()}",
    )  # fmt: skip
    request.disable_streaming_verification = request.disable_quorum = True
    request.program_drafts = 1
    asked = pb.SolveRequest()
    asked.CopyFrom(request)
    asked.confidence_stop = True
    asked.request_id += "-asked"
    with DeliberateClient(stack.address) as client:
        response = client.solve(asked, timeout=600)
        untouched = client.solve(request, timeout=600)

    prose = [r for r in response.drafts if r.draft.kind != "program"]
    programs = [r for r in response.drafts if r.draft.kind == "program"]
    assert prose and programs, [r.draft.kind for r in response.drafts]
    for report in prose:
        assert report.aborted.reason == "confidence", report.aborted
        assert "below the prose floor 1000.00" in report.aborted.message
        assert 0 < report.aborted.at.tokens <= STOP_MIN_TOKENS <= len(report.draft.confidence.token_confidences)
        assert report.draft.finish_reason == common_pb2.FINISH_REASON_ABORTED
        assert report.draft.usage.completion_tokens < BUDGET, "stopped long before its budget"
        assert not report.verdict.valid and report.verdict.rule_results[0].rule_id == "confidence"
        assert report.draft.id not in response.selected_draft_ids or not any(p.verdict.valid for p in programs)
    assert all(not r.HasField("aborted") for r in programs), "no program floor: programs are never cut"
    assert response.early_stop.low_confidence == len(prose)

    lifecycle = spans_by_draft(otlp_receiver, response.trace_id, "deliberate.draft")
    for report in prose:
        assert lifecycle[report.draft.id]["attributes"]["deliberate.draft.abort.reason"] == "confidence"
    assert untouched.early_stop.low_confidence == 0
    assert all(r.aborted.reason != "confidence" for r in untouched.drafts)
