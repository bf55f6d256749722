"""The gateway's mapping: OpenAI chat completion bodies → SolveRequest, SolveResponse → completions and stream
chunks, and the Scheduler's gRPC statuses → OpenAI errors (no HTTP, no services)."""

from __future__ import annotations

import json

import grpc
import pytest
from google.protobuf import duration_pb2

from deliberate.gateway.errors import ApiError, from_grpc
from deliberate.gateway.requests import parse_chat_request, render_prompt
from deliberate.gateway.responses import StopFilter, completion
from deliberate.gateway.stream import StreamTranslator
from deliberate_api.common.v1 import common_pb2
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb

MODEL = "deliberate"


def body(**fields) -> dict:
    return {"model": MODEL, "messages": [{"role": "user", "content": "2 + 2?"}], **fields}


def refused(fields: dict) -> ApiError:
    with pytest.raises(ApiError) as error:
        parse_chat_request(fields, MODEL)
    return error.value


# --- requests ------------------------------------------------------------------------------------------------------


def test_every_mapped_field_lands_in_the_solve_request():
    chat = parse_chat_request(
        body(
            temperature=0.5, top_p=0.9, seed=11, presence_penalty=0.1, frequency_penalty=0.2, max_tokens=64,
            max_draft_tokens=32, num_drafts=4, n=3, context={"pool": [1, 2]}, strategy_hints=["be brief"],
            constraints=[{"id": "size", "celExpression": "size(plan) == 2"}],
            rule_packs=["arithmetic", {"name": "ad_selection", "params": {"budget": 5000}, "soft": True}],
            response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}},
            request_id="r-1", disable_default_arithmetic=True, stop=["\n\n"], user="someone",
            disable_streaming_verification=True, quorum=2, replace_aborted_drafts=True, confidence_stop=False,
        ),
        MODEL,
    )  # fmt: skip
    solve = chat.solve
    assert solve.prompt == "2 + 2?" and solve.request_id == "r-1" and chat.completion_id == "chatcmpl-r-1"
    assert solve.sampling.temperature == pytest.approx(0.5) and solve.sampling.top_p == pytest.approx(0.9)
    assert solve.sampling.seed == 11 and solve.sampling.max_new_tokens == 32
    assert solve.sampling.presence_penalty == pytest.approx(0.1)
    assert solve.sampling.frequency_penalty == pytest.approx(0.2)
    assert solve.refine_sampling.max_new_tokens == 64 and not solve.refine_sampling.HasField("temperature")
    assert solve.num_drafts == 4 and chat.n == 3 and chat.stop == ["\n\n"]
    assert json.loads(solve.output_schema) == {"type": "object"}
    assert [c.WhichOneof("kind") for c in solve.constraints] == ["cel_expression", "rule_pack", "rule_pack"]
    assert solve.constraints[2].rule_pack == "ad_selection" and solve.constraints[2].soft
    assert solve.constraints[2].params["budget"] == 5000
    assert dict(solve.context)["pool"] == [1, 2] and list(solve.strategy_hints) == ["be brief"]
    assert solve.disable_default_arithmetic and not solve.disable_thinking_trace
    assert solve.disable_streaming_verification and solve.replace_aborted_drafts and not solve.disable_quorum
    assert solve.quorum == 2
    assert solve.HasField("confidence_stop") and not solve.confidence_stop, "said: off, whatever the deployment's"


def test_unset_fields_leave_the_choice_to_the_scheduler():
    solve = parse_chat_request(body(), MODEL).solve
    assert solve.num_drafts == 0 and solve.output_schema == "" and not solve.constraints
    assert solve.draft_count == pb.DRAFT_COUNT_UNSPECIFIED, "the Scheduler's default round: the cascade"
    assert not solve.sampling.ListFields() and not solve.refine_sampling.ListFields()
    assert not solve.HasField("confidence_stop")
    assert len(solve.request_id) == 32  # generated, so the chunk ids are known before the first event


def test_a_completion_read_whole_does_without_the_consensus_prefix_unless_it_asks():
    assert parse_chat_request(body(), MODEL).solve.disable_consensus_prefix
    assert not parse_chat_request(body(stream=True), MODEL).solve.disable_consensus_prefix
    assert not parse_chat_request(body(disable_consensus_prefix=False), MODEL).solve.disable_consensus_prefix
    assert parse_chat_request(body(stream=True, disable_consensus_prefix=True), MODEL).solve.disable_consensus_prefix


def test_n_above_one_without_num_drafts_asks_for_n_drafts_and_more_choices_than_drafts_is_refused():
    chat = parse_chat_request(body(n=3), MODEL)
    assert chat.solve.num_drafts == 3 and chat.rename("num_drafts") == "n"
    assert chat.solve.draft_count == pb.DRAFT_COUNT_ALL_AT_ONCE, "every choice drafted: no cascade stopping at 2"
    error = refused(body(n=4, num_drafts=3))
    assert (error.status, error.param) == (400, "n") and error.message.startswith("n: asks for 4 choices")
    assert refused(body(n=0)).param == "n"


def test_messages_render_system_first_then_the_turns():
    assert render_prompt([{"role": "user", "content": "Q?"}]) == "Q?"
    prompt = render_prompt(
        [
            {"role": "system", "content": "Be exact."},
            {"role": "user", "content": [{"type": "text", "text": "What is 2+2"}, {"type": "text", "text": "?"}]},
            {"role": "assistant", "content": "4"},
            {"role": "user", "content": "And 3+3?"},
        ]
    )
    assert prompt == "Be exact.\n\nUser: What is 2+2?\n\nAssistant: 4\n\nUser: And 3+3?"


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "assistant", "content": "hi"}]}, "messages"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "messages[0].role"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "messages[0].content[0]"),
        ({"temperature": "hot"}, "temperature"),
        ({"seed": 1.5}, "seed"),
        ({"stream": "yes"}, "stream"),
        ({"tools": [{"type": "function"}]}, "tools"),
        ({"frobnicate": 1}, "frobnicate"),
        ({"response_format": {"type": "yaml"}}, "response_format.type"),
        ({"response_format": {"type": "json_schema", "json_schema": {}}}, "response_format.json_schema.schema"),
        ({"constraints": [{"celExpresion": "true"}]}, "constraints[0]"),
        ({"rule_packs": [{"name": "x", "budget": 1}]}, "rule_packs[0].budget"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "stop"),
        ({"context": [1]}, "context"),
    ],
)  # fmt: skip
def test_a_malformed_field_is_a_400_naming_it(fields, param):
    error = refused(body(**fields))
    assert error.status == 400 and error.param == param and error.message.startswith(f"{param}: ")
    assert error.body()["error"]["type"] == "invalid_request_error"


def test_switched_off_features_pass_and_an_unknown_model_is_a_404():
    parse_chat_request(body(logprobs=False, tools=[], tool_choice=None, modalities=["text"]), MODEL)
    error = refused(body(model="gpt-4o"))
    assert (error.status, error.param, error.code) == (404, "model", "model_not_found")


# --- errors --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "status", "kind"),
    [
        (grpc.StatusCode.INVALID_ARGUMENT, 400, "invalid_request_error"),
        (grpc.StatusCode.UNAUTHENTICATED, 401, "authentication_error"),
        (grpc.StatusCode.PERMISSION_DENIED, 403, "permission_error"),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, 429, "rate_limit_error"),
        (grpc.StatusCode.UNAVAILABLE, 503, "service_unavailable"),
        (grpc.StatusCode.DEADLINE_EXCEEDED, 504, "timeout"),
        (grpc.StatusCode.INTERNAL, 500, "server_error"),
    ],
)
def test_grpc_statuses_become_their_http_statuses(code, status, kind):
    error = from_grpc(code, "drafter unavailable: connection refused")
    assert (error.status, error.type, error.code) == (status, kind, code.name.lower())
    assert error.body() == {
        "error": {"message": error.message, "type": kind, "param": error.param, "code": code.name.lower()}
    }


def test_a_retry_hint_becomes_retry_after_in_whole_seconds_and_retry_after_ms():
    error = from_grpc(grpc.StatusCode.RESOURCE_EXHAUSTED, "8 of 8 calls in flight", retry_after_ms=1200)
    assert error.status == 429 and error.headers() == {"Retry-After": "2", "retry-after-ms": "1200"}
    assert from_grpc(grpc.StatusCode.RESOURCE_EXHAUSTED, "busy").headers() == {}


def test_an_invalid_argument_names_the_field_the_client_sent():
    chat = parse_chat_request(
        body(max_tokens=5000, max_draft_tokens=9, constraints=[{"celExpression": "true"}], rule_packs=["nope"]),
        MODEL,
    )

    def translated(details: str) -> ApiError:
        return from_grpc(grpc.StatusCode.INVALID_ARGUMENT, details, chat.rename)

    error = translated("refine_sampling.max_new_tokens: must be in [1, 1024], got 5000")
    assert (error.param, error.message) == ("max_tokens", "max_tokens: must be in [1, 1024], got 5000")
    assert translated("sampling.max_new_tokens: must be in [1, 1024]").param == "max_draft_tokens"
    assert translated("sampling.temperature: must be in [0, 2], got 3").param == "temperature"
    assert translated("prompt: at most 8000 characters").param == "messages"
    assert translated("constraints[0].cel_expression: bad").param == "constraints[0].cel_expression"
    assert translated("constraints[1].rule_pack: unknown rule pack 'nope'").param == "rule_packs[0].rule_pack"
    assert translated("output_schema: is not a valid JSON Schema").param == "response_format.json_schema.schema"
    assert translated("something went wrong without a field").param is None


# --- responses -----------------------------------------------------------------------------------------------------

TRACE = "[THINKING_TRACE: Draft#1 scored 0.90, passed arithmetic]"


def draft(index: int, valid: bool, score: float, selected: bool, tokens: int) -> pb.DraftReport:
    return pb.DraftReport(
        draft=common_pb2.Draft(
            id=f"r-0-{index}", index=index, text=f"draft {index}. The answer is 4.",
            finish_reason=common_pb2.FINISH_REASON_STOP,
            usage=common_pb2.TokenUsage(prompt_tokens=10, completion_tokens=tokens),
        ),
        verdict=common_pb2.DraftVerdict(
            draft_id=f"r-0-{index}", valid=valid, score=score, evidence=["arithmetic"] if valid else [],
            rule_results=[
                common_pb2.RuleResult(rule_id="arithmetic", passed=valid, message="arithmetic: 2+2=5 is wrong")
            ],
        ),
        selected=selected,
        components=pb.ScoreComponents(final=score if valid else 0.0),
    )  # fmt: skip


def solved() -> pb.SolveResponse:
    return pb.SolveResponse(
        request_id="r", answer="It is 4.\n\nDone", thinking_trace=TRACE, status=pb.SOLVE_STATUS_VERIFIED,
        status_reason="best draft passed", trace_id="ab" * 16, verified_by=["arithmetic"],
        drafts=[draft(0, False, 0.2, False, 20), draft(1, True, 0.9, True, 30), draft(2, True, 0.7, False, 25)],
        selected_draft_ids=["r-0-1"], usage=common_pb2.TokenUsage(prompt_tokens=50, completion_tokens=100),
        timings=pb.StageTimings(draft=duration_pb2.Duration(seconds=2), total=duration_pb2.Duration(seconds=3)),
        num_drafts=3, rounds=1,
    )  # fmt: skip


def test_a_completion_answers_without_the_trace_and_ranks_the_drafts_valid_first():
    chat = parse_chat_request(body(n=3, request_id="r"), MODEL)
    reply = completion(solved(), chat, created=1)
    answer, first, second = reply["choices"]
    assert answer["message"] == {"role": "assistant", "content": "It is 4.\n\nDone", "reasoning_content": TRACE}
    assert answer["deliberate"] == {"status": "verified"}
    assert [c["deliberate"]["draft_id"] for c in (first, second)] == ["r-0-1", "r-0-2"]
    assert [c["deliberate"]["status"] for c in (first, second)] == ["valid", "valid"]
    assert reply["usage"] == {"prompt_tokens": 50, "completion_tokens": 100, "total_tokens": 150}
    summary = reply["deliberate"]
    assert summary["status"] == "verified" and summary["trace_id"] == "ab" * 16
    assert summary["timings_s"]["draft"] == 2.0 and summary["timings_s"]["total"] == 3.0
    assert summary["tokens"]["drafts"] == {"prompt_tokens": 30, "completion_tokens": 75}
    assert summary["tokens"]["refine"] == {"prompt_tokens": 20, "completion_tokens": 25}
    invalid = next(d for d in summary["drafts"] if d["id"] == "r-0-0")
    assert not invalid["valid"] and invalid["errors"] == ["arithmetic: 2+2=5 is wrong"] and invalid["passed"] == []


def test_the_trace_stays_in_the_content_when_asked_and_stop_cuts_the_content():
    asked = completion(solved(), parse_chat_request(body(include_thinking_trace=True), MODEL), created=1)
    assert asked["choices"][0]["message"] == {"role": "assistant", "content": f"{TRACE}\nIt is 4.\n\nDone"}
    cut = completion(solved(), parse_chat_request(body(stop="\n\n"), MODEL), created=1)
    assert cut["choices"][0]["message"]["content"] == "It is 4."


def test_a_stop_sequence_split_across_chunks_is_still_found():
    cut = StopFilter(["END"])
    assert cut.feed("abcE") == "abc"  # "E" may begin "END": held back
    assert cut.feed("N") == "" and cut.feed("D more") == ""
    assert cut.stopped and cut.feed("after") == "" and cut.flush() == ""
    loose = StopFilter(["END"])
    assert loose.feed("abE") == "ab" and loose.feed("Nx") == "ENx" and not loose.stopped
    assert loose.feed("E") == "" and loose.flush() == "E"


def stream_of(chat, response: pb.SolveResponse, pieces: list[str]) -> list[dict | str]:
    translator = StreamTranslator(chat, created=1)
    items = translator.start()
    items += translator.on_event(pb.SolveStreamResponse(round_started=pb.RoundStarted(round=0, num_drafts=3)))
    items += translator.on_event(pb.SolveStreamResponse(thinking_trace=pb.ThinkingTrace(text=TRACE)))
    for piece in pieces:
        items += translator.on_event(pb.SolveStreamResponse(refine_chunk=pb.RefineChunk(text=piece)))
    return items + translator.on_event(pb.SolveStreamResponse(final=response))


def test_a_stream_sends_role_progress_trace_content_drafts_summary_and_usage_in_order():
    chat = parse_chat_request(body(n=2, request_id="r", stream=True, stream_options={"include_usage": True}), MODEL)
    items = stream_of(chat, solved(), ["It is", " 4.\n\nDone"])
    role, progress, trace, *content, draft_choice, final, usage = items
    assert role["choices"][0]["delta"] == {"role": "assistant", "content": ""} and role["id"] == "chatcmpl-r"
    assert progress == "round_started"  # an SSE comment
    assert trace["choices"][0]["delta"] == {"reasoning_content": TRACE}
    assert "".join(c["choices"][0]["delta"]["content"] for c in content) == "It is 4.\n\nDone"
    assert draft_choice["choices"][0]["index"] == 1 and draft_choice["choices"][0]["delta"]["content"].startswith(
        "draft 1"
    )
    assert final["choices"][0]["finish_reason"] == "stop" and final["deliberate"]["status"] == "verified"
    assert "answer_replaced" not in final["deliberate"]
    assert usage["choices"] == [] and usage["usage"]["total_tokens"] == 150


def test_final_text_names_the_way_and_refuses_an_unknown_one():
    assert parse_chat_request(body(final_text="pass_through"), MODEL).solve.final_text == pb.FINAL_TEXT_PASS_THROUGH
    assert parse_chat_request(body(final_text="prefix"), MODEL).solve.final_text == pb.FINAL_TEXT_CONSENSUS_PREFIX
    assert parse_chat_request(body(), MODEL).solve.final_text == pb.FINAL_TEXT_UNSPECIFIED
    with pytest.raises(ApiError) as refused:
        parse_chat_request(body(final_text="poem"), MODEL)
    assert refused.value.param == "final_text"


def test_a_stream_that_asked_for_the_trace_gets_it_as_the_content_s_first_line():
    chat = parse_chat_request(body(stream=True, include_thinking_trace=True), MODEL)
    items = stream_of(chat, solved(), ["It is", " 4.\n\nDone"])
    deltas = [i["choices"][0]["delta"] for i in items if isinstance(i, dict) and i["choices"]]
    assert "".join(delta.get("content", "") for delta in deltas) == f"{TRACE}\nIt is 4.\n\nDone"
    assert not any("reasoning_content" in delta for delta in deltas)
    assert "answer_replaced" not in items[-1]["deliberate"]


def test_a_stream_whose_refinement_was_rejected_says_so_and_carries_the_answer():
    response = solved()
    response.answer = "draft 1. The answer is 4."  # the best draft replaced the refinement
    *_, final = stream_of(parse_chat_request(body(stream=True), MODEL), response, ["It is 5."])
    assert final["deliberate"]["answer_replaced"] is True
    assert final["deliberate"]["answer"] == "draft 1. The answer is 4."


def test_a_drafts_placement_appears_in_its_summary_only_with_replicas():
    from deliberate.gateway.responses import draft_summary

    plain = pb.DraftReport(draft=common_pb2.Draft(id="d0"))
    assert "replica" not in draft_summary(plain)
    moved = pb.DraftReport(
        draft=common_pb2.Draft(id="d1"),
        placement=pb.DraftPlacement(replica="10.0.0.2:50052", moved_from="10.0.0.3:50052", moved_reason="lost"),
    )
    summary = draft_summary(moved)
    assert (summary["replica"], summary["moved_from"], summary["moved_reason"]) == (
        "10.0.0.2:50052",
        "10.0.0.3:50052",
        "lost",
    )
