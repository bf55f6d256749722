"""One real solve through four processes: drafts, verdicts, refinement, and one trace across all of them."""

from __future__ import annotations

import time

import grpc
import pytest

from deliberate.scheduler.decisions import best_draft_answer
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb
from deliberate_client.client import DeliberateClient, build_request

from .conftest import gsm8k_questions

pytestmark = pytest.mark.model

SERVICES = {"deliberate-drafter", "deliberate-verifier", "deliberate-refiner", "deliberate-scheduler"}


def short_request(prompt: str, num_drafts: int = 3) -> pb.SolveRequest:
    return build_request(prompt, num_drafts=num_drafts, max_new_tokens=24, refine_max_new_tokens=16, seed=7)


def wait_for_trace(receiver, trace_id: str, timeout_s: float = 15.0) -> list[dict]:
    """Spans are exported in batches; wait until every service has delivered its part."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        spans = receiver.trace(trace_id)
        drafts_closed = [s for s in spans if s["name"] == "deliberate.draft"]
        if {s["service"] for s in spans} >= SERVICES and drafts_closed:
            time.sleep(0.5)  # stragglers of the same batch
            return receiver.trace(trace_id)
        time.sleep(0.2)
    return receiver.trace(trace_id)


def test_solve_gsm8k_question_through_four_processes(stack, otlp_receiver):
    question = gsm8k_questions(1)[0]["question"]
    with DeliberateClient(stack.address) as client:
        response = client.solve(short_request(question), timeout=240)

    assert response.num_drafts == 3 and response.num_drafts_reason == "3 drafts requested by the client"
    assert len(response.drafts) == 3 * response.rounds
    assert sorted(r.draft.index for r in response.drafts if r.round == 0) == [0, 1, 2]
    assert len({r.draft.strategy for r in response.drafts if r.round == 0}) == 3, "each draft has its own strategy"
    for report in response.drafts:
        assert report.draft.text
        assert report.draft.usage.completion_tokens > 0
        assert report.verdict.draft_id == report.draft.id
        assert report.verdict.rule_results, "every draft was verified"
        assert 0.0 <= report.verdict.score <= 1.0
    assert response.answer.strip()
    answered = (pb.SOLVE_STATUS_VERIFIED, pb.SOLVE_STATUS_COMPUTATION_CHECKED, pb.SOLVE_STATUS_UNCHECKED)
    assert response.status in (*answered, pb.SOLVE_STATUS_UNVERIFIED)
    assert response.status_reason
    assert set(response.selected_draft_ids) <= {r.draft.id for r in response.drafts}
    assert response.selected_draft_ids
    # The answer is what a person reads; the trace that says why is beside it, never in it.
    assert response.thinking_trace.startswith("[THINKING_TRACE: Draft#")
    assert "THINKING_TRACE" not in response.answer and response.final_text == pb.FINAL_TEXT_REFINE
    assert response.timings.total.ToTimedelta().total_seconds() > 0
    assert response.usage.completion_tokens >= sum(r.draft.usage.completion_tokens for r in response.drafts)
    assert response.selection_policy == "weighted"
    for report in response.drafts:  # every signal of the selection package, for every draft
        assert set(report.components.signals) >= {"score", "agreement", "latency", "answer_share", "evidence"}
        assert report.components.signals["score"] == pytest.approx(report.verdict.score)
    for report in response.drafts:  # token confidence travels with every draft (issue 24, item 3)
        confidence = report.draft.confidence
        assert confidence.tokens == len(confidence.token_confidences) == len(confidence.token_ends) > 0
        assert confidence.top_k == 20 and confidence.mean_logprob < 0
        assert list(confidence.token_ends) == sorted(confidence.token_ends)
        assert confidence.token_ends[-1] <= len(report.draft.text)
        assert min(confidence.token_confidences) - 1e-3 <= confidence.min_window <= confidence.last_window + 1e-9
        assert report.components.signals["confidence"] == pytest.approx(confidence.min_window)

    assert len(response.trace_id) == 32
    spans = wait_for_trace(otlp_receiver, response.trace_id)
    assert {s["service"] for s in spans} >= SERVICES, "one trace id shared by all four services"

    draft_ids = {r.draft.id for r in response.drafts}
    by_name: dict[str, dict[str, dict]] = {}
    for span in spans:
        draft_id = span["attributes"].get("deliberate.draft.id")
        if draft_id:
            by_name.setdefault(span["name"], {})[draft_id] = span
    assert set(by_name["drafter.draft"]) == draft_ids, "generation span per draft"
    for draft_id, span in by_name["drafter.draft"].items():
        assert span["attributes"]["deliberate.draft.confidence.min_window"] > 0, draft_id
    # Duplicates share a verdict; a draft cancelled on a quorum (early stopping) is not verified.
    verified_ids = {r.draft.id for r in response.drafts if not r.duplicate_of and r.aborted.reason != "quorum"}
    if response.status != pb.SOLVE_STATUS_UNVERIFIED:
        verified_ids.add(f"{response.request_id}-refined")  # the safety net re-verifies the refined answer
    assert set(by_name["verifier.verify_draft"]) == verified_ids, "verification span per distinct draft"
    lifecycle = by_name["deliberate.draft"]
    assert set(lifecycle) == draft_ids, "lifecycle span per draft"
    selected = set(response.selected_draft_ids)
    aborted = {r.draft.id for r in response.drafts if r.HasField("aborted")}  # stopped early (docs/scheduler.md)
    for draft_id, span in lifecycle.items():
        expected = "selected" if draft_id in selected else "aborted" if draft_id in aborted else "discarded"
        assert span["attributes"]["deliberate.draft.outcome"] == expected
        assert "deliberate.draft.signal.answer_share" in span["attributes"]
        events = [e for e in span["events"] if e not in ("cancel sent", "cancel too late")]  # early stopping's
        assert events[:2] == ["generated", "verified"]


def test_solve_stream_orders_stage_events(stack):
    question = gsm8k_questions(2)[1]["question"]
    with DeliberateClient(stack.address) as client:
        events = list(client.solve_stream(short_request(question, num_drafts=2), timeout=240))

    kinds = [e.WhichOneof("event") for e in events]
    assert kinds[-1] == "final" and kinds.count("final") == 1
    rounds = kinds.count("round_started")
    assert rounds == events[-1].final.rounds
    assert kinds.count("draft_generated") == 2 * rounds and kinds.count("draft_verified") == 2 * rounds
    generated_at = {e.draft_generated.draft.id: i for i, e in enumerate(events) if e.HasField("draft_generated")}
    for i, event in enumerate(events):
        if event.HasField("draft_verified"):
            assert generated_at[event.draft_verified.verdict.draft_id] < i, "verified after generated"
    assert kinds[0] == "round_started"
    assert events[0].round_started.num_drafts == 2
    first_chunk = kinds.index("refine_chunk")
    last_verdict = max(i for i, k in enumerate(kinds) if k == "draft_verified")
    decisions = kinds[last_verdict + 1 : first_chunk]
    if decisions[-1:] == ["consensus_prefix"]:  # the drafts' shared opening, streamed before refinement
        decisions.pop()
    assert decisions.pop() == "thinking_trace"  # why this answer, right after selection and before its text
    assert all(k in ("draft_selected", "draft_discarded") for k in decisions)
    assert kinds[last_verdict + 1 : first_chunk], "every draft is selected or discarded before refinement"
    assert kinds.count("refine_chunk") > 1, "the answer streams in several chunks"
    streamed = "".join(e.refine_chunk.text for e in events if e.HasField("refine_chunk"))
    final = events[-1].final
    if "refinement rejected" in final.status_reason:  # the safety net answered with the best verified draft
        best = next(r for r in final.drafts if r.draft.id == final.selected_draft_ids[0])
        assert final.answer == best_draft_answer(best, pb.SolveRequest())
    else:
        assert streamed == final.answer


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"prompt": ""}, "prompt"),
        ({"prompt": "   "}, "prompt"),
        ({"prompt": "x" * 8001}, "prompt"),
        ({"num_drafts": 99}, "num_drafts"),
        ({"num_drafts": -1}, "num_drafts"),
        ({"output_schema": "{not json"}, "output_schema"),
        ({"output_schema": '{"type": "nope"}'}, "output_schema"),
        ({"selection_policy": "nope"}, "selection_policy"),
    ],
)
def test_bad_input_is_invalid_argument_naming_the_field(stack, change, field):
    request = short_request("What is 2 + 2?")
    for name, value in change.items():
        setattr(request, name, value)
    with DeliberateClient(stack.address) as client, pytest.raises(grpc.RpcError) as raised:
        client.solve(request, timeout=30)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert raised.value.details().startswith(f"{field}:")


def test_sampling_out_of_range_names_the_field(stack):
    request = short_request("What is 2 + 2?")
    request.sampling.temperature = 9.0
    with DeliberateClient(stack.address) as client, pytest.raises(grpc.RpcError) as raised:
        client.solve(request, timeout=30)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "sampling.temperature" in raised.value.details()


def test_expired_deadline_is_deadline_exceeded_and_nothing_crashes(stack):
    request = build_request(gsm8k_questions(1)[0]["question"], num_drafts=3, max_new_tokens=200)
    with DeliberateClient(stack.address) as client:
        with pytest.raises(grpc.RpcError) as raised:
            client.solve(request, timeout=1.5)
        assert raised.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        # The services are alive and still answer after the aborted request.
        response = client.solve(short_request("What is 3 + 4?", num_drafts=1), timeout=240)
    assert response.answer
    for service in ("drafter", "verifier", "refiner", "scheduler"):
        assert stack.is_serving(service)


def test_structural_duplicates_are_verified_once(stack, otlp_receiver):
    """Greedy decoding of one strategy three times gives three identical drafts: one verification, shared.
    llama.cpp's greedy decoding is not bit-exact across batch layouts, so a loaded machine may need another try."""
    request = build_request(
        "What is 12 + 30?", num_drafts=3, max_new_tokens=16, refine_max_new_tokens=8, temperature=0.0,
        strategy_hints=["Add the numbers."] * 3,
    )  # fmt: skip
    request.program_drafts = 0  # three prose drafts of one strategy (a program would differ from them)
    tried = []
    with DeliberateClient(stack.address) as client:
        for _ in range(3):
            response = client.solve(request, timeout=240)
            first_round = [r for r in response.drafts if r.round == 0]
            tried.append([r.draft.text for r in first_round])
            if len(set(tried[-1])) == 1:
                break
        else:
            pytest.fail(f"greedy drafts never came out identical: {tried}")
    # The first to arrive is verified; which index that is depends on the engine's completion order.
    [original] = [r for r in first_round if not r.duplicate_of]
    copies = [r for r in first_round if r is not original]
    assert len(copies) == 2
    assert all(c.draft.text == original.draft.text for c in copies)
    assert all(c.duplicate_of == original.draft.id for c in copies)
    assert all(c.verdict.rule_results == original.verdict.rule_results for c in copies)
    spans = wait_for_trace(otlp_receiver, response.trace_id)
    verified = [s for s in spans if s["name"] == "verifier.verify_draft"]
    # A draft cancelled on a quorum (early stopping, docs/scheduler.md) is never verified.
    distinct = {r.draft.id for r in response.drafts if not r.duplicate_of and r.aborted.reason != "quorum"}
    refined = {f"{response.request_id}-refined"} if response.status != pb.SOLVE_STATUS_UNVERIFIED else set()
    assert {s["attributes"]["deliberate.draft.id"] for s in verified} == distinct | refined


def test_a_refinement_that_breaks_the_hard_rules_is_replaced_by_the_best_verified_draft(stack):
    """A one-token refinement cannot state a numeric final answer; the drafts can. The safety net must notice."""
    request = build_request(
        "What is 12 + 30?", num_drafts=2, max_new_tokens=32, refine_max_new_tokens=1, temperature=0.0,
        constraints=[{"id": "long_enough", "celExpression": "size(text) >= 20", "failureMessage": "too short"}],
    )  # fmt: skip
    request.disable_consensus_prefix = True  # identical greedy drafts would otherwise hand it the whole answer
    with DeliberateClient(stack.address) as client:
        response = client.solve(request, timeout=240)
    if response.status not in (pb.SOLVE_STATUS_VERIFIED, pb.SOLVE_STATUS_COMPUTATION_CHECKED):
        pytest.skip(f"no draft passed the hard rules this time: {response.status_reason}")
    assert "refinement rejected (" in response.status_reason
    # Fast-fail: a one-token answer fails the built-in final-answer rules first, or else the declared one.
    rejected = response.status_reason.split("refinement rejected (", 1)[1]
    assert rejected.startswith(("long_enough failed: too short", "final_answer failed", "numeric_answer failed"))
    best = next(r for r in response.drafts if r.draft.id == response.selected_draft_ids[0])
    assert best.verdict.valid
    # A program draft is answered with the value it printed after it.
    assert response.answer == best_draft_answer(best, pb.SolveRequest())
