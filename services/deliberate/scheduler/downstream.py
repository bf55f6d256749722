"""The Scheduler's calls to the Drafter, Verifier and Refiner: stubs, deadlines and status mapping.

Every call gets the time left of the client's deadline; a failed call becomes a `StageError` that names
the stage, which the edge answers with its status. Requests are built here from plain values, so the
pipeline never touches a downstream message type except the Draft, DraftVerdict and RefineFinal it reads.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass

import grpc
from google.protobuf import struct_pb2

from deliberate_api.common.v1 import common_pb2
from deliberate_api.drafter.v1 import drafter_service_pb2, drafter_service_pb2_grpc
from deliberate_api.refiner.v1 import refiner_service_pb2, refiner_service_pb2_grpc
from deliberate_api.verifier.v1 import verifier_service_pb2, verifier_service_pb2_grpc

from ..core.admission import retry_after_ms
from ..core.balancing import channel_options, grpc_target
from ..core.tls import aio_channel, channel_credentials
from .drafter_load import EngineReport
from .replicas import DrafterReplicas, engine_report
from .settings import SchedulerSettings
from .watchdog.watchdog import Watchdog

# Without a watchdog to ask, how long to pause before calling an unavailable Verifier again.
VERIFIER_RETRY_PAUSE_S = 0.5
# How long one load report may take; a Drafter slower than that to answer counts as a failed sample.
LOAD_TIMEOUT_S = 2.0


class StageError(Exception):
    """A stage failed; the edge answers with `code` and `message` (and a busy service's retry hint)."""

    def __init__(self, code: grpc.StatusCode, message: str, retry_after_ms: int | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.retry_after_ms = retry_after_ms


class Deadline:
    def __init__(self, seconds: float):
        self.expires = time.monotonic() + seconds

    def left(self) -> float:
        return self.expires - time.monotonic()

    def remaining(self, stage: str) -> float:
        left = self.left()
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
        if code == grpc.StatusCode.RESOURCE_EXHAUSTED:  # busy: the client may retry when the service says
            hint = retry_after_ms(error.trailing_metadata())
            raise StageError(code, f"{name} busy: {error.details()}", hint) from None
        raise StageError(code, f"{name} failed: {error.details()}") from None


@dataclass
class Stubs:
    drafter: drafter_service_pb2_grpc.DrafterServiceStub
    verifier: verifier_service_pb2_grpc.VerifierServiceStub
    refiner: refiner_service_pb2_grpc.RefinerServiceStub
    # The Drafter's replicas one by one, for spreading a round's drafts and failover (inactive for one host:port).
    drafter_replicas: DrafterReplicas

    @classmethod
    @asynccontextmanager
    async def open(cls, settings: SchedulerSettings) -> AsyncIterator[Stubs]:
        """Channels to the three services, closed on exit. Opened inside the running event loop, after the
        gRPC instrumentation is installed, so every call carries the trace."""
        credentials = channel_credentials(
            settings.downstream_tls_ca_file, settings.downstream_tls_cert_file, settings.downstream_tls_key_file
        )
        # Several replicas (a list, or a target such as dns:///drafter-headless:50052): round_robin with health
        # checking on the service's own name (core/balancing.py); one host:port connects as before. Calls to the
        # Drafter and Refiner, which a restart leaves unreachable for seconds, retry UNAVAILABLE (RETRY_POLICY);
        # the Verifier's have the watchdog and their own short timeouts.
        channels = [
            aio_channel(
                grpc_target(address),
                credentials,
                channel_options(address, module.DESCRIPTOR.services_by_name[name].full_name, retry=retry),
            )
            for address, module, name, retry in (
                (settings.drafter_address, drafter_service_pb2, "DrafterService", True),
                (settings.verifier_address, verifier_service_pb2, "VerifierService", False),
                (settings.refiner_address, refiner_service_pb2, "RefinerService", True),
            )
        ]
        replicas = DrafterReplicas(settings.drafter_address, credentials)
        try:
            yield cls(
                drafter_service_pb2_grpc.DrafterServiceStub(channels[0]),
                verifier_service_pb2_grpc.VerifierServiceStub(channels[1]),
                refiner_service_pb2_grpc.RefinerServiceStub(channels[2]),
                replicas,
            )
        finally:
            for channel in channels:
                await channel.close()
            await replicas.close()


@dataclass(frozen=True)
class Checks:
    """What the Verifier checks a request's drafts against (the same for every draft of the request)."""

    prompt: str
    output_schema: str
    constraints: Sequence[common_pb2.Constraint]
    context: struct_pb2.Struct


class Stream:
    """One bidirectional call: messages queued with `send` go out in order; `close` ends the sending side;
    `responses` reads the answers, a failed call becoming a StageError that names the service."""

    def __init__(self, service: str):
        self.service = service
        self.call = None
        self._outgoing: asyncio.Queue = asyncio.Queue()
        self.closed = False

    def send(self, message) -> None:
        if not self.closed:
            self._outgoing.put_nowait(message)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._outgoing.put_nowait(None)

    async def requests(self):
        while (message := await self._outgoing.get()) is not None:
            yield message

    async def responses(self):
        async with stage(self.service):
            async for message in self.call:
                yield message

    def cancel(self) -> None:
        if self.call is not None:
            self.call.cancel()


class Downstream:
    """One method per downstream call; each takes the request's Deadline."""

    def __init__(self, stubs: Stubs, settings: SchedulerSettings, watchdog: Watchdog | None = None):
        self.stubs = stubs
        self.settings = settings
        self.watchdog = watchdog

    @property
    def spreads_drafts(self) -> bool:
        """Whether a round's drafts are split over several Drafter replicas (a streamed round does that)."""
        return self.stubs.drafter_replicas.active

    async def check_constraints(
        self, checks: Checks, deadline: Deadline
    ) -> verifier_service_pb2.CheckConstraintsResponse:
        request = verifier_service_pb2.CheckConstraintsRequest(
            output_schema=checks.output_schema, constraints=checks.constraints, context=checks.context
        )
        return await self._call_verifier(
            self.stubs.verifier.CheckConstraints, request, deadline, "checking constraints"
        )

    async def generate_drafts(
        self, deadline: Deadline, request: drafter_service_pb2.GenerateDraftsRequest
    ) -> AsyncIterator[common_pb2.Draft]:
        """The drafts as the Drafter finishes them."""
        async with stage("drafter"):
            call = self.stubs.drafter.GenerateDrafts(request, timeout=deadline.remaining("drafting"))
            async for message in call:
                yield message.draft

    def stream_drafts(
        self,
        deadline: Deadline,
        request: drafter_service_pb2.GenerateDraftsRequest,
        stub: drafter_service_pb2_grpc.DrafterServiceStub | None = None,
    ) -> Stream:
        """A StreamDrafts call: `DraftDelta`s and finished `Draft`s; a `cancel` message stops one draft. The call
        ends after every draft has and the caller has closed its side (`close`). `stub`: one replica's (else the
        balanced channel picks)."""
        stream = Stream("drafter")
        stream.send(drafter_service_pb2.StreamDraftsRequest(generate=request))
        stub = stub or self.stubs.drafter
        stream.call = stub.StreamDrafts(stream.requests(), timeout=deadline.remaining("drafting"))
        return stream

    def verify_stream(self, request_id: str, checks: Checks, deadline: Deadline, computations: bool = False) -> Stream:
        """A VerifyStream call: send draft deltas and ends, read `VerifyStreamResponse`s; the verdicts of ended
        drafts list their computations when asked (for the consensus prefix)."""
        stream = Stream("verifier")
        start = verifier_service_pb2.VerifyStreamStart(
            request_id=request_id,
            prompt=checks.prompt,
            output_schema=checks.output_schema,
            constraints=checks.constraints,
            context=checks.context,
            report_computations=computations,
        )
        stream.send(verifier_service_pb2.VerifyStreamRequest(start=start))
        stream.call = self.stubs.verifier.VerifyStream(stream.requests(), timeout=deadline.remaining("verification"))
        return stream

    async def drafter_load(self) -> EngineReport:
        """The Drafter's engine load: the Scheduler's signal for N. With replicas, every replica is sampled (which
        also says which are ready for a round's drafts) and the load is theirs together."""
        replicas = self.stubs.drafter_replicas
        if replicas.active:
            reports = await replicas.refresh()
            if not reports:
                reasons = "; ".join(f"{r.address}: {r.reason}" for r in replicas.replicas.values()) or "none resolved"
                raise StageError(grpc.StatusCode.UNAVAILABLE, f"no drafter replica ready ({reasons})")
            return replicas.aggregate(reports)
        async with stage("drafter"):
            response = await self.stubs.drafter.GetLoad(drafter_service_pb2.GetLoadRequest(), timeout=LOAD_TIMEOUT_S)
        return engine_report(response)

    async def verify(
        self,
        request_id: str,
        draft: common_pb2.Draft,
        checks: Checks,
        deadline: Deadline,
        what: str,
        computations: bool = False,
    ) -> common_pb2.DraftVerdict:
        """One draft's verdict, within the per-draft verification timeout (`StageError` DEADLINE_EXCEEDED
        past it); with its computations when asked (for the consensus prefix)."""
        request = verifier_service_pb2.VerifyDraftsRequest(
            request_id=request_id,
            prompt=checks.prompt,
            drafts=[draft],
            output_schema=checks.output_schema,
            constraints=checks.constraints,
            context=checks.context,
            report_computations=computations,
        )
        response = await self._call_verifier(
            self.stubs.verifier.VerifyDrafts, request, deadline, what, self.settings.verify_timeout_s
        )
        return response.verdicts[0]

    async def refine(
        self, request: refiner_service_pb2.RefineRequest, deadline: Deadline
    ) -> AsyncIterator[str | refiner_service_pb2.RefineFinal]:
        """The Refiner's text chunks as they come, then its final message.

        The stream is read to its end, after the final message too: the gRPC instrumentation ends its client
        span only when the stream runs out, and a span never ended leaves the Refiner's span without a parent."""
        final = None
        async with stage("refiner"):
            call = self.stubs.refiner.Refine(request, timeout=deadline.remaining("refinement"))
            async for message in call:
                if message.HasField("chunk"):
                    yield message.chunk.text
                else:
                    final = message.final
        if final is None:
            raise StageError(grpc.StatusCode.INTERNAL, "refiner ended its stream without a final message")
        yield final

    async def _call_verifier(self, method, request, deadline: Deadline, what: str, timeout: float | None = None):
        """While the Verifier is down (the watchdog restarts it), wait for it up to the deadline; then
        UNAVAILABLE, shortly before the client's own deadline would hide the reason."""
        while True:
            left = deadline.remaining(what)
            try:
                async with stage("verifier"):
                    return await method(request, timeout=min(left, timeout or left))
            except StageError as error:
                if error.code != grpc.StatusCode.UNAVAILABLE:
                    raise
                wait = deadline.left() - self.settings.unavailable_margin_s
                if wait <= 0 or not await self._wait_for_verifier(wait):
                    raise StageError(error.code, f"{error.message} (waited until the deadline)") from None

    async def _wait_for_verifier(self, at_most_s: float) -> bool:
        if self.watchdog is not None:
            return await self.watchdog.wait_healthy(at_most_s)
        await asyncio.sleep(min(at_most_s, VERIFIER_RETRY_PAUSE_S))
        return at_most_s > VERIFIER_RETRY_PAUSE_S
