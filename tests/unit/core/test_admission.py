"""The admission interceptor on a real in-process grpc.aio server: the in-flight bound (unary calls and streams,
released however a call ends), the retry hint, and undecodable request bytes as INVALID_ARGUMENT."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from google.protobuf import wrappers_pb2
from google.rpc import error_details_pb2, status_pb2

from deliberate.core.admission import (
    MAX_RETRY_AFTER_MS,
    MIN_RETRY_AFTER_MS,
    OPENING_MESSAGE_WAIT_S,
    RETRY_AFTER_KEY,
    STATUS_DETAILS_KEY,
    TICKET_GRACE_S,
    TICKET_KEY,
    TICKET_WANTED,
    WARM_CALLS,
    Admission,
    InFlightLimit,
    Rejected,
    read_opening_message,
    retry_after_ms,
    retry_ticket,
)

SERVICE = "test.Work"
BOUND = 2


class Work:
    """Calls that hold their slot until `release` is set; `Fail` fails, `Cheap` is not a work method."""

    def __init__(self):
        self.release = asyncio.Event()

    async def Hold(self, request, context):  # noqa: N802 (gRPC naming)
        await self.release.wait()
        return wrappers_pb2.StringValue(value=request.value)

    async def Stream(self, request, context):  # noqa: N802 (gRPC naming)
        yield wrappers_pb2.StringValue(value="first")
        await self.release.wait()
        yield wrappers_pb2.StringValue(value="last")

    async def Fail(self, request, context):  # noqa: N802 (gRPC naming)
        raise RuntimeError("a bug")

    async def Cheap(self, request, context):  # noqa: N802 (gRPC naming)
        return wrappers_pb2.StringValue(value="cheap")

    async def Echo(self, request_iterator, context):  # noqa: N802 (gRPC naming)
        async for request in request_iterator:
            yield request


class Running:
    def __init__(self, server: grpc.aio.Server, channel: grpc.aio.Channel, limit: InFlightLimit, work: Work):
        self.server, self.channel, self.limit, self.work = server, channel, limit, work

    def unary(self, method: str):
        return self.channel.unary_unary(
            f"/{SERVICE}/{method}",
            request_serializer=wrappers_pb2.StringValue.SerializeToString,
            response_deserializer=wrappers_pb2.StringValue.FromString,
        )

    def stream(self, method: str):
        return self.channel.unary_stream(
            f"/{SERVICE}/{method}",
            request_serializer=wrappers_pb2.StringValue.SerializeToString,
            response_deserializer=wrappers_pb2.StringValue.FromString,
        )

    def echo(self):
        return self.channel.stream_stream(
            f"/{SERVICE}/Echo",
            request_serializer=wrappers_pb2.StringValue.SerializeToString,
            response_deserializer=wrappers_pb2.StringValue.FromString,
        )

    async def until_in_flight(self, count: int) -> None:
        async with asyncio.timeout(5):
            while self.limit.total != count:
                await asyncio.sleep(0.01)


async def hold_every_slot(echo) -> list:
    """BOUND echo calls, each answered once: every slot is held until they end."""
    held = [echo() for _ in range(BOUND)]
    for i, call in enumerate(held):
        await call.write(wrappers_pb2.StringValue(value=str(i)))
        assert (await call.read()).value == str(i)
    return held


def handler(behavior, streaming: bool) -> grpc.RpcMethodHandler:
    make = grpc.unary_stream_rpc_method_handler if streaming else grpc.unary_unary_rpc_method_handler
    return make(
        behavior,
        request_deserializer=wrappers_pb2.StringValue.FromString,
        response_serializer=wrappers_pb2.StringValue.SerializeToString,
    )


async def running() -> Running:
    work = Work()
    limit = InFlightLimit(BOUND, "--max-in-flight")
    work_methods = [f"/{SERVICE}/{name}" for name in ("Hold", "Stream", "Fail", "Echo")]
    server = grpc.aio.server(interceptors=[Admission(limit, work_methods)])
    handlers = {
        "Hold": handler(work.Hold, False),
        "Stream": handler(work.Stream, True),
        "Fail": handler(work.Fail, False),
        "Cheap": handler(work.Cheap, False),
        "Echo": grpc.stream_stream_rpc_method_handler(
            work.Echo,
            request_deserializer=wrappers_pb2.StringValue.FromString,
            response_serializer=wrappers_pb2.StringValue.SerializeToString,
        ),
    }
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, handlers)])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return Running(server, grpc.aio.insecure_channel(f"127.0.0.1:{port}"), limit, work)


def serve(test):
    async def main():
        service = await running()
        try:
            await test(service)
        finally:
            await service.channel.close()
            await service.server.stop(None)

    asyncio.run(main())


def test_a_call_beyond_the_bound_is_refused_at_once_with_a_retry_hint():
    async def test(service: Running):
        held = [asyncio.ensure_future(service.unary("Hold")(wrappers_pb2.StringValue(value=str(i)))) for i in range(2)]
        await service.until_in_flight(BOUND)

        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await asyncio.wait_for(service.unary("Hold")(wrappers_pb2.StringValue()), timeout=2)
        error = refused.value
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert error.details() == "2 of 2 calls in flight (--max-in-flight); retry later"
        hint = retry_after_ms(error.trailing_metadata())
        assert MIN_RETRY_AFTER_MS <= hint <= MAX_RETRY_AFTER_MS
        details = dict(error.trailing_metadata())[STATUS_DETAILS_KEY]
        status = status_pb2.Status.FromString(details)
        retry_info = error_details_pb2.RetryInfo()
        assert status.code == grpc.StatusCode.RESOURCE_EXHAUSTED.value[0] and status.details[0].Unpack(retry_info)
        assert retry_info.retry_delay.ToMilliseconds() == hint
        assert service.limit.rejected == {"Hold": 1}

        assert (await service.unary("Cheap")(wrappers_pb2.StringValue())).value == "cheap"  # never bounded
        service.work.release.set()
        assert [reply.value for reply in await asyncio.gather(*held)] == ["0", "1"]
        await service.until_in_flight(0)
        assert (await service.unary("Hold")(wrappers_pb2.StringValue(value="again"))).value == "again"

    serve(test)


def test_a_stream_holds_its_slot_until_it_ends_and_a_cancel_frees_it():
    async def test(service: Running):
        streams = [service.stream("Stream")(wrappers_pb2.StringValue()) for _ in range(BOUND)]
        for stream in streams:
            assert (await stream.read()).value == "first"
        assert service.limit.total == BOUND  # still open after their first message

        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await service.unary("Hold")(wrappers_pb2.StringValue())
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED

        streams[0].cancel()
        await service.until_in_flight(BOUND - 1)
        service.work.release.set()
        assert (await streams[1].read()).value == "last"
        assert await streams[1].read() is grpc.aio.EOF
        await service.until_in_flight(0)

    serve(test)


def test_a_failing_call_releases_its_slot():
    async def test(service: Running):
        for _ in range(BOUND + 1):  # more failures than slots: each gave its slot back
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                await service.unary("Fail")(wrappers_pb2.StringValue())
            assert failed.value.code() == grpc.StatusCode.UNKNOWN
        assert service.limit.total == 0 and not service.limit.rejected

    serve(test)


def test_undecodable_bytes_are_invalid_argument_naming_the_message():
    async def test(service: Running):
        for method in ("Hold", "Cheap"):  # bounded or not
            raw = service.channel.unary_unary(f"/{SERVICE}/{method}")  # bytes as they are
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await raw(b"\xff\xff\xff")
            assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert refused.value.details().startswith("request: not a valid google.protobuf.StringValue (")
        assert service.limit.total == 0

    serve(test)


def test_the_retry_hint_follows_the_recent_call_duration():
    limit = InFlightLimit(4, "--max-in-flight")
    assert limit.retry_after_ms() == 250  # 1 s per call before any ended, over 4 slots
    limit.mean_call_s = 0.01
    assert limit.retry_after_ms() == MIN_RETRY_AFTER_MS
    limit.mean_call_s = 1000
    assert limit.retry_after_ms() == MAX_RETRY_AFTER_MS
    assert retry_after_ms([(RETRY_AFTER_KEY, "120")]) == 120 and retry_after_ms([]) is None
    with pytest.raises(ValueError, match="--max-in-flight must be at least 1"):
        InFlightLimit(0, "--max-in-flight")


def warm_deadline_limit(work_s: float, in_flight: int) -> InFlightLimit:
    limit = InFlightLimit(8, "--max-in-flight", by_deadline=True)
    limit.mean_work_s, limit.ended, limit.in_flight["Solve"] = work_s, WARM_CALLS, in_flight
    return limit


def test_a_call_whose_deadline_the_calls_in_flight_put_out_of_reach_is_refused_with_when_it_would_fit():
    limit = warm_deadline_limit(work_s=2.0, in_flight=5)  # a sixth call would take about 12 s
    assert limit.refusal(12.0) is None
    refused = limit.refusal(9.0)
    assert refused is not None and refused.reason == "deadline"
    assert "9.0 s left" in str(refused) and "about 12.0 s" in str(refused) and "--admit-by-deadline" in str(refused)
    # 9 s fit 4 calls of 2 s: this one and 3 others, so 2 of the 5 in flight must end first, one per 2 s.
    assert refused.retry_after_ms == 4000
    # The bound still refuses first, with its own hint.
    limit.in_flight["Solve"] = 8
    assert limit.refusal(100.0).reason == "bound"


def test_deadline_admission_admits_when_it_has_nothing_to_go_on():
    assert warm_deadline_limit(work_s=30.0, in_flight=0).refusal(1.0) is None  # idle: trying alone is the best
    assert warm_deadline_limit(work_s=30.0, in_flight=2).refusal(None) is None  # no deadline
    cold = warm_deadline_limit(work_s=30.0, in_flight=2)
    cold.ended = WARM_CALLS - 1
    assert cold.refusal(1.0) is None  # too few ended calls to estimate from
    off = warm_deadline_limit(work_s=30.0, in_flight=2)
    off.by_deadline = False
    assert off.refusal(1.0) is None  # --admit-by-deadline off: only the bound


def test_the_work_estimate_is_a_calls_duration_over_the_calls_it_shared_with():
    limit = InFlightLimit(8, "--max-in-flight", by_deadline=True)
    for _ in range(200):
        limit.ended_call(elapsed_s=12.0, sharing=4.0)
    assert limit.mean_work_s == pytest.approx(3.0) and limit.mean_call_s == pytest.approx(12.0)
    assert limit.ended == 200


def test_a_call_with_an_unreachable_deadline_is_refused_over_grpc_and_one_without_a_deadline_is_admitted():
    async def test(service: Running):
        service.limit.by_deadline, service.limit.ended, service.limit.mean_work_s = True, WARM_CALLS, 5.0
        held = asyncio.ensure_future(service.unary("Hold")(wrappers_pb2.StringValue(value="held")))
        await service.until_in_flight(1)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await service.unary("Hold")(wrappers_pb2.StringValue(), timeout=3)  # 2 calls of 5 s each: 10 s
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert refused.value.details().startswith("the deadline cannot be met")
        assert retry_after_ms(refused.value.trailing_metadata()) == 5000  # the one in flight ends, then it fits
        assert service.limit.rejected == {"Hold": 1}
        no_deadline = asyncio.ensure_future(service.unary("Hold")(wrappers_pb2.StringValue(value="free")))
        await service.until_in_flight(2)
        service.work.release.set()
        assert [r.value for r in await asyncio.gather(held, no_deadline)] == ["held", "free"]

    serve(test)


def test_a_bidirectional_work_method_holds_a_slot_until_it_ends():
    async def test(service: Running):
        echo = service.echo()
        held = await hold_every_slot(echo)
        await service.until_in_flight(BOUND)
        refused = echo()
        with pytest.raises(grpc.aio.AioRpcError) as error:
            await refused.read()
        assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        for call in held:
            await call.done_writing()
            assert await call.read() == grpc.aio.EOF
        await service.until_in_flight(0)

    serve(test)


def test_a_refused_bidirectional_call_reads_the_callers_opening_message_so_the_refusal_is_what_it_sees():
    """The Scheduler writes its opening message from a request iterator as the call starts; were the refusal to
    overtake that write, grpc.aio's client would report INTERNAL instead of RESOURCE_EXHAUSTED."""

    async def test(service: Running):
        echo = service.echo()
        held = await hold_every_slot(echo)

        async def opening_then_wait():
            yield wrappers_pb2.StringValue(value="draft this")
            await asyncio.Event().wait()  # the Scheduler keeps its side open for cancels

        for _ in range(5):
            refused = echo(opening_then_wait())
            with pytest.raises(grpc.aio.AioRpcError) as error:
                await refused.read()
            assert error.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error.value.details()
            refused.cancel()
        for call in held:
            await call.done_writing()
        await service.until_in_flight(0)

    serve(test)


def test_a_refused_calls_opening_message_is_taken_and_a_silent_caller_is_not_waited_for_long():
    async def main():
        taken = []

        async def opening():
            taken.append("first")
            yield 1
            taken.append("second")
            yield 2

        await read_opening_message(opening())
        assert taken == ["first"], "the opening message only: the rest is the caller's to send to nobody"

        async def silent():
            await asyncio.Event().wait()
            yield 0

        async with asyncio.timeout(OPENING_MESSAGE_WAIT_S + 5):
            await read_opening_message(silent())

        async def failing():
            raise grpc.aio.AbortError()
            yield 0

        await read_opening_message(failing())  # a caller gone already: nothing to read, nothing raised

    asyncio.run(main())


def test_a_refused_caller_gets_a_ticket_whose_place_comes_before_a_newcomers_and_lapses_unused():
    limit = InFlightLimit(2, "--max-in-flight", by_deadline=True)
    limit.mean_call_s, limit.in_flight["Solve"] = 1.0, 2  # full: a refusal hints 500 ms
    with pytest.raises(Rejected) as unasked:
        with limit.admit("Solve", time_left_s=None):
            pass
    assert unasked.value.ticket == "" and not limit.tickets  # a caller that did not ask holds no place
    with pytest.raises(Rejected) as refused:
        with limit.admit("Solve", time_left_s=None, ticket=TICKET_WANTED):
            pass
    ticket = refused.value.ticket
    assert ticket and refused.value.retry_after_ms == 500
    due = limit.tickets[ticket][0]
    limit.in_flight["Solve"] = 1  # a call ended at the hint's time: one slot free, and one place due
    newcomer = limit.refusal(None, now=due)
    assert newcomer is not None and "1 places held for retries" in str(newcomer)
    assert limit.refusal(None, ticket=ticket, now=due) is None  # the retry takes the place held for it
    assert limit.refusal(None, now=due - 0.1) is None  # before the hint's time nothing is held
    assert limit.places_due(due + 0.5 + TICKET_GRACE_S + 0.01) == 0 and not limit.tickets  # unused: it lapses


def test_only_the_deadline_admitting_service_issues_tickets():
    limit = InFlightLimit(1, "--max-in-flight")
    limit.in_flight["GenerateDrafts"] = 1
    with pytest.raises(Rejected) as refused:
        with limit.admit("GenerateDrafts", ticket=TICKET_WANTED):
            pass
    assert refused.value.ticket == "" and not limit.tickets


def test_a_retry_that_sends_its_ticket_back_over_grpc_is_admitted_before_a_newcomer():
    async def test(service: Running):
        service.limit.by_deadline = True
        held = [asyncio.ensure_future(service.unary("Hold")(wrappers_pb2.StringValue())) for _ in range(BOUND)]
        await service.until_in_flight(BOUND)
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await service.unary("Hold")(wrappers_pb2.StringValue(), metadata=((TICKET_KEY, TICKET_WANTED),))
        ticket = retry_ticket(refused.value.trailing_metadata())
        assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and ticket
        service.limit.tickets[ticket] = (0.0, float("inf"))  # its hint's time has come
        service.work.release.set()
        await asyncio.gather(*held)
        service.work.release.clear()
        newcomers = [service.unary("Hold")(wrappers_pb2.StringValue()) for _ in range(BOUND)]
        admitted = asyncio.gather(*newcomers, return_exceptions=True)
        await service.until_in_flight(1)  # one admitted; the other counted the place due and was refused
        retried = asyncio.ensure_future(
            service.unary("Hold")(wrappers_pb2.StringValue(value="retry"), metadata=((TICKET_KEY, ticket),))
        )
        await service.until_in_flight(BOUND)
        service.work.release.set()
        outcomes = await admitted
        assert (await retried).value == "retry"
        assert sum(isinstance(o, grpc.aio.AioRpcError) for o in outcomes) == 1  # one newcomer gave way

    serve(test)
