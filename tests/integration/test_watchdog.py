"""The Verifier dies while requests are in flight: the Scheduler's watchdog restarts it after exactly three
failed heartbeats, and every request ends with an answer or a clear status."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import grpc
import pytest

from deliberate.cli.stack import Ports, Stack
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb
from deliberate_client.client import DeliberateClient, build_request
from tests.metrics import scrape, value

pytestmark = pytest.mark.model

HEARTBEAT_S = 0.3


@pytest.fixture(scope="module")
def watched_stack(tmp_path_factory):
    log_dir = tmp_path_factory.mktemp("watchdog-logs")
    stack = Stack(
        ports=Ports.free(),
        log_dir=log_dir,
        state_dir=log_dir,
        scheduler_args=["--watchdog-interval-s", str(HEARTBEAT_S), "--verify-timeout-s", "5"],
    )
    with stack:
        yield stack


def verifier_pid(stack: Stack) -> int:
    pid = stack.verifier_pid()
    assert pid is not None, "no verifier process found"
    return pid


def restart_events(stack: Stack) -> list[dict]:
    lines = (stack.log_dir / "scheduler.log").read_text().splitlines()
    events = [json.loads(line) for line in lines if line.startswith("{")]
    return [e for e in events if e.get("msg") == "verifier restarted"]


def state(stack: Stack) -> pb.GetStateResponse:
    with DeliberateClient(stack.address) as client:
        return client.stub.GetState(pb.GetStateRequest(), timeout=10)


def test_sigkilled_verifier_is_restarted_and_no_request_is_lost(watched_stack):
    stack = watched_stack
    assert state(stack).verifier.healthy
    metrics_before = scrape(stack.metrics_url("scheduler"))
    assert value(metrics_before, "deliberate_verifier_up") == 1
    old_pid = verifier_pid(stack)
    outcomes: list[object] = []

    def ask(n: int) -> None:
        request = build_request(f"What is {n} + {n}?", num_drafts=2, max_new_tokens=24, refine_max_new_tokens=8)
        with DeliberateClient(stack.address) as client:
            try:
                outcomes.append(client.solve(request, timeout=90))
            except grpc.RpcError as error:
                outcomes.append(error)

    askers = [threading.Thread(target=ask, args=(n,)) for n in range(4)]
    for asker in askers:
        asker.start()
        time.sleep(0.3)
    os.kill(old_pid, signal.SIGKILL)
    for asker in askers:
        asker.join(timeout=150)
    assert not any(asker.is_alive() for asker in askers), "a request hung"

    assert len(outcomes) == 4, "every request ended"
    for outcome in outcomes:
        if isinstance(outcome, grpc.RpcError):
            assert outcome.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED), outcome
            assert outcome.details()
        else:
            assert outcome.answer and outcome.status != pb.SOLVE_STATUS_UNSPECIFIED

    deadline = time.monotonic() + 60
    while not (state(stack).verifier.restarts >= 1 and state(stack).verifier.healthy) and time.monotonic() < deadline:
        time.sleep(HEARTBEAT_S)
    after = state(stack).verifier
    assert after.restarts == 1 and after.healthy and after.restarter == "process"
    assert after.last_restart_time.seconds > 0
    (event,) = restart_events(stack)
    assert event["failures"] == 3, "restarted after exactly three failed heartbeats"
    assert verifier_pid(stack) != old_pid

    metrics_after = scrape(stack.metrics_url("scheduler"))
    restarts = value(metrics_after, "deliberate_watchdog_restarts_total", restarter="process")
    assert restarts == value(metrics_before, "deliberate_watchdog_restarts_total", restarter="process") + 1
    failures = value(metrics_after, "deliberate_watchdog_heartbeat_failures_total")
    assert failures >= value(metrics_before, "deliberate_watchdog_heartbeat_failures_total") + 3
    assert value(metrics_after, "deliberate_verifier_up") == 1

    with DeliberateClient(stack.address) as client:
        response = client.solve(build_request("What is 5 + 6?", num_drafts=1, max_new_tokens=16), timeout=90)
    assert response.answer


def test_feedback_is_recorded_and_shown_in_state(watched_stack):
    with DeliberateClient(watched_stack.address) as client:
        response = client.solve(build_request("What is 1 + 1?", num_drafts=1, max_new_tokens=12), timeout=90)
        before = state(watched_stack).feedback
        reply = client.stub.SubmitFeedback(
            pb.SubmitFeedbackRequest(request_id=response.request_id, outcome=pb.OUTCOME_ACCEPTED), timeout=10
        )
        assert reply.outcomes_until_refit > 0
        with pytest.raises(grpc.RpcError) as again:
            client.stub.SubmitFeedback(
                pb.SubmitFeedbackRequest(request_id=response.request_id, outcome=pb.OUTCOME_ACCEPTED), timeout=10
            )
        assert again.value.code() == grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.RpcError) as unspecified:
            client.stub.SubmitFeedback(pb.SubmitFeedbackRequest(request_id="x"), timeout=10)
        assert unspecified.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    after = state(watched_stack)
    assert after.feedback.accepted == before.accepted + 1
    assert after.num_drafts in (3, 5) and after.num_drafts_reason
    assert after.weights.alpha > 0 and 0.01 <= after.weights.gamma <= 0.05
