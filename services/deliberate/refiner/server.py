"""gRPC edge of the Refiner: streams the final answer token by token; the thinking trace comes beside it."""

from __future__ import annotations

import logging
from dataclasses import replace

import grpc
from opentelemetry import trace

from deliberate_api.refiner.v1 import refiner_service_pb2, refiner_service_pb2_grpc

from ..core import metrics, telemetry
from ..core.convert import FINISH_REASONS
from ..core.requests import parse_output_schema
from ..engines.base import Completion, Engine, TextDelta
from ..engines.service import EngineServicer
from ..selection.consensus import consensus
from ..selection.final_text import passed_and_failed
from .budget import Budget, BudgetTable, token_budget
from .limits import REFINE
from .prompts import SYSTEM_PROMPT, SelectedDraft, refine_user_message, thinking_trace_of
from .settings import RefinerSettings

log = logging.getLogger("deliberate.refiner")
tracer = trace.get_tracer("deliberate.refiner")


class RefinerServicer(EngineServicer, refiner_service_pb2_grpc.RefinerServiceServicer):
    settings: RefinerSettings

    def __init__(self, settings: RefinerSettings, engine: Engine):
        super().__init__(settings, engine)
        self.table = BudgetTable.parse(settings.budget_table)

    def validate(self, request: refiner_service_pb2.RefineRequest):
        REFINE.check(request, self.settings)
        return self.sampling(request.sampling), parse_output_schema(request.output_schema)

    async def Refine(self, request, context: grpc.aio.ServicerContext):  # noqa: N802 (gRPC naming)
        sampling, schema = await self.validated(self.validate, request, context)
        selected = [selected_draft(item) for item in request.selected]
        trace_marker = "" if request.disable_thinking_trace else thinking_trace_of(selected[0])
        # Where the engine can, a structured answer is decoded under its schema (as the Drafter's drafts are), so
        # it is the JSON object alone; free text before it (a consensus prefix) would break it.
        constrained = schema is not None and self.engine.capabilities.output_schema
        prefix = ""
        if not request.disable_consensus_prefix and not constrained:
            if request.HasField("consensus_prefix"):  # the Scheduler's: compared in substance, already streamed
                prefix = request.consensus_prefix
            else:  # a caller of its own: by lines alone (it has no computations)
                prefix = consensus([d.text for d in request.all_drafts], self.settings.consensus_min_support).text
        budget = self.budget(request, selected[0].score, context.time_remaining())
        metrics.REFINE_TOKEN_BUDGET.record(budget.tokens)
        sampling = replace(sampling, max_new_tokens=budget.tokens)
        # The model continues after the agreed lines instead of thinking them again.
        prompt = self.engine.format_chat(SYSTEM_PROMPT, refine_user_message(request.prompt, selected, schema)) + prefix

        with tracer.start_as_current_span(
            "refiner.generate", attributes={telemetry.REQUEST_ID: request.request_id}
        ) as span:
            if prefix:
                yield chunk(prefix)
            completion = None
            first_token_seen = False
            span.set_attribute("deliberate.refine.consensus_prefix_chars", len(prefix))
            async with self.generation(context, [prompt], sampling, schema if constrained else None) as events:
                async for event in events:
                    if isinstance(event, TextDelta):
                        if not first_token_seen:
                            span.add_event("first_token")  # when the model's own text starts
                            first_token_seen = True
                        yield chunk(event.text)
                    elif isinstance(event, Completion):
                        completion = event
            span.set_attribute("deliberate.refine.completion_tokens", completion.completion_tokens)

        yield refiner_service_pb2.RefineResponse(
            final=refiner_service_pb2.RefineFinal(
                text=prefix + completion.text,
                thinking_trace=trace_marker,
                consensus_prefix=prefix,
                token_budget=budget.tokens,
                budget_reason=budget.reason,
                usage={
                    "prompt_tokens": completion.prompt_tokens,
                    "completion_tokens": completion.completion_tokens,
                },
                finish_reason=FINISH_REASONS[completion.finish_reason],
            )
        )

    def budget(self, request, best_score: float, remaining_s: float | None) -> Budget:
        """From the best draft's score through the table (or the client's explicit max_new_tokens), capped by
        what the remaining deadline allows at the engine's measured speed."""
        table = self.table
        if request.sampling.HasField("max_new_tokens"):
            table = BudgetTable(rows=(), default=request.sampling.max_new_tokens)
        return token_budget(best_score, table, remaining_s, self.engine.tokens_per_second)


def chunk(text: str) -> refiner_service_pb2.RefineResponse:
    return refiner_service_pb2.RefineResponse(chunk=refiner_service_pb2.RefineChunk(text=text))


def selected_draft(item: refiner_service_pb2.VerifiedDraft) -> SelectedDraft:
    passed, failed = passed_and_failed(item.verdict.rule_results)
    return SelectedDraft(
        index=item.draft.index,
        text=item.draft.text,
        score=item.verdict.score,
        valid=item.verdict.valid,
        passed_rules=passed,
        failed_rules=failed,
    )
