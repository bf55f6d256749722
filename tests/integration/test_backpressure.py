"""Backpressure and malformed requests through the real processes (docs/reliability.md).

A flood of 64 concurrent solves against a Scheduler bounded at 8: the excess is refused at once with
RESOURCE_EXHAUSTED and a retry hint, never more than 8 run, and afterwards the stack solves normally and the
Drafter's engine is idle. Then random bytes sent to every service's work methods: INVALID_ARGUMENT (or, for
the few that happen to be a valid encoding, the service's own answer), never UNKNOWN, and the services still
answer."""

from __future__ import annotations

import json
import math
import random
import threading
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from email.message import Message

import grpc
import pytest
from google.rpc import error_details_pb2, status_pb2

from deliberate.cli.stack import Ports, Stack
from deliberate.core.admission import RETRY_AFTER_KEY, STATUS_DETAILS_KEY
from deliberate.drafter.settings import DrafterSettings
from deliberate_api.common.v1 import common_pb2
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
        # One engine thread each: on CPUs shared with other busy processes a thread waiting for its CPU would
        # stall every decoding step of the 8 admitted solves.
        env={"DELIBERATE_ENGINE_THREADS": "1"},
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


def until_idle(stack: Stack, service: str, timeout_s: float = 30.0) -> None:
    """Until `service` has no work call in flight (a cancelled call's slot frees once its handler stopped)."""
    deadline = time.monotonic() + timeout_s
    while (in_flight := value(scrape(stack.metrics_url(service)), "deliberate_rpc_in_flight")) > 0:
        assert time.monotonic() < deadline, f"{service} still has {in_flight} calls in flight"
        time.sleep(0.1)


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


def chat_completion(stack: Stack) -> tuple[int, Message, dict]:
    """POST /v1/chat/completions to the gateway: (HTTP status, headers, body)."""
    body = {"model": "deliberate", "messages": [{"role": "user", "content": "What is 2 + 3?"}], "max_tokens": 4}
    request = urllib.request.Request(
        f"{stack.gateway_url}/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.headers, json.load(response)
    except urllib.error.HTTPError as error:
        return error.code, error.headers, json.load(error)


def test_a_refusal_says_the_bound_and_the_setting_and_the_gateway_says_429(stack):
    """Holds the 8 slots with streams, so the refusal is the Scheduler's own, then lets them go."""
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
            hint = int(dict(refused.value.trailing_metadata())[RETRY_AFTER_KEY])

            status, headers, body = chat_completion(stack)
            assert status == 429 and body["error"]["type"] == "rate_limit_error"
            assert int(headers["retry-after-ms"]) > 0
            assert int(headers["Retry-After"]) == math.ceil(int(headers["retry-after-ms"]) / 1000) >= 1
            assert abs(int(headers["retry-after-ms"]) - hint) < 1000  # the Scheduler's estimate, moments later
        finally:
            for stream in streams:
                stream.cancel()


def test_a_busy_drafter_makes_the_solve_resource_exhausted_with_the_drafters_hint(stack):
    """The Drafter's own bound (its default) held by calls straight to it: the Scheduler passes its refusal on
    as RESOURCE_EXHAUSTED with the Drafter's retry hint, not as UNAVAILABLE or INTERNAL."""
    bound = DrafterSettings.model_fields["max_in_flight"].default
    until_idle(stack, "drafter")  # the solves cancelled before have given their slots back
    long = common_pb2.SamplingParams(max_new_tokens=600, temperature=1.0)
    with grpc.insecure_channel(stack.address_of("drafter")) as channel:
        drafter = drafter_service_pb2_grpc.DrafterServiceStub(channel)
        held = [
            drafter.GenerateDrafts(
                drafter_service_pb2.GenerateDraftsRequest(prompt="Count to a thousand.", num_drafts=1, sampling=long),
                timeout=120,
            )
            for _ in range(bound)
        ]
        try:
            deadline = time.monotonic() + 30
            while (in_flight := value(scrape(stack.metrics_url("drafter")), "deliberate_rpc_in_flight")) < bound:
                ended = [call.code() for call in held if call.done()]
                assert time.monotonic() < deadline, f"the Drafter holds {in_flight}; calls ended: {ended}"
                time.sleep(0.1)
            with grpc.insecure_channel(stack.address) as scheduler, pytest.raises(grpc.RpcError) as refused:
                scheduler_service_pb2_grpc.SchedulerServiceStub(scheduler).Solve(small_solve(1), timeout=60)
        finally:
            for call in held:
                call.cancel()
    until_idle(stack, "drafter")  # a cancelled stream gives its slot back
    error = refused.value
    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert error.details() == f"drafter busy: {bound} of {bound} calls in flight (--max-in-flight); retry later"
    assert int(dict(error.trailing_metadata())[RETRY_AFTER_KEY]) > 0


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
