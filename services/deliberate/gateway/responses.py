"""The Scheduler's `SolveResponse` → an OpenAI chat completion, without HTTP or gRPC: choice 0 is the answer (its
thinking trace apart, cut at a stop sequence), choices 1 … n - 1 the next-best drafts, and the `deliberate` field
the verdicts, timings and tokens.

The mapping is documented, field by field, in docs/gateway.md#response-mapping.
"""

from __future__ import annotations

from google.protobuf import json_format

from deliberate_api.common.v1 import common_pb2
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb

from .requests import ChatRequest

# A draft's finish reasons in OpenAI's words; any other is "stop".
FINISH_REASONS = {common_pb2.FINISH_REASON_LENGTH: "length", common_pb2.FINISH_REASON_ABORTED: "length"}


class StopFilter:
    """Cuts text at the first stop sequence (not included), also when the text arrives in pieces: a piece's tail
    that may begin a stop sequence is held back until the next piece decides."""

    def __init__(self, stops: list[str]):
        self.stops = stops
        self.pending = ""
        self.stopped = False

    def feed(self, text: str) -> str:
        if self.stopped:
            return ""
        self.pending += text
        cuts = [i for s in self.stops if (i := self.pending.find(s)) >= 0]
        if cuts:
            out, self.pending, self.stopped = self.pending[: min(cuts)], "", True
            return out
        hold = max((k for s in self.stops for k in range(1, len(s)) if self.pending.endswith(s[:k])), default=0)
        out = self.pending[: len(self.pending) - hold]
        self.pending = self.pending[len(out) :]
        return out

    def flush(self) -> str:
        out, self.pending = ("" if self.stopped else self.pending), ""
        return out


def apply_stop(text: str, stops: list[str]) -> str:
    cut = StopFilter(stops)
    return cut.feed(text) + cut.flush()


def status_name(status: int) -> str:
    return pb.SolveStatus.Name(status).removeprefix("SOLVE_STATUS_").lower()


def answer_text(response: pb.SolveResponse, include_thinking_trace: bool) -> str:
    """The answer as a person reads it; under its thinking-trace line where the request asked for the trace."""
    if include_thinking_trace and response.thinking_trace:
        return f"{response.thinking_trace}\n{response.answer}"
    return response.answer


def final_content(response: pb.SolveResponse, chat: ChatRequest) -> str:
    """Choice 0's content: the answer (under its thinking trace only if asked for), cut at a stop sequence."""
    return apply_stop(answer_text(response, chat.include_thinking_trace), chat.stop)


def ranked_drafts(response: pb.SolveResponse) -> list[pb.DraftReport]:
    """The next-best drafts after the answer: valid ones first, the selected first among them, then by
    selection score, Verifier score, round and index."""
    return sorted(
        response.drafts,
        key=lambda r: (not r.verdict.valid, not r.selected, -r.components.final, -r.verdict.score, r.round,
                       r.draft.index),
    )  # fmt: skip


def draft_summary(report: pb.DraftReport) -> dict:
    verdict, draft = report.verdict, report.draft
    summary = {
        "id": draft.id,
        "index": draft.index,
        "round": report.round,
        "strategy": draft.strategy,
        "kind": draft.kind or "prose",
        "valid": verdict.valid,
        "score": round(verdict.score, 4),
        "selected": report.selected,
        "extracted_answer": verdict.extracted_answer,
        "passed": [r.rule_id for r in verdict.rule_results if r.passed and not r.abstained],
        "errors": [r.message for r in verdict.rule_results if not r.passed],
        "evidence": list(verdict.evidence),
        "finish_reason": FINISH_REASONS.get(draft.finish_reason, "stop"),
        "completion_tokens": draft.usage.completion_tokens,
    }
    if report.duplicate_of:
        summary["duplicate_of"] = report.duplicate_of
    if report.HasField("placement"):  # several Drafter replicas: where it ran, and why it moved
        placement = report.placement
        summary["replica"] = placement.replica
        if placement.moved_from:
            summary["moved_from"], summary["moved_reason"] = placement.moved_from, placement.moved_reason
    return summary


def usage(response: pb.SolveResponse) -> dict:
    """Every stage's tokens: all drafts (every round) and the refinement."""
    prompt, completion = response.usage.prompt_tokens, response.usage.completion_tokens
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def extension(response: pb.SolveResponse) -> dict:
    """The one `deliberate` field: status, per-draft verdicts, trace id, stage timings, tokens by stage."""
    timings = response.timings
    drafted = [report.draft.usage for report in response.drafts]
    draft_tokens = {
        "prompt_tokens": sum(u.prompt_tokens for u in drafted),
        "completion_tokens": sum(u.completion_tokens for u in drafted),
    }
    return {
        "request_id": response.request_id,
        "status": status_name(response.status),
        "status_reason": response.status_reason,
        "verified_by": list(response.verified_by),
        "trace_id": response.trace_id,
        "timings_s": {
            stage: round(getattr(timings, stage).ToTimedelta().total_seconds(), 4)
            for stage in ("draft", "verify", "select", "refine", "total")
        },
        "num_drafts": response.num_drafts,
        "num_drafts_reason": response.num_drafts_reason,
        "round_plan": json_format.MessageToDict(response.round_plan, preserving_proto_field_name=True),
        "rounds": response.rounds,
        "selected_draft_ids": list(response.selected_draft_ids),
        "drafts": [draft_summary(report) for report in response.drafts],
        "refine_token_budget": response.refine_token_budget,
        "refine_budget_reason": response.refine_budget_reason,
        "tokens": {
            "drafts": draft_tokens,
            "refine": {
                "prompt_tokens": response.usage.prompt_tokens - draft_tokens["prompt_tokens"],
                "completion_tokens": response.usage.completion_tokens - draft_tokens["completion_tokens"],
            },
        },
    }


def draft_choices(response: pb.SolveResponse, chat: ChatRequest) -> list[dict]:
    """Choices 1 … n - 1: the next-best drafts, each with its verdict in the choice's `deliberate` field."""
    choices = []
    for index, report in enumerate(ranked_drafts(response)[: chat.n - 1], start=1):
        text = apply_stop(report.draft.text, chat.stop)
        choices.append(
            {
                "index": index,
                "message": {"role": "assistant", "content": text},
                "finish_reason": FINISH_REASONS.get(report.draft.finish_reason, "stop"),
                "logprobs": None,
                "deliberate": {
                    "draft_id": report.draft.id,
                    "status": "valid" if report.verdict.valid else "invalid",
                    "score": round(report.verdict.score, 4),
                    "selected": report.selected,
                },
            }
        )
    return choices


def completion(response: pb.SolveResponse, chat: ChatRequest, created: int) -> dict:
    message = {"role": "assistant", "content": final_content(response, chat)}
    if response.thinking_trace and not chat.include_thinking_trace:
        message["reasoning_content"] = response.thinking_trace
    answer = {
        "index": 0,
        "message": message,
        "finish_reason": "stop",
        "logprobs": None,
        "deliberate": {"status": status_name(response.status)},
    }
    return {
        "id": chat.completion_id,
        "object": "chat.completion",
        "created": created,
        "model": chat.model,
        "choices": [answer, *draft_choices(response, chat)],
        "usage": usage(response),
        "deliberate": extension(response),
    }
