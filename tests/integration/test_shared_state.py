"""Two real Scheduler replicas share one real redis-server: feedback through either, one refit per 100 outcomes
across both, state that survives a replica's SIGKILL, one acting watchdog, and a Redis outage that refuses
feedback while solves go on.

One Drafter, one Refiner and one Verifier serve both replicas. The Verifier runs apart from either Scheduler; both
watchdogs restart it with the same script (the `command` restarter), which logs who ran it.
"""

from __future__ import annotations

import asyncio
import os
import random
import shlex
import signal
import socket
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import grpc
import pytest

from deliberate.cli.local_redis import free_port
from deliberate.cli.stack import Ports, Stack
from deliberate.scheduler.learning.weight_store import RedisStateStore
from deliberate.scheduler.learning.weights import DecisionFeatures
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb
from deliberate_client.client import DeliberateClient, build_request
from tests.redis_server import running_redis

pytestmark = pytest.mark.model

HEARTBEAT_S = 0.3
LEASE_S = 3.0
DEFAULT_WEIGHTS = (1.0, 0.3, 0.3)

RESTART_SCRIPT = """#!/bin/sh
# Restarts the shared Verifier: whoever runs it is logged (the parent of this shell is the acting Scheduler).
echo "$PPID" >> {restarts}
kill -9 "$(cat {pidfile})" 2>/dev/null
setsid {command} >> {log} 2>&1 < /dev/null &
echo $! > {pidfile}
"""


class Cluster:
    def __init__(self, root: Path, redis):
        self.root = root
        self.redis = redis
        self.pidfile = root / "verifier.pid"
        self.restarts = root / "restarts.log"
        self.script = root / "restart-verifier.sh"
        ports = Ports.free()
        common = dict(
            state="redis",
            redis=redis,
            state_dir=root,
            scheduler_args=[
                "--restarter", "command",
                "--restart-command", f"sh {self.script}",
                "--watchdog-interval-s", str(HEARTBEAT_S),
                "--watchdog-lease-s", str(LEASE_S),
                "--verify-timeout-s", "5",
            ],
        )  # fmt: skip
        self.a = Stack(ports=ports, log_dir=root / "a", **common)
        ports_b = replace(ports, scheduler=free_port(), scheduler_metrics=free_port())
        self.b = Stack(ports=ports_b, log_dir=root / "b", **common)

    def start(self) -> None:
        verifier = shlex.join(self.a.command("verifier"))
        self.script.write_text(
            RESTART_SCRIPT.format(
                restarts=self.restarts, pidfile=self.pidfile, command=verifier, log=self.root / "verifier.log"
            )
        )
        self.a.start("risk")  # the Verifier's credit pack calls it; the stack waits for all it would start
        self.start_verifier()
        self.a.start("drafter")
        self.a.start("refiner")
        self.a.start("scheduler")
        self.b.start("scheduler")
        self.a.wait_healthy(300)
        self.b.wait_healthy(60, services=("scheduler",))

    def start_verifier(self) -> None:
        log = open(self.root / "verifier.log", "ab")  # noqa: SIM115 (the child keeps its own copy)
        with log:
            process = subprocess.Popen(
                self.a.command("verifier"), stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True
            )
        self.pidfile.write_text(f"{process.pid}\n")

    def verifier_pid(self) -> int:
        return int(self.pidfile.read_text())

    def stop(self) -> None:
        self.b.down()
        self.a.down()
        try:
            os.killpg(self.verifier_pid(), signal.SIGKILL)
        except (ProcessLookupError, ValueError, OSError):
            pass

    def state(self, stack: Stack) -> pb.GetStateResponse:
        with DeliberateClient(stack.address) as client:
            return client.stub.GetState(pb.GetStateRequest(), timeout=10)

    def feedback(self, stack: Stack, request_id: str, accepted: bool = True) -> pb.SubmitFeedbackResponse:
        outcome = pb.OUTCOME_ACCEPTED if accepted else pb.OUTCOME_REJECTED
        with DeliberateClient(stack.address) as client:
            return client.stub.SubmitFeedback(
                pb.SubmitFeedbackRequest(request_id=request_id, outcome=outcome), timeout=10
            )

    def solve(self, stack: Stack, question: str, request_id: str = "") -> pb.SolveResponse:
        request = build_request(
            question, num_drafts=2, max_new_tokens=24, refine_max_new_tokens=8, request_id=request_id
        )
        with DeliberateClient(stack.address) as client:
            return client.solve(request, timeout=120)

    def record_directly(self, decisions: list[tuple[str, DecisionFeatures]]) -> dict:
        """Records decisions through the store itself, as a third replica would at solve time (solving a hundred
        questions on the CPU would take minutes); returns the shared state afterwards."""

        async def record() -> dict:
            store = RedisStateStore.from_url(self.redis.url)
            for request_id, features in decisions:
                await store.record(request_id, features)
            state = await store.snapshot()
            await store.close()
            return state

        return asyncio.run(record())


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("shared-state")
    with running_redis(root / "redis") as redis:
        running = Cluster(root, redis)
        try:
            running.start()
            yield running
        finally:
            running.stop()


def weights_of(state: pb.GetStateResponse) -> tuple[float, float, float]:
    return (state.weights.alpha, state.weights.beta, state.weights.delta)


def wait_until(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(HEARTBEAT_S)


def test_feedback_for_a_request_solved_by_a_is_accepted_by_b(cluster):
    solved = cluster.solve(cluster.a, "What is 2 + 3?", request_id="solved-by-a")
    assert solved.request_id == "solved-by-a" and solved.answer

    reply = cluster.feedback(cluster.b, "solved-by-a")
    assert reply.outcomes_until_refit == 99
    with pytest.raises(grpc.RpcError) as again:
        cluster.feedback(cluster.a, "solved-by-a")
    assert again.value.code() == grpc.StatusCode.NOT_FOUND  # one outcome per decision, whichever replica asks

    a, b = cluster.state(cluster.a).feedback, cluster.state(cluster.b).feedback
    assert a == b
    assert (a.submitted, a.accepted, a.unknown_request) == (2, 1, 1)


def test_a_hundred_outcomes_across_both_refit_once_and_both_report_the_same_weights(cluster):
    rng = random.Random(2026)
    before = cluster.state(cluster.a)
    assert before.feedback.refits == 0 and weights_of(before) == pytest.approx(DEFAULT_WEIGHTS)
    decisions = [
        (f"outcome-{i}", DecisionFeatures(rng.uniform(0, 1), rng.uniform(0.5, 1), 0.1, rng.uniform(0, 1)))
        for i in range(99)  # the first test's outcome is the 100th
    ]
    cluster.record_directly(decisions)

    replies = []
    for i, (request_id, features) in enumerate(decisions):
        accepted = (features.agreement > 0.75) != (rng.random() < 0.1)  # agreement predicts acceptance
        replies.append(cluster.feedback((cluster.a, cluster.b)[i % 2], request_id, accepted))
    assert [r.outcomes_until_refit for r in replies[-2:]] == [1, 100]  # the 100th outcome refitted

    a, b = cluster.state(cluster.a), cluster.state(cluster.b)
    assert a.feedback.refits == b.feedback.refits == 1
    assert weights_of(a) == weights_of(b) != pytest.approx(DEFAULT_WEIGHTS)
    assert a.weights.beta > DEFAULT_WEIGHTS[1]


def test_killing_and_restarting_a_replica_loses_neither_weights_nor_counters(cluster):
    cluster.record_directly([("awaits-feedback", DecisionFeatures(0.7, 0.9, 0.1, 0.5))])
    before = cluster.state(cluster.a)
    assert before.feedback.pending_decisions >= 1

    replica = cluster.a.processes["scheduler"]
    replica.send_signal(signal.SIGKILL)
    replica.wait(10)
    cluster.a.start("scheduler")
    cluster.a.wait_healthy(60, services=("scheduler",))

    after = cluster.state(cluster.a)
    assert weights_of(after) == weights_of(before) != pytest.approx(DEFAULT_WEIGHTS)
    assert after.feedback == before.feedback
    assert cluster.feedback(cluster.a, "awaits-feedback").outcomes_until_refit == 99


def test_a_sigkilled_verifier_is_restarted_exactly_once_by_the_lease_holder(cluster):
    wait_until(
        lambda: all(cluster.state(s).verifier.healthy for s in (cluster.a, cluster.b)), 30, "both watchdogs healthy"
    )
    schedulers = {cluster.a.processes["scheduler"].pid: cluster.a, cluster.b.processes["scheduler"].pid: cluster.b}

    def live_holder_pid() -> int | None:
        """The live replica whose `host:pid:token` holds the lease, None while no live one does."""
        host, pid, _token = (asyncio.run(_lease_holder(cluster.redis.url)) or "::").rsplit(":", 2)
        return int(pid) if host == socket.gethostname() and pid.isdigit() and int(pid) in schedulers else None

    # The lease of a replica SIGKILLed earlier (the previous test) blocks the others until it expires.
    wait_until(lambda: live_holder_pid() is not None, 2 * LEASE_S, "a live lease holder")
    holder_pid = live_holder_pid()
    killed = cluster.verifier_pid()

    os.kill(killed, signal.SIGKILL)
    wait_until(lambda: cluster.restarts.exists(), 30, "a restart")
    wait_until(lambda: all(cluster.state(s).verifier.healthy for s in (cluster.a, cluster.b)), 60, "the Verifier back")
    time.sleep(6 * HEARTBEAT_S)  # room for a second, wrong restart to happen

    assert cluster.restarts.read_text().split() == [str(holder_pid)]
    assert cluster.verifier_pid() != killed
    acting, observing = schedulers[holder_pid], next(s for p, s in schedulers.items() if p != holder_pid)
    assert cluster.state(acting).verifier.restarts == 1
    assert cluster.state(observing).verifier.restarts == 0
    assert cluster.state(acting).verifier.watchdog_role == "acting"
    assert cluster.state(observing).verifier.watchdog_role == "observing"


async def _lease_holder(url: str) -> str:
    store = RedisStateStore.from_url(url)
    holder = await store.client.get(f"{store.prefix}lease:watchdog")
    await store.close()
    return holder


def test_with_redis_down_feedback_is_refused_solves_go_on_and_nothing_recorded_is_lost(cluster):
    cluster.record_directly([("across-the-outage", DecisionFeatures(0.6, 0.8, 0.1, 0.5))])
    before = cluster.state(cluster.b)

    cluster.redis.stop()
    try:
        started = time.monotonic()
        with pytest.raises(grpc.RpcError) as refused:
            cluster.feedback(cluster.a, "across-the-outage")
        assert time.monotonic() - started < 5
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        assert "Redis at 127.0.0.1" in refused.value.details()

        solved = cluster.solve(cluster.b, "What is 4 + 4?")
        assert solved.answer and solved.status != pb.SOLVE_STATUS_FAILED
        during = cluster.state(cluster.b)
        assert weights_of(during) == weights_of(before)  # the weights last read keep ranking drafts
    finally:
        cluster.redis.start()  # same port, same data directory

    after = cluster.state(cluster.a)
    assert after.feedback == before.feedback
    assert weights_of(after) == weights_of(before)
    assert cluster.feedback(cluster.a, "across-the-outage").outcomes_until_refit > 0
