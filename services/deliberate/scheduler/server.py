"""gRPC edge of the Scheduler: validates the client's request, runs the pipeline, maps failures to statuses."""

from __future__ import annotations

import asyncio
import logging

import grpc

from deliberate.scheduler.v1 import scheduler_service_pb2 as pb
from deliberate.scheduler.v1 import scheduler_service_pb2_grpc

from ..core.requests import (
    InvalidArgument,
    parse_output_schema,
    require_range,
    require_text,
    sampling_from_proto,
)
from ..engines.base import SamplingParams
from .pipeline import Pipeline, StageError
from .settings import SchedulerSettings

log = logging.getLogger("deliberate.scheduler")


def validate(request: pb.SolveRequest, settings: SchedulerSettings) -> None:
    """Checks every documented limit before any stage runs; the error names the field."""
    require_text("prompt", request.prompt, settings.max_prompt_chars)
    require_range("num_drafts", request.num_drafts, 0, settings.max_drafts)
    if len(request.strategy_hints) > settings.max_drafts:
        raise InvalidArgument("strategy_hints", f"at most {settings.max_drafts} hints")
    for i, hint in enumerate(request.strategy_hints):
        if len(hint) > settings.max_hint_chars:
            raise InvalidArgument(f"strategy_hints[{i}]", f"longer than {settings.max_hint_chars} characters")
    if len(request.request_id) > 128:
        raise InvalidArgument("request_id", "longer than 128 characters")
    sampling_from_proto(request.sampling, SamplingParams(), settings.max_new_tokens_limit, "sampling")
    sampling_from_proto(request.refine_sampling, SamplingParams(), settings.max_new_tokens_limit, "refine_sampling")
    parse_output_schema(request.output_schema)


class SchedulerServicer(scheduler_service_pb2_grpc.SchedulerServiceServicer):
    def __init__(self, settings: SchedulerSettings, pipeline: Pipeline):
        self.settings = settings
        self.pipeline = pipeline

    def deadline_s(self, context: grpc.aio.ServicerContext) -> float:
        remaining = context.time_remaining()
        return self.settings.default_deadline_s if remaining is None else min(remaining, 10 * 365 * 86400)

    async def Solve(self, request, context):  # noqa: N802 (gRPC naming)
        await self.check(request, context)
        try:
            return await self.pipeline.solve(request, self.deadline_s(context), emit=lambda event: None)
        except Exception as error:
            await self.fail(context, error)

    async def SolveStream(self, request, context):  # noqa: N802 (gRPC naming)
        request = request.request
        await self.check(request, context)
        events: asyncio.Queue[pb.SolveStreamResponse | None] = asyncio.Queue()
        run = asyncio.ensure_future(self.pipeline.solve(request, self.deadline_s(context), emit=events.put_nowait))
        run.add_done_callback(lambda _: events.put_nowait(None))
        try:
            while (event := await events.get()) is not None:
                yield event
            yield pb.SolveStreamResponse(final=run.result())
        except Exception as error:
            await self.fail(context, error)
        finally:
            run.cancel()  # a cancelled client stops the drafter and refiner too

    async def check(self, request: pb.SolveRequest, context: grpc.aio.ServicerContext) -> None:
        try:
            validate(request, self.settings)
        except InvalidArgument as error:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))

    async def fail(self, context: grpc.aio.ServicerContext, error: Exception) -> None:
        if isinstance(error, StageError):
            log.warning("solve failed", extra={"code": error.code.name, "reason": error.message})
            await context.abort(error.code, error.message)
        log.exception("solve crashed")  # a bug, not bad input: the client still gets a clear status
        await context.abort(grpc.StatusCode.INTERNAL, f"internal error: {type(error).__name__}")
