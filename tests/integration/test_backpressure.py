"""Backpressure and malformed requests through the real processes (docs/reliability.md).

A flood of 64 concurrent solves against a Scheduler bounded at 8: the excess is refused at once with
RESOURCE_EXHAUSTED and a retry hint, never more than 8 run, and afterwards the stack solves normally and the
Drafter's engine is idle. Then random bytes sent to every service's work methods: INVALID_ARGUMENT (or, for
the few that happen to be a valid encoding, the service's own answer), never UNKNOWN, and the services still
answer."""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2

from deliberate.cli.stack import Ports, Stack
from deliberate.core.admission import RETRY_AFTER_KEY, STATUS_DETAILS_KEY
from deliberate_api.drafter.v1 import drafter_service_pb2, drafter_service_pb2_grpc
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb
from deliberate_api.scheduler.v1 import scheduler_service_pb2_grpc
from deliberate_client.client import build_request
from tests.metrics import scrape, value

pytestmark = pytest.mark.model

BOUND = 8
FLOOD = 64
# A rejection is answered before any stage runs; this is generous for two busy cores.
REJECTION_WITHIN_S = 2.0


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    running = Stack(
        ports=Ports.free(),
        log_dir=tmp_path_factory.mktemp("backpressure-logs"),
        state_dir=tmp_path_factory.mktemp("backpressure-state"),
        scheduler_args=["--max-in-flight", str(BOUND), "--max-redrafts", "0"],
        with_gateway=False,
    )
    with running:
        yield running


def small_solve(seed: int) -> pb.SolveRequest:
    return build_request("What is 2 + 3?", num_drafts=1, max_new_tokens=8, refine_max_new_tokens=4, seed=seed)


def solve(address: str, request: pb.SolveRequest, start: threading.Barrier) -> tuple[grpc.StatusCode, float, dict]:
    """(code, seconds from sending to the answer, trailing metadata) of one Solve on a channel of its own."""
    with grpc.insecure_channel(address) as channel:
        stub = scheduler_service_pb2_grpc.SchedulerServiceStub(channel)
        grpc.channel_ready_future(channel).result(timeout=30)
        start.wait()
        sent = time.monotonic()
        try:
            _, call = stub.Solve.with_call(request, timeout=180)
            return grpc.StatusCode.OK, time.monotonic() - sent, dict(call.trailing_metadata() or ())
        except grpc.RpcError as error:
            return error.code(), time.monotonic() - sent, dict(error.trailing_metadata() or ())


def engine_sequences(stack: Stack) -> int:
    with grpc.insecure_channel(stack.address_of("drafter")) as channel:
        load = drafter_service_pb2_grpc.DrafterServiceStub(channel).GetLoad(
            drafter_service_pb2.GetLoadRequest(), timeout=10
        )
    return load.busy_sequences + load.queued_sequences


def test_a_flood_beyond_the_bound_is_refused_at_once_and_the_stack_recovers(stack):
    peak = {"in_flight": 0.0}
    flooding = threading.Event()

    def watch_in_flight():  # the Scheduler's own count, sampled while the flood runs
        while not flooding.is_set():
            samples = scrape(stack.metrics_url("scheduler"))
            peak["in_flight"] = max(peak["in_flight"], value(samples, "deliberate_rpc_in_flight"))
            time.sleep(0.05)

    watcher = threading.Thread(target=watch_in_flight)
    watcher.start()
    start = threading.Barrier(FLOOD)
    try:
        with ThreadPoolExecutor(FLOOD) as pool:
            results = list(pool.map(lambda i: solve(stack.address, small_solve(i), start), range(FLOOD)))
    finally:
        flooding.set()
        watcher.join()

    refused = [(elapsed, trailing) for code, elapsed, trailing in results if code == grpc.StatusCode.RESOURCE_EXHAUSTED]
    answered = [code for code, _, _ in results if code == grpc.StatusCode.OK]
    assert len(refused) + len(answered) == FLOOD, sorted({code.name for code, _, _ in results})
    assert 1 <= peak["in_flight"] <= BOUND  # never more than the bound at once
    # All were sent within a moment, long before a solve ends: the first 8 ran, the rest were refused.
    assert len(answered) >= BOUND and len(refused) >= FLOOD - 2 * BOUND
    for elapsed, trailing in refused:
        assert elapsed < REJECTION_WITHIN_S, f"a rejection took {elapsed:.2f}s: it waited instead"
        hint = int(trailing[RETRY_AFTER_KEY])
        assert hint > 0
        retry_info = error_details_pb2.RetryInfo()
        assert status_pb2.Status.FromString(trailing[STATUS_DETAILS_KEY]).details[0].Unpack(retry_info)
        assert retry_info.retry_delay.ToMilliseconds() == hint
    rejected = value(scrape(stack.metrics_url("scheduler")), "deliberate_rpc_rejected_total", method="Solve")
    assert rejected == len(refused)

    assert solve(stack.address, small_solve(99), threading.Barrier(1))[0] == grpc.StatusCode.OK
    deadline = time.monotonic() + 30
    while (sequences := engine_sequences(stack)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert sequences == 0


def test_a_refusal_says_the_bound_and_the_setting(stack):
    """Holds the 8 slots with streams, so the refusal's message is the Scheduler's own, then lets them go."""
    with grpc.insecure_channel(stack.address) as channel:
        stub = scheduler_service_pb2_grpc.SchedulerServiceStub(channel)
        streams = [stub.SolveStream(pb.SolveStreamRequest(request=small_solve(i)), timeout=180) for i in range(BOUND)]
        try:
            for stream in streams:
                next(stream)  # admitted: its first event arrived
            with pytest.raises(grpc.RpcError) as refused:
                stub.Solve(small_solve(0), timeout=30)
            assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert refused.value.details() == f"{BOUND} of {BOUND} calls in flight (--max-in-flight); retry later"
        finally:
            for stream in streams:
                stream.cancel()


WORK_METHODS = {
    "scheduler": [
        ("/deliberate.scheduler.v1.SchedulerService/Solve", False),
        ("/deliberate.scheduler.v1.SchedulerService/SolveStream", True),
        ("/deliberate.scheduler.v1.SchedulerService/SubmitFeedback", False),
    ],
    "drafter": [("/deliberate.drafter.v1.DrafterService/GenerateDrafts", True)],
    "verifier": [
        ("/deliberate.verifier.v1.VerifierService/VerifyDrafts", False),
        ("/deliberate.verifier.v1.VerifierService/CheckConstraints", False),
    ],
    "refiner": [("/deliberate.refiner.v1.RefinerService/Refine", True)],
}


def send_raw(channel: grpc.Channel, method: str, streaming: bool, raw: bytes) -> tuple[grpc.StatusCode, str]:
    """Bytes as they are (no serializer), the answer's code and message."""
    try:
        if streaming:
            list(channel.unary_stream(method)(raw, timeout=60))
        else:
            channel.unary_unary(method)(raw, timeout=60)
        return grpc.StatusCode.OK, ""
    except grpc.RpcError as error:
        return error.code(), error.details()


@pytest.mark.parametrize("service", sorted(WORK_METHODS))
def test_random_bytes_are_invalid_argument_and_the_service_still_answers(stack, service):
    rng = random.Random(f"malformed-{service}")
    blobs = [rng.randbytes(rng.randint(1, 64)) for _ in range(300)]
    with grpc.insecure_channel(stack.address_of(service)) as channel:
        for method, streaming in WORK_METHODS[service]:
            answers = [send_raw(channel, method, streaming, raw) for raw in blobs]
            codes = {code for code, _ in answers}
            assert codes <= {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.OK}, (method, codes)
            undecodable = [message for _, message in answers if message.startswith("request: not a valid ")]
            assert len(undecodable) > 250, (method, len(undecodable))
        health = channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=lambda message: message,
            response_deserializer=lambda raw: raw,
        )
        assert health(b"", timeout=10) == b"\x08\x01"  # SERVING
