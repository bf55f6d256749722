"""gRPC edge of the Scheduler: validates the client's request, runs the pipeline, maps failures to statuses."""

from __future__ import annotations

import asyncio
import logging

import grpc

from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb
from deliberate_api.scheduler.v1 import scheduler_service_pb2_grpc

from ..core import metrics
from ..core.admission import retry_metadata
from ..core.requests import InvalidArgument, parse_output_schema
from .downstream import StageError
from .learning.weight_store import StateUnavailable
from .limits import SOLVE
from .pipeline import Pipeline
from .settings import SchedulerSettings

log = logging.getLogger("deliberate.scheduler")


def validate(request: pb.SolveRequest, settings: SchedulerSettings) -> None:
    """Checks every documented limit before any stage runs; the error names the field."""
    SOLVE.check(request, settings)
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
            return await self.pipeline.solve(request, self.deadline_s(context), emit=None)
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

    async def SubmitFeedback(self, request, context):  # noqa: N802 (gRPC naming)
        if not request.request_id:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "request_id: must not be empty")
        if request.outcome not in (pb.OUTCOME_ACCEPTED, pb.OUTCOME_REJECTED):
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT, "outcome: must be OUTCOME_ACCEPTED or OUTCOME_REJECTED"
            )
        try:
            submitted = await self.pipeline.state_store.submit(
                request.request_id, accepted=request.outcome == pb.OUTCOME_ACCEPTED
            )
        except StateUnavailable as error:
            await context.abort(grpc.StatusCode.UNAVAILABLE, f"feedback not recorded: {error}")
        if not submitted.found:
            await context.abort(
                grpc.StatusCode.NOT_FOUND,
                f"request_id: no decision awaiting feedback for {request.request_id!r} "
                "(unknown, expired, or already given)",
            )
        return pb.SubmitFeedbackResponse(outcomes_until_refit=submitted.outcomes_until_refit)

    async def GetState(self, request, context):  # noqa: N802 (gRPC naming)
        pipeline = self.pipeline
        decision = pipeline.draft_count(0)
        learned = await pipeline.state_store.snapshot()
        counters = learned["counters"]
        weights = pipeline.state_store.weights_for_load(decision.utilization)
        state = pb.GetStateResponse(
            weights=pb.SelectionWeights(
                alpha=weights.alpha,
                beta=weights.beta,
                gamma=weights.gamma,
                delta=weights.delta,
                weights=weights.vector(),
            ),
            selection_policy=pipeline.settings.selection_policy,
            num_drafts=decision.num_drafts,
            num_drafts_reason=decision.reason,
            utilization=decision.utilization,
            utilization_source=pipeline.workload.snapshot()["source"] if pipeline.workload else "",
            feedback=pb.FeedbackCounts(
                submitted=counters["submitted"],
                accepted=counters["accepted"],
                rejected=counters["rejected"],
                unknown_request=counters["unknown_request"],
                refits=counters["refits"],
                pending_decisions=learned["pending"],
            ),
        )
        watchdog = pipeline.watchdog
        if watchdog is not None:
            state.verifier.healthy = watchdog.healthy
            state.verifier.consecutive_failures = watchdog.consecutive_failures
            state.verifier.restarts = watchdog.restarts
            state.verifier.restarter = watchdog.restarter.name
            state.verifier.watchdog_role = "acting" if watchdog.acting else "observing"
            if watchdog.last_restart_at:
                state.verifier.last_restart_time.FromSeconds(int(watchdog.last_restart_at))
        return state

    async def check(self, request: pb.SolveRequest, context: grpc.aio.ServicerContext) -> None:
        try:
            validate(request, self.settings)
        except InvalidArgument as error:
            metrics.SOLVES.add(1, {"status": "invalid_argument"})
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))

    async def fail(self, context: grpc.aio.ServicerContext, error: Exception) -> None:
        if isinstance(error, StageError):
            log.warning("solve failed", extra={"code": error.code.name, "reason": error.message})
            hint = error.retry_after_ms
            trailing = () if hint is None else retry_metadata(error.code, error.message, hint)
            await context.abort(error.code, error.message, trailing_metadata=trailing)
        log.exception("solve crashed")  # a bug, not bad input: the client still gets a clear status
        await context.abort(grpc.StatusCode.INTERNAL, f"internal error: {type(error).__name__}")
