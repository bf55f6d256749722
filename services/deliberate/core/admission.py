"""What reaches a servicer: a request that parses, and a work call within the service's in-flight bound.

One server interceptor does both for every service (core/server.py installs it):

- Request bytes are parsed here, not by grpc: grpc answers bytes its deserializer rejects with UNKNOWN, this
  answers INVALID_ARGUMENT naming the message type. Methods whose requests stream (reflection, StreamDrafts,
  VerifyStream) are parsed by grpc as usual; a bidirectional work method (StreamDrafts) is still bounded.
- The work methods (Solve, GenerateDrafts, VerifyDrafts, Refine, …) share one bound on the calls in flight; a
  call beyond it is answered RESOURCE_EXHAUSTED at once (a bidirectional one once its opening message is read),
  never queued, with a retry hint in its trailing metadata: `retry-after-ms`, and the standard
  `google.rpc.RetryInfo` in `grpc-status-details-bin`. A stream counts until it ends, however it ends. Health,
  reflection and the cheap reads (GetLoad, GetState) are never bounded: a probe must see a busy service as
  serving.
- With `by_deadline` (the Scheduler's `--admit-by-deadline`), a work call whose deadline the calls in flight
  already make out of reach is refused the same way, at once, instead of being admitted to time out: its latency
  is estimated as (calls in flight + 1) × the recent work of one call alone (each finished call's duration over
  the calls it shared the service with: on a CPU they share the cores), and the hint is about when enough of
  them will have ended for the estimate to fit. An idle service admits every call, and so does one that has
  seen fewer than WARM_CALLS calls end.
- With `by_deadline` (the client-facing Scheduler), a caller that asks for one (`retry-ticket: new` in its
  invocation metadata) gets a retry ticket with a refusal (`retry-ticket` in the trailing metadata) that holds a
  place for it from its hint's time on, for as long again plus TICKET_GRACE_S: a call without that ticket counts the
  places due as calls in flight, so the slot a call frees goes to the caller told to come back, not to whoever
  arrives first (closed-loop clients took the freed slots: 2 of 264 retries admitted, docs/scaling.md). The retry
  sends the ticket back (`retry-ticket: <ticket>`) and takes its place; a ticket not used in time lapses. Opt-in,
  so a caller that would retry without its ticket never holds a place against itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import secrets
import time
from collections import Counter
from collections.abc import Callable, Collection
from contextlib import AbstractContextManager, contextmanager, nullcontext

import grpc
from google.protobuf import duration_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2

from . import metrics

RETRY_AFTER_KEY = "retry-after-ms"
STATUS_DETAILS_KEY = "grpc-status-details-bin"
# The retry hint: about the time until a slot frees (the recent call duration over the bound), within these.
MIN_RETRY_AFTER_MS = 50
MAX_RETRY_AFTER_MS = 10_000
# The hint before any work call finished, and how much each finished call moves the average duration.
INITIAL_CALL_S = 1.0
DURATION_SMOOTHING = 0.2
# Calls that must have ended before the work estimate refuses anything (--admit-by-deadline).
WARM_CALLS = 3
# Retry tickets: the metadata key, how long past its hint a place is held, how many places at most.
TICKET_KEY = "retry-ticket"
TICKET_WANTED = "new"  # the value that asks for a ticket with a refusal
TICKET_GRACE_S = 1.0
MAX_TICKETS = 1024
# How long a refused bidirectional call waits for its caller's opening message before the refusal (see
# `read_opening_message`).
OPENING_MESSAGE_WAIT_S = 0.5


class Rejected(Exception):
    """The bound is reached (`reason` "bound") or the deadline out of reach ("deadline"); `retry_after_ms` is the
    hint sent to the client, `ticket` the place held for its retry."""

    def __init__(self, message: str, retry_after_ms: int, reason: str = "bound", ticket: str = ""):
        super().__init__(message)
        self.retry_after_ms = retry_after_ms
        self.reason = reason
        self.ticket = ticket


class InFlightLimit:
    """Counts the work calls in flight, by method, against one bound shared by the service's work methods.

    Used from the server's event loop only; the metrics scrape (another thread) only reads the counts."""

    def __init__(self, bound: int, setting: str, by_deadline: bool = False):
        if bound < 1:
            raise ValueError(f"{setting} must be at least 1, got {bound}")
        self.bound = bound
        self.setting = setting
        self.by_deadline = by_deadline
        self.in_flight: Counter[str] = Counter()
        self.rejected: Counter[str] = Counter()
        self.mean_call_s = INITIAL_CALL_S
        self.mean_work_s = INITIAL_CALL_S  # one call's duration alone: its duration over the calls it shared with
        self.ended = 0
        self.tickets: dict[str, tuple[float, float]] = {}  # ticket → (due, lapses), monotonic seconds

    @property
    def total(self) -> int:
        return sum(self.in_flight.values())

    def places_due(self, now: float, own: str = "") -> int:
        """Places held for refused callers whose hint has come (lapsed ones dropped), the caller's own aside."""
        self.tickets = {t: (due, lapses) for t, (due, lapses) in self.tickets.items() if lapses > now}
        return sum(1 for t, (due, _) in self.tickets.items() if due <= now and t != own)

    def issue_ticket(self, retry_after_ms: int, now: float) -> str:
        """A place held from the hint's time on, for as long again plus TICKET_GRACE_S."""
        if len(self.tickets) >= MAX_TICKETS:
            return ""
        ticket = secrets.token_hex(8)
        wait_s = retry_after_ms / 1000
        self.tickets[ticket] = (now + wait_s, now + 2 * wait_s + TICKET_GRACE_S)
        return ticket

    def retry_after_ms(self) -> int:
        """About when one of the calls in flight ends, if they end evenly spread over a call's duration."""
        estimate = round(1000 * self.mean_call_s / self.bound)
        return max(MIN_RETRY_AFTER_MS, min(MAX_RETRY_AFTER_MS, estimate))

    def estimated_s(self, ahead: int | None = None) -> float:
        """A new call's latency if admitted now: it shares the service with the `ahead` calls (those in flight)."""
        return ((self.total if ahead is None else ahead) + 1) * self.mean_work_s

    def deadline_retry_after_ms(self, time_left_s: float, ahead: int | None = None) -> int:
        """About when enough of the `ahead` calls will have ended (one per `mean_work_s`) for a call with
        `time_left_s` to fit."""
        may_share_with = max(0, int(time_left_s / self.mean_work_s) - 1)
        estimate = round(1000 * ((self.total if ahead is None else ahead) - may_share_with) * self.mean_work_s)
        return max(MIN_RETRY_AFTER_MS, min(MAX_RETRY_AFTER_MS, estimate))

    def refusal(self, time_left_s: float | None, ticket: str = "", now: float | None = None) -> Rejected | None:
        """Why a call may not start now, or None. The places due to refused callers count as calls ahead of it,
        unless `ticket` is its own."""
        now = time.monotonic() if now is None else now
        ahead = self.total + self.places_due(now, own=ticket if ticket in self.tickets else "")
        if ahead >= self.bound:
            held = f" and {ahead - self.total} places held for retries" if ahead > self.total else ""
            message = f"{self.total} of {self.bound} calls in flight{held} ({self.setting}); retry later"
            return Rejected(message, self.retry_after_ms(), reason="bound")
        if not self.by_deadline or time_left_s is None or not ahead or self.ended < WARM_CALLS:
            return None
        if self.estimated_s(ahead) <= time_left_s:
            return None
        message = (
            f"the deadline cannot be met: {time_left_s:.1f} s left, and with {ahead} calls in flight or due of about "
            f"{self.mean_work_s:.1f} s of work each this one would take about {self.estimated_s(ahead):.1f} s "
            "(--admit-by-deadline); retry later"
        )
        return Rejected(message, self.deadline_retry_after_ms(time_left_s, ahead), reason="deadline")

    @contextmanager
    def admit(self, method: str, time_left_s: float | None = None, ticket: str = ""):
        """Holds one slot for the block (raises `Rejected` when none is free, or, `by_deadline`, when the call cannot
        end within `time_left_s`); released however it ends. `ticket`: TICKET_WANTED to get a ticket with a refusal,
        or the one a refusal gave this caller, which its place honours once (a refusal then gives a new one)."""
        now = time.monotonic()
        refused = self.refusal(time_left_s, ticket, now)
        if refused is not None:
            self.rejected[method] += 1
            metrics.REJECTED_CALLS.add(1, {"method": method, "reason": refused.reason})
            self.tickets.pop(ticket, None)
            if self.by_deadline and ticket:
                refused.ticket = self.issue_ticket(refused.retry_after_ms, now)
            raise refused
        self.tickets.pop(ticket, None)
        self.in_flight[method] += 1
        metrics.ADMITTED_CALLS.add(1, {"method": method})
        sharing_at_start, started = self.total, time.monotonic()
        try:
            yield
        finally:
            self.ended_call(time.monotonic() - started, (sharing_at_start + self.total) / 2)
            self.in_flight[method] -= 1

    def ended_call(self, elapsed_s: float, sharing: float) -> None:
        """Moves the averages by one ended call that shared the service with `sharing` calls (itself included)."""
        self.ended += 1
        self.mean_call_s += DURATION_SMOOTHING * (elapsed_s - self.mean_call_s)
        self.mean_work_s += DURATION_SMOOTHING * (elapsed_s / max(1.0, sharing) - self.mean_work_s)


def retry_metadata(
    code: grpc.StatusCode, message: str, retry_after_ms: int, ticket: str = ""
) -> tuple[tuple[str, str | bytes], ...]:
    """Trailing metadata carrying the retry hint, plain and as google.rpc.RetryInfo (what grpcio-status reads), and
    the retry's ticket where one was issued."""
    delay = duration_pb2.Duration()
    delay.FromMilliseconds(retry_after_ms)
    status = status_pb2.Status(code=getattr(code_pb2, code.name), message=message)
    status.details.add().Pack(error_details_pb2.RetryInfo(retry_delay=delay))
    ticket_entry = ((TICKET_KEY, ticket),) if ticket else ()
    return ((RETRY_AFTER_KEY, str(retry_after_ms)), (STATUS_DETAILS_KEY, status.SerializeToString()), *ticket_entry)


def retry_ticket(metadata) -> str:
    """The `retry-ticket` in a call's metadata (a refusal's trailing metadata, or a retry's invocation metadata);
    "" when none."""
    return next((str(value) for key, value in metadata or () if key == TICKET_KEY), "")


def retry_after_ms(metadata) -> int | None:
    """The `retry-after-ms` hint in a call's trailing metadata, if any."""
    for key, value in metadata or ():
        if key == RETRY_AFTER_KEY:
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def reject(context: grpc.aio.ServicerContext, rejected: Rejected) -> None:
    code = grpc.StatusCode.RESOURCE_EXHAUSTED
    message = str(rejected)
    metadata = retry_metadata(code, message, rejected.retry_after_ms, rejected.ticket)
    await context.abort(code, message, trailing_metadata=metadata)


async def parse(raw: bytes, deserialize: Callable[[bytes], object], name: str, context) -> object:
    try:
        return deserialize(raw)
    except Exception as error:  # protobuf's DecodeError, or whatever a custom deserializer raises
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"request: not a valid {name} ({error})")


def message_name(deserialize: Callable[[bytes], object]) -> str:
    """`deliberate.scheduler.v1.SolveRequest` for a generated `SolveRequest.FromString`."""
    owner = getattr(deserialize, "__self__", None)
    descriptor = getattr(owner, "DESCRIPTOR", None)
    return descriptor.full_name if descriptor is not None else "request message"


class Admission(grpc.aio.ServerInterceptor):
    """Parses every unary request itself and bounds the `work_methods` (full names, `/package.Service/Method`)."""

    def __init__(self, limit: InFlightLimit, work_methods: Collection[str]):
        self.limit = limit
        self.work_methods = frozenset(work_methods)
        for method in self.work_methods:  # each at 0 on /metrics before its first call
            limit.in_flight[short_name(method)] = 0

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is not None and handler.request_streaming and method in self.work_methods:
            return bound_stream(handler, self.limit, short_name(method))
        if handler is None or handler.request_streaming or handler.request_deserializer is None:
            return handler
        bounded = method in self.work_methods
        return wrap(handler, self.limit if bounded else None, short_name(method))


def short_name(method: str) -> str:
    """`Solve` for `/deliberate.scheduler.v1.SchedulerService/Solve`: the metrics' `method` label."""
    return method.rsplit("/", 1)[-1]


def slot(limit: InFlightLimit | None, method: str, context) -> AbstractContextManager:
    if limit is None:
        return nullcontext()
    return limit.admit(method, context.time_remaining(), retry_ticket(context.invocation_metadata()))


def wrap(handler: grpc.RpcMethodHandler, limit: InFlightLimit | None, method: str) -> grpc.RpcMethodHandler:
    """The same handler, receiving raw bytes: it parses them, then (when `limit`) takes a slot for the call."""
    deserialize = handler.request_deserializer
    name = message_name(deserialize)
    behavior: Callable = handler.unary_unary or handler.unary_stream
    serializer = handler.response_serializer

    if inspect.isasyncgenfunction(behavior):  # a stream of responses: counted until the generator ends

        async def streaming(raw: bytes, context):
            request = await parse(raw, deserialize, name, context)
            try:
                with slot(limit, method, context):
                    async for response in behavior(request, context):
                        yield response
            except Rejected as rejected:
                await reject(context, rejected)

        return grpc.unary_stream_rpc_method_handler(streaming, response_serializer=serializer)

    if not inspect.iscoroutinefunction(behavior):
        return handler  # a synchronous handler: none on these servers

    async def awaited(raw: bytes, context):
        request = await parse(raw, deserialize, name, context)
        try:
            with slot(limit, method, context):
                return await behavior(request, context)
        except Rejected as rejected:
            await reject(context, rejected)

    make: Callable[..., grpc.RpcMethodHandler] = (
        grpc.unary_unary_rpc_method_handler if handler.unary_unary else grpc.unary_stream_rpc_method_handler
    )
    return make(awaited, response_serializer=serializer)


def bound_stream(handler: grpc.RpcMethodHandler, limit: InFlightLimit, method: str) -> grpc.RpcMethodHandler:
    """A bidirectional work method: it takes a slot for the call until its responses end; grpc parses its
    messages."""
    behavior = handler.stream_stream

    async def streaming(request_iterator, context):
        try:
            with slot(limit, method, context):
                async for response in behavior(request_iterator, context):
                    yield response
        except Rejected as rejected:
            await read_opening_message(request_iterator)
            await reject(context, rejected)

    return grpc.stream_stream_rpc_method_handler(
        streaming, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer
    )


async def read_opening_message(request_iterator) -> None:
    """Reads a refused call's first message (waiting at most OPENING_MESSAGE_WAIT_S) so the caller's write of it
    has completed when the call ends: grpc.aio's client turns a write that the call's end overtakes into INTERNAL
    "Internal error from Core", which would hide the refusal (a solve failed so in CI)."""
    with contextlib.suppress(Exception):
        async with asyncio.timeout(OPENING_MESSAGE_WAIT_S):
            await anext(aiter(request_iterator))
