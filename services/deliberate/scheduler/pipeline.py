"""The staged solve: draft → verify (overlapped with drafting) → select → refine.

Every hop gets the time left of the client's deadline. Each draft is one span, `deliberate.draft`,
opened when the draft arrives and ended when it is selected or discarded; the Verifier's span for the
draft is its child.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import grpc
from opentelemetry import trace
from opentelemetry.trace import Span

from deliberate.common.v1 import common_pb2
from deliberate.drafter.v1 import drafter_service_pb2, drafter_service_pb2_grpc
from deliberate.refiner.v1 import refiner_service_pb2, refiner_service_pb2_grpc
from deliberate.scheduler.v1 import scheduler_service_pb2 as pb
from deliberate.verifier.v1 import verifier_service_pb2, verifier_service_pb2_grpc

from ..core import telemetry
from ..core.convert import duration
from .selection import Scored, Selection, select
from .settings import SchedulerSettings

tracer = trace.get_tracer("deliberate.scheduler")

Emit = Callable[[pb.SolveStreamResponse], None]


class StageError(Exception):
    """A stage failed; the edge answers with `code` and `message`."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class Deadline:
    def __init__(self, seconds: float):
        self.expires = time.monotonic() + seconds

    def remaining(self, stage: str) -> float:
        left = self.expires - time.monotonic()
        if left <= 0:
            raise StageError(grpc.StatusCode.DEADLINE_EXCEEDED, f"deadline exceeded before {stage}")
        return left


@asynccontextmanager
async def stage(name: str):
    """Turns a failed downstream call into a StageError that names the stage."""
    try:
        yield
    except grpc.aio.AioRpcError as error:
        code = error.code()
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            raise StageError(code, f"deadline exceeded during {name}") from None
        if code == grpc.StatusCode.INVALID_ARGUMENT:  # names the request's field; pass it on as it is
            raise StageError(code, error.details()) from None
        if code == grpc.StatusCode.UNAVAILABLE:
            raise StageError(code, f"{name} unavailable: {error.details()}") from None
        raise StageError(code, f"{name} failed: {error.details()}") from None


@dataclass
class Stubs:
    drafter: drafter_service_pb2_grpc.DrafterServiceStub
    verifier: verifier_service_pb2_grpc.VerifierServiceStub
    refiner: refiner_service_pb2_grpc.RefinerServiceStub

    @classmethod
    def connect(cls, settings: SchedulerSettings) -> Stubs:
        return cls(
            drafter_service_pb2_grpc.DrafterServiceStub(grpc.aio.insecure_channel(settings.drafter_address)),
            verifier_service_pb2_grpc.VerifierServiceStub(grpc.aio.insecure_channel(settings.verifier_address)),
            refiner_service_pb2_grpc.RefinerServiceStub(grpc.aio.insecure_channel(settings.refiner_address)),
        )


@dataclass
class DraftState:
    report: pb.DraftReport
    span: Span
    verification: asyncio.Task | None = None


@dataclass
class Solve:
    """The state of one request as it moves through the stages."""

    request: pb.SolveRequest
    request_id: str
    deadline: Deadline
    emit: Emit
    drafts: dict[str, DraftState] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    def reports(self) -> list[pb.DraftReport]:
        return [state.report for state in self.drafts.values()]


class Pipeline:
    def __init__(self, settings: SchedulerSettings, stubs: Stubs):
        self.settings = settings
        self.stubs = stubs

    async def solve(self, request: pb.SolveRequest, deadline_s: float, emit: Emit) -> pb.SolveResponse:
        solve = Solve(request, request.request_id or uuid.uuid4().hex[:16], Deadline(deadline_s), emit)
        span = trace.get_current_span()
        span.set_attribute(telemetry.REQUEST_ID, solve.request_id)
        started = time.perf_counter()
        try:
            await self.check_constraints(solve)
            await self.draft_and_verify(solve)
            response = await self.select_and_refine(solve)
        finally:
            for state in solve.drafts.values():  # a failed stage leaves drafts unfinished
                if state.verification:
                    state.verification.cancel()
                if state.span.is_recording():
                    state.span.set_attribute(telemetry.DRAFT_OUTCOME, "abandoned")
                    state.span.end()
        solve.timings["total"] = time.perf_counter() - started
        response.timings.CopyFrom(pb.StageTimings(**{k: duration(v) for k, v in solve.timings.items()}))
        response.trace_id = telemetry.current_trace_id()
        span.set_attribute(telemetry.SOLVE_STATUS, pb.SolveStatus.Name(response.status))
        return response

    async def check_constraints(self, solve: Solve) -> None:
        """A constraint that does not compile is refused before any token is generated."""
        request = solve.request
        if not (request.constraints or request.output_schema):
            return
        async with stage("verifier"):
            await self.stubs.verifier.CheckConstraints(
                verifier_service_pb2.CheckConstraintsRequest(
                    output_schema=request.output_schema, constraints=request.constraints, context=request.context
                ),
                timeout=solve.deadline.remaining("checking constraints"),
            )

    async def draft_and_verify(self, solve: Solve) -> None:
        """Verification of each draft starts as soon as it arrives, while the others are still generated."""
        request = solve.request
        num_drafts = request.num_drafts or self.settings.default_num_drafts
        trace.get_current_span().set_attribute(telemetry.NUM_DRAFTS, num_drafts)
        started = time.perf_counter()
        async with stage("drafter"):
            call = self.stubs.drafter.GenerateDrafts(
                drafter_service_pb2.GenerateDraftsRequest(
                    request_id=solve.request_id,
                    prompt=request.prompt,
                    num_drafts=num_drafts,
                    strategies=request.strategy_hints,
                    sampling=request.sampling,
                    output_schema=request.output_schema,
                ),
                timeout=solve.deadline.remaining("drafting"),
            )
            async for message in call:
                self.accept_draft(solve, message.draft)
        drafted = time.perf_counter()
        solve.timings["draft"] = drafted - started
        verifications = [state.verification for state in solve.drafts.values()]
        async with stage("verifier"):
            await asyncio.gather(*verifications)
        solve.timings["verify"] = time.perf_counter() - drafted

    def accept_draft(self, solve: Solve, draft: common_pb2.Draft) -> None:
        span = tracer.start_span(
            "deliberate.draft",
            attributes={
                telemetry.REQUEST_ID: solve.request_id,
                telemetry.DRAFT_ID: draft.id,
                telemetry.DRAFT_INDEX: draft.index,
                telemetry.DRAFT_STRATEGY: draft.strategy,
                telemetry.DRAFT_TOKENS: draft.usage.completion_tokens,
            },
        )
        span.add_event("generated")
        state = DraftState(pb.DraftReport(draft=draft), span)
        solve.drafts[draft.id] = state
        solve.emit(pb.SolveStreamResponse(draft_generated=pb.DraftGenerated(draft=draft)))
        with trace.use_span(span, end_on_exit=False):  # the Verifier's span becomes the draft's child
            state.verification = asyncio.ensure_future(self.verify(solve, state))

    async def verify(self, solve: Solve, state: DraftState) -> None:
        request = solve.request
        response = await self.stubs.verifier.VerifyDrafts(
            verifier_service_pb2.VerifyDraftsRequest(
                request_id=solve.request_id,
                prompt=request.prompt,
                drafts=[state.report.draft],
                output_schema=request.output_schema,
                constraints=request.constraints,
                context=request.context,
            ),
            timeout=solve.deadline.remaining("verification"),
        )
        verdict = response.verdicts[0]
        state.report.verdict.CopyFrom(verdict)
        state.span.add_event("verified")
        state.span.set_attributes({telemetry.DRAFT_VALID: verdict.valid, telemetry.DRAFT_SCORE: verdict.score})
        solve.emit(pb.SolveStreamResponse(draft_verified=pb.DraftVerified(verdict=verdict)))

    async def select_and_refine(self, solve: Solve) -> pb.SolveResponse:
        started = time.perf_counter()
        if not solve.drafts:
            return pb.SolveResponse(
                request_id=solve.request_id,
                status=pb.SOLVE_STATUS_FAILED,
                status_reason="the drafter returned no drafts",
            )
        selection = select(
            [
                Scored(s.report.draft.id, s.report.draft.index, s.report.verdict.valid, s.report.verdict.score)
                for s in solve.drafts.values()
            ],
            self.settings.max_selected,
        )
        self.announce(solve, selection)
        solve.timings["select"] = time.perf_counter() - started

        started = time.perf_counter()
        refined = await self.refine(solve, selection)
        solve.timings["refine"] = time.perf_counter() - started

        usage = common_pb2.TokenUsage(
            prompt_tokens=sum(r.draft.usage.prompt_tokens for r in solve.reports()) + refined.usage.prompt_tokens,
            completion_tokens=sum(r.draft.usage.completion_tokens for r in solve.reports())
            + refined.usage.completion_tokens,
        )
        return pb.SolveResponse(
            request_id=solve.request_id,
            answer=refined.text,
            status=pb.SOLVE_STATUS_VERIFIED if selection.status == "verified" else pb.SOLVE_STATUS_UNVERIFIED,
            status_reason=selection.reason,
            drafts=solve.reports(),
            selected_draft_ids=[d.draft_id for d in selection.selected],
            thinking_trace=refined.thinking_trace,
            usage=usage,
        )

    def announce(self, solve: Solve, selection: Selection) -> None:
        ranks = {d.draft_id: rank for rank, d in enumerate(selection.selected)}
        for draft_id, state in solve.drafts.items():
            verdict = state.report.verdict
            if draft_id in ranks:
                state.report.selected = True
                event = pb.SolveStreamResponse(
                    draft_selected=pb.DraftSelected(draft_id=draft_id, rank=ranks[draft_id], score=verdict.score)
                )
                outcome = "selected"
            else:
                reason = "failed a hard rule" if not verdict.valid else "outscored by the selected drafts"
                event = pb.SolveStreamResponse(draft_discarded=pb.DraftDiscarded(draft_id=draft_id, reason=reason))
                outcome = "discarded"
            state.span.set_attribute(telemetry.DRAFT_OUTCOME, outcome)
            state.span.add_event(outcome)
            state.span.end()
            solve.emit(event)

    async def refine(self, solve: Solve, selection: Selection) -> refiner_service_pb2.RefineFinal:
        request = solve.request
        selected = [solve.drafts[d.draft_id].report for d in selection.selected]
        async with stage("refiner"):
            call = self.stubs.refiner.Refine(
                refiner_service_pb2.RefineRequest(
                    request_id=solve.request_id,
                    prompt=request.prompt,
                    selected=[refiner_service_pb2.VerifiedDraft(draft=r.draft, verdict=r.verdict) for r in selected],
                    all_drafts=[r.draft for r in solve.reports()],
                    sampling=request.refine_sampling,
                    output_schema=request.output_schema,
                    disable_thinking_trace=request.disable_thinking_trace,
                ),
                timeout=solve.deadline.remaining("refinement"),
            )
            async for message in call:
                if message.HasField("chunk"):
                    solve.emit(pb.SolveStreamResponse(refine_chunk=pb.RefineChunk(text=message.chunk.text)))
                else:
                    return message.final
        raise StageError(grpc.StatusCode.INTERNAL, "refiner ended its stream without a final message")
