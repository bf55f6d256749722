"""gRPC edge of the Refiner: streams the thinking trace, then the final answer token by token."""

from __future__ import annotations

import logging

import grpc
from opentelemetry import trace

from deliberate.refiner.v1 import refiner_service_pb2, refiner_service_pb2_grpc

from ..core import telemetry
from ..core.convert import FINISH_REASONS
from ..core.requests import (
    InvalidArgument,
    parse_output_schema,
    require_range,
    require_text,
    sampling_from_proto,
)
from ..engines.base import Completion, Engine, TextDelta
from .prompts import SYSTEM_PROMPT, SelectedDraft, refine_user_message, thinking_trace
from .settings import RefinerSettings

log = logging.getLogger("deliberate.refiner")
tracer = trace.get_tracer("deliberate.refiner")


class RefinerServicer(refiner_service_pb2_grpc.RefinerServiceServicer):
    def __init__(self, settings: RefinerSettings):
        self.settings = settings
        self.engine: Engine | None = None
        self.defaults = settings.default_sampling()

    def validate(self, request: refiner_service_pb2.RefineRequest):
        require_text("prompt", request.prompt, self.settings.max_prompt_chars)
        require_range("selected", len(request.selected), 1, self.settings.max_selected)
        for i, item in enumerate(request.selected):
            if len(item.draft.text) > self.settings.max_draft_chars:
                raise InvalidArgument(f"selected[{i}].draft.text", f"longer than {self.settings.max_draft_chars}")
        sampling = sampling_from_proto(request.sampling, self.defaults, self.settings.max_new_tokens_limit)
        return sampling, parse_output_schema(request.output_schema)

    async def Refine(self, request, context: grpc.aio.ServicerContext):  # noqa: N802 (gRPC naming)
        if self.engine is None:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "refiner is still loading its model")
        try:
            sampling, schema = self.validate(request)
        except InvalidArgument as error:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))

        selected = [selected_draft(item) for item in request.selected]
        trace_marker = "" if request.disable_thinking_trace else thinking_trace(selected[0])
        prompt = self.engine.format_chat(SYSTEM_PROMPT, refine_user_message(request.prompt, selected, schema))

        with tracer.start_as_current_span(
            "refiner.generate", attributes={telemetry.REQUEST_ID: request.request_id}
        ) as span:
            if trace_marker:
                yield chunk(trace_marker + "\n")
            completion = None
            async for event in self.engine.stream([prompt], sampling):
                if isinstance(event, TextDelta):
                    yield chunk(event.text)
                elif isinstance(event, Completion):
                    completion = event
            span.set_attribute("deliberate.refine.completion_tokens", completion.completion_tokens)

        text = f"{trace_marker}\n{completion.text}" if trace_marker else completion.text
        yield refiner_service_pb2.RefineResponse(
            final=refiner_service_pb2.RefineFinal(
                text=text,
                thinking_trace=trace_marker,
                usage={
                    "prompt_tokens": completion.prompt_tokens,
                    "completion_tokens": completion.completion_tokens,
                },
                finish_reason=FINISH_REASONS[completion.finish_reason],
            )
        )


def chunk(text: str) -> refiner_service_pb2.RefineResponse:
    return refiner_service_pb2.RefineResponse(chunk=refiner_service_pb2.RefineChunk(text=text))


def selected_draft(item: refiner_service_pb2.VerifiedDraft) -> SelectedDraft:
    rules = item.verdict.rule_results
    return SelectedDraft(
        index=item.draft.index,
        text=item.draft.text,
        score=item.verdict.score,
        valid=item.verdict.valid,
        passed_rules=tuple(r.rule_id for r in rules if r.passed),
        failed_rules=tuple(r.rule_id for r in rules if not r.passed),
    )
