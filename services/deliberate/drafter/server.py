"""gRPC edge of the Drafter: validates, runs one batched generation, streams each draft as it completes
(GenerateDrafts), or every draft token by token with per-draft cancel on the same stream (StreamDrafts)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import grpc
from opentelemetry import trace

from deliberate_api.common.v1 import common_pb2
from deliberate_api.drafter.v1 import drafter_service_pb2, drafter_service_pb2_grpc

from ..core import telemetry
from ..core.convert import FINISH_REASONS, duration, struct_to_dict
from ..core.gpu import GpuMonitor, GpuReading
from ..core.requests import parse_output_schema
from ..decisions.prompts import decision_prompt_of
from ..engines.base import Cancellation, Completion, Engine, SamplingParams, TextDelta
from ..engines.models import confidence_floors
from ..engines.service import EngineServicer, open_engine_of
from ..engines.workload import EngineLoad
from ..selection.confidence import TokenTrace, summarize
from .decision import (
    DECISION_STRATEGIES,
    decision_prefill,
    decision_strategies_for,
    decision_system_prompt,
    decision_user_message,
)
from .limits import GENERATE_DRAFTS
from .prompts import (
    PROGRAM,
    PROGRAM_PREFILL,
    PROGRAM_SYSTEM_PROMPT,
    SYSTEM_PROMPT,
    DraftPlan,
    draft_plans,
    draft_user_message,
    program_user_message,
)
from .settings import DrafterSettings

log = logging.getLogger("deliberate.drafter")
# How long a StreamDrafts call waits, after its last draft, for the caller to close its side. The Scheduler closes
# within milliseconds; a caller that never closes (a Scheduler older than this rule) costs this much per round.
CALLER_CLOSE_GRACE_S = 5.0
tracer = trace.get_tracer("deliberate.drafter")
DRAFT_KIND = "deliberate.draft.kind"  # span attribute: "prose" or "program"
DRAFT_CONFIDENCE = "deliberate.draft.confidence"  # span attributes' prefix: <prefix>.mean_logprob, .min_window, …


def draft_id(request_id: str, round_: int, index: int) -> str:
    return f"{request_id}-r{round_}-d{index}"


class DrafterServicer(EngineServicer, drafter_service_pb2_grpc.DrafterServiceServicer):
    settings: DrafterSettings

    def __init__(self, settings: DrafterSettings, engine: Engine, gpu: GpuMonitor | None = None):
        super().__init__(settings, engine)
        self.gpu = gpu  # read for the load report; None where NVML sees no GPU
        self.confidence_floors = confidence_floors(settings.model)  # sent with each streamed draft's first delta

    @classmethod
    @asynccontextmanager
    async def open(cls, settings: DrafterSettings) -> AsyncIterator[DrafterServicer]:
        """The servicer with its engine loaded and, where NVML sees one, the GPU it reports on."""
        with GpuMonitor.open() as gpu:
            async with open_engine_of(settings) as engine:
                yield cls(settings, engine, gpu)

    def validate(self, request: drafter_service_pb2.GenerateDraftsRequest) -> tuple[SamplingParams, dict | None]:
        GENERATE_DRAFTS.check(request, self.settings)
        sampling = self.sampling(request.sampling)
        if sampling.seed is not None and request.first_index:  # seeded as if one call drafted from index 0
            sampling = dataclasses.replace(sampling, seed=sampling.seed + request.first_index)
        return sampling, parse_output_schema(request.output_schema)

    async def GenerateDrafts(self, request, context: grpc.aio.ServicerContext):  # noqa: N802 (gRPC naming)
        async for event, plans, started_ns in self.drafting(request, context):
            if isinstance(event, Completion):
                yield drafter_service_pb2.GenerateDraftsResponse(draft=self.draft_of(request, plans, event, started_ns))

    async def StreamDrafts(self, request_iterator, context: grpc.aio.ServicerContext):  # noqa: N802 (gRPC naming)
        first = await anext(aiter(request_iterator), None)
        if first is None or first.WhichOneof("action") != "generate":
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "action: the first message must be `generate`")
        request = first.generate
        cancel = Cancellation()
        cancels = asyncio.ensure_future(self.read_cancels(request, request_iterator, cancel))
        opened: set[int] = set()  # drafts whose first delta was sent
        try:
            async for event, plans, started_ns in self.drafting(request, context, cancel):
                if isinstance(event, TextDelta):
                    index = request.first_index + event.index
                    text = event.text
                    floor = 0.0
                    if event.index not in opened:  # the deltas add up to the draft's text, prefill included
                        opened.add(event.index)
                        text = prefill_of(plans[event.index]) + text
                        floor = self.confidence_floors.get(plans[event.index].kind, 0.0)
                    delta = drafter_service_pb2.DraftDelta(
                        draft_id=draft_id(request.request_id, request.round, index),
                        index=index,
                        text=text,
                        tokens=1,  # one engine piece: a decoding step's token (llama.cpp streams one at a time)
                        token_confidences=event.confidences,
                        confidence_floor=floor,
                    )
                    yield drafter_service_pb2.StreamDraftsResponse(delta=delta)
                else:
                    draft = self.draft_of(request, plans, event, started_ns)
                    yield drafter_service_pb2.StreamDraftsResponse(draft=draft)
            # Every draft has ended; the call ends when the caller closes its side. Ending it first would make a
            # cancel the caller sent meanwhile a write to a finished call, which its gRPC library turns into an
            # INTERNAL failure of the whole call; read, it stops nothing.
            await asyncio.wait([cancels], timeout=CALLER_CLOSE_GRACE_S)  # a broken caller stream is not a failure
        finally:
            cancels.cancel()

    async def read_cancels(self, request, request_iterator, cancel: Cancellation) -> None:
        """Stops each draft the caller cancels; its index counts from the request's `first_index`."""
        async for message in request_iterator:
            if message.WhichOneof("action") == "cancel":
                index = message.cancel.index - request.first_index
                log.info("draft cancelled", extra={"request_id": request.request_id, "index": message.cancel.index})
                cancel.cancel_sequence(index)

    async def drafting(self, request, context: grpc.aio.ServicerContext, cancel: Cancellation | None = None):
        """The engine's events for the request's drafts, each with the drafts' plans and the batch's start."""
        sampling, schema = await self.validated(self.validate, request, context)
        plans = draft_plans(
            request.num_drafts, request.strategies, request.round, request.first_index, request.program_drafts
        )
        data = struct_to_dict(request.context) if schema is not None else {}
        if schema is not None:  # a decision: its programs read the request's data and print the plan
            plans = decision_plans(plans, request.round, request.first_index, data, request.rule_packs)
        # Where the engine constrains decoding to the schema, a JSON draft is the object and nothing else; a decision
        # program is decoded free.
        constrained = schema is not None and self.engine.capabilities.output_schema
        prompts = [self.prompt_of(request, plan, schema, constrained, data) for plan in plans]
        free = {index for index, plan in enumerate(plans) if plan.kind == PROGRAM}
        started_ns = time.time_ns()
        programs = sum(plan.kind == PROGRAM for plan in plans)
        log.info("drafting", extra={"request_id": request.request_id, "num_drafts": len(prompts), "programs": programs})
        generation = self.generation(
            context, prompts, sampling, schema if constrained else None, cancel, free_sequences=free
        )
        async with generation as events:
            async for event in events:
                yield event, plans, started_ns

    def prompt_of(self, request, plan: DraftPlan, schema: dict | None, constrained: bool, data: dict) -> str:
        """The engine prompt of one draft. A program's ends inside the assistant turn with an opened ```python
        fence (every engine continues text appended to format_chat's prompt), so the model continues in code."""
        if plan.kind == PROGRAM and schema is not None:
            user = decision_user_message(request.prompt, data, plan.strategy, schema, request.feedback)
            system = decision_system_prompt(decision_prompt_of(request.rule_packs))
            return self.engine.format_chat(system, user) + plan.prefill
        if plan.kind == PROGRAM:
            user = program_user_message(request.prompt, plan.strategy, request.feedback)
            return self.engine.format_chat(PROGRAM_SYSTEM_PROMPT, user) + PROGRAM_PREFILL
        user = draft_user_message(request.prompt, plan.strategy, schema, request.feedback, constrained)
        return self.engine.format_chat(SYSTEM_PROMPT, user)

    def draft_of(self, request, plans: list[DraftPlan], event: Completion, started_ns: int) -> common_pb2.Draft:
        index = request.first_index + event.index
        plan = plans[event.index]
        prefill = prefill_of(plan)
        draft = common_pb2.Draft(
            id=draft_id(request.request_id, request.round, index),
            index=index,
            strategy=plan.strategy,
            kind=plan.kind,
            text=prefill + event.text,  # engines return the continuation only
            usage=common_pb2.TokenUsage(prompt_tokens=event.prompt_tokens, completion_tokens=event.completion_tokens),
            finish_reason=FINISH_REASONS[event.finish_reason],
            generation_latency=duration(event.latency_s),
        )
        if event.trace is not None:
            confidence = confidence_of(event.trace.shifted(len(prefill)), draft.text, self.defaults.top_logprobs)
            if confidence is not None:
                draft.confidence.CopyFrom(confidence)
        record_draft_span(draft, started_ns, request.request_id)
        return draft

    async def GetLoad(self, request, context: grpc.aio.ServicerContext):  # noqa: N802 (gRPC naming)
        gpu = self.gpu.read() if self.gpu is not None else None
        return load_response(self.engine.name, self.engine.load_report(), gpu)


def confidence_of(trace: TokenTrace, text: str, top_k: int) -> common_pb2.DraftConfidence | None:
    """The draft's confidence numbers and its per-token series, or None when the trace holds no token."""
    summary = summarize(trace, text)
    if summary is None:
        return None
    confidence = common_pb2.DraftConfidence(
        tokens=summary.tokens,
        mean_logprob=summary.mean_logprob,
        min_window=summary.min_window,
        last_window=summary.last_window,
        window_tokens=summary.window_tokens,
        top_k=top_k,
        token_logprobs=trace.logprobs,
        token_confidences=trace.confidences,
        token_ends=trace.ends,
    )
    if summary.answer is not None:
        confidence.answer = summary.answer
    return confidence


def prefill_of(plan: DraftPlan) -> str:
    """The text the draft's prompt ends with and its text starts with: the opened fence of a program (and a
    decision program's import)."""
    if plan.kind != PROGRAM:
        return ""
    return plan.prefill or PROGRAM_PREFILL


def decision_plans(
    plans: list[DraftPlan], round_: int, first_index: int, data: dict, rule_packs: Sequence[str] = ()
) -> list[DraftPlan]:
    """The call's plans for a request with a schema: its programs become decision programs with decision hints
    (those of a rule pack that gives its programs functions, where the request names one), opening on the
    request's data."""
    programs = [plan for plan in plans if plan.kind == PROGRAM]
    pack_prompt = decision_prompt_of(rule_packs)
    strategies = pack_prompt.strategies if pack_prompt is not None else DECISION_STRATEGIES
    hints = iter(decision_strategies_for(len(programs), round_, first_index, strategies))
    prefill = decision_prefill(data)
    return [
        dataclasses.replace(plan, strategy=next(hints), decision=True, prefill=prefill)
        if plan.kind == PROGRAM
        else plan
        for plan in plans
    ]


def load_response(engine_name: str, load: EngineLoad, gpu: GpuReading | None) -> drafter_service_pb2.GetLoadResponse:
    response = drafter_service_pb2.GetLoadResponse(
        engine=engine_name,
        busy_sequences=load.busy_sequences,
        queued_sequences=load.queued_sequences,
        capacity=load.capacity,
        recent_tokens_per_second=load.recent_tokens_per_second,
        window_seconds=load.window_s,
    )
    if gpu is not None:
        response.gpu_utilization = gpu.utilization
        response.gpu_memory_utilization = gpu.memory
    return response


def record_draft_span(draft: common_pb2.Draft, started_ns: int, request_id: str) -> None:
    """One span per draft, from the start of the batch to this draft's completion."""
    span = tracer.start_span(
        "drafter.draft",
        start_time=started_ns,
        attributes={
            telemetry.REQUEST_ID: request_id,
            telemetry.DRAFT_ID: draft.id,
            telemetry.DRAFT_INDEX: draft.index,
            telemetry.DRAFT_STRATEGY: draft.strategy,
            DRAFT_KIND: draft.kind,
            telemetry.DRAFT_TOKENS: draft.usage.completion_tokens,
            telemetry.DRAFT_FINISH_REASON: common_pb2.FinishReason.Name(draft.finish_reason),
            **confidence_attributes(draft),
        },
    )
    span.end()


def confidence_attributes(draft: common_pb2.Draft) -> dict[str, float]:
    """The draft's confidence numbers as span attributes (`deliberate.draft.confidence.<name>`); none without."""
    if not draft.HasField("confidence"):
        return {}
    c = draft.confidence
    values = {"mean_logprob": c.mean_logprob, "min_window": c.min_window, "last_window": c.last_window}
    if c.HasField("answer"):
        values["answer"] = c.answer
    return {f"{DRAFT_CONFIDENCE}.{name}": round(value, 4) for name, value in values.items()}
