"""The three ways to the final text through the four real services (docs/refiner.md, "Three ways to the final
text"): passed through, the best draft is the answer with no Refiner call, streamed whole right after selection;
whichever the way, the thinking trace arrives as its own event before the answer and is never part of it."""

from __future__ import annotations

import pytest

from deliberate.scheduler.decisions import best_draft_answer
from deliberate.selection.final_text import PLAIN_FINAL_LINE
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb
from deliberate_client.client import DeliberateClient, build_request

pytestmark = pytest.mark.model

QUESTION = "Tom has 3 apples and buys 4 more. How many apples does he have? Write the equation, then the answer."


def streamed(stack, way: int) -> tuple[list[pb.SolveStreamResponse], pb.SolveResponse]:
    request = build_request(QUESTION, num_drafts=2, max_new_tokens=48, refine_max_new_tokens=24, seed=3)
    request.final_text = way
    request.program_drafts = 0
    with DeliberateClient(stack.address) as client:
        events = list(client.solve_stream(request, timeout=300))
    return events, events[-1].final


def test_a_passed_through_answer_is_the_best_draft_streamed_whole_right_after_selection(stack):
    events, final = streamed(stack, pb.FINAL_TEXT_PASS_THROUGH)
    kinds = [e.WhichOneof("event") for e in events]
    assert final.final_text == pb.FINAL_TEXT_PASS_THROUGH
    # Selection, the trace, then the whole answer in one chunk: nothing waits on a model after the drafts.
    last_decision = max(i for i, k in enumerate(kinds) if k in ("draft_selected", "draft_discarded"))
    assert kinds[last_decision + 1 :] == ["thinking_trace", "refine_chunk", "final"], kinds
    chunk = events[kinds.index("refine_chunk")].refine_chunk.text
    best = next(r for r in final.drafts if r.draft.id == final.selected_draft_ids[0])
    assert final.answer == chunk == best_draft_answer(best, pb.SolveRequest())
    assert events[kinds.index("thinking_trace")].thinking_trace.text == final.thinking_trace
    assert final.thinking_trace.startswith(f"[THINKING_TRACE: Draft#{best.draft.index} scored")
    assert "THINKING_TRACE" not in final.answer
    # No Refiner call: every completion token is a draft's, and no refine budget was spent.
    assert final.usage.completion_tokens == sum(r.draft.usage.completion_tokens for r in final.drafts)
    assert final.refine_token_budget == 0 and final.timings.refine.ToTimedelta().total_seconds() < 1.0
    if best.verdict.extracted_answer:  # the Verifier read an answer: it ends the text as a plain final line
        last_line = final.answer.strip().splitlines()[-1]
        assert PLAIN_FINAL_LINE.fullmatch(last_line), last_line


def test_a_refined_answer_streams_after_the_trace_event_and_never_contains_it(stack):
    events, final = streamed(stack, pb.FINAL_TEXT_REFINE)
    kinds = [e.WhichOneof("event") for e in events]
    assert final.final_text == pb.FINAL_TEXT_REFINE
    assert kinds.count("thinking_trace") == 1 and kinds.index("thinking_trace") < kinds.index("refine_chunk")
    text = "".join(e.refine_chunk.text for e in events if e.HasField("refine_chunk"))
    assert "THINKING_TRACE" not in text and "THINKING_TRACE" not in final.answer
    if "refinement rejected" not in final.status_reason:
        assert text == final.answer
    assert final.usage.completion_tokens > sum(r.draft.usage.completion_tokens for r in final.drafts)


def test_a_request_without_a_trace_gets_no_trace_event(stack):
    request = build_request(QUESTION, num_drafts=1, max_new_tokens=32, seed=3)
    request.final_text = pb.FINAL_TEXT_PASS_THROUGH
    request.disable_thinking_trace = True
    request.program_drafts = 0
    with DeliberateClient(stack.address) as client:
        events = list(client.solve_stream(request, timeout=300))
    assert "thinking_trace" not in [e.WhichOneof("event") for e in events]
    assert events[-1].final.thinking_trace == ""
