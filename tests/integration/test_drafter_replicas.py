"""Several Drafter replicas behind one Scheduler, through real processes (docs/deploy.md#load-balancing).

Two real Drafters (`Stack(drafters=2)`, one engine thread each) and a stand-in replica that reports NOT_SERVING
(tests/standin_drafter.py) are all in the Scheduler's --drafter-address list; the Scheduler balances round_robin
with gRPC health checking. Checked: both real replicas serve drafts of a stream of requests; the NOT_SERVING one
gets no call; a replica SIGKILLed between requests gets no more calls, and once restarted takes traffic again;
and, the control, the stand-in gets calls as soon as it reports SERVING.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import grpc
import pytest

from deliberate.cli.stack import Ports, Stack, free_port_pairs
from deliberate.cli.supervisor import Supervisor
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb
from deliberate_api.scheduler.v1 import scheduler_service_pb2_grpc
from deliberate_client.client import build_request
from tests.metrics import scrape, value

pytestmark = pytest.mark.model

ROOT = Path(__file__).resolve().parents[2]
# The drafting call of a round: StreamDrafts with early stopping on (the default), else GenerateDrafts.
DRAFT_METHODS = ("StreamDrafts", "GenerateDrafts")
# How long a restarted replica may take to load its model and be called again (the bound).
BACK_IN_TRAFFIC_S = 30.0


@pytest.fixture(scope="module")
def standin(tmp_path_factory):
    """The NOT_SERVING replica: (its address, the file its received calls are listed in, its process)."""
    ((port, _),) = free_port_pairs(1)
    calls = tmp_path_factory.mktemp("standin") / "calls.txt"
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.standin_drafter", str(port), str(calls)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert process.stdout.readline().strip() == b"listening"
    yield f"127.0.0.1:{port}", calls, process
    process.kill()
    process.wait()


@pytest.fixture(scope="module")
def stack(standin, otlp_receiver, tmp_path_factory):
    address, _, _ = standin
    running = Stack(
        ports=Ports.free(),
        env=otlp_receiver.exporter_env(),
        log_dir=tmp_path_factory.mktemp("replica-logs"),
        state_dir=tmp_path_factory.mktemp("replica-state"),
        drafters=2,
        with_gateway=False,
    )
    # The two real replicas, and the stand-in: a Drafter still loading its model is NOT_SERVING like it.
    running.scheduler_args = [
        "--max-redrafts", "0",
        "--drafter-address", f"{running.drafter_address},{address}",
        "--load-interval-s", "1",
    ]  # fmt: skip
    with running:
        yield running


def drafting_calls(stack: Stack, replica: str) -> float:
    samples = scrape(stack.metrics_url(replica))
    return sum(value(samples, "deliberate_rpc_admitted_total", method=m) for m in DRAFT_METHODS)


def solve(stack: Stack, seed: int, num_drafts: int = 2) -> pb.SolveResponse:
    request = build_request(
        "What is 2 + 3?", num_drafts=num_drafts, max_new_tokens=8, refine_max_new_tokens=4, seed=seed
    )
    with grpc.insecure_channel(stack.address) as channel:
        return scheduler_service_pb2_grpc.SchedulerServiceStub(channel).Solve(request, timeout=120)


def wait_for_draft_spans(receiver, trace_id: str, count: int, timeout_s: float = 15.0) -> list[dict]:
    """The trace's ended `deliberate.draft` spans of the Scheduler, once `count` have arrived."""
    deadline = time.monotonic() + timeout_s
    while True:
        spans = [s for s in receiver.trace(trace_id) if s["name"] == "deliberate.draft"]
        if len(spans) >= count or time.monotonic() > deadline:
            return spans
        time.sleep(0.2)


def standin_calls(standin) -> list[str]:
    return standin[1].read_text().split()


def test_each_replica_serves_its_share_and_the_not_serving_one_none(stack, standin):
    before = {replica: drafting_calls(stack, replica) for replica in stack.drafter_replicas}
    for seed in range(4):
        response = solve(stack, seed)
        assert response.status != pb.SOLVE_STATUS_FAILED and response.answer
    served = {replica: drafting_calls(stack, replica) - before[replica] for replica in stack.drafter_replicas}
    assert sum(served.values()) >= 4, served
    assert all(count >= 1 for count in served.values()), served  # round_robin: neither replica is left idle
    assert standin_calls(standin) == []  # health checking keeps the NOT_SERVING replica out


def test_replicas_run_one_engine_thread_each(stack):
    for replica in stack.drafter_replicas:
        environ = Path(f"/proc/{stack.processes[replica].pid}/environ").read_bytes().split(b"\0")
        assert b"DELIBERATE_ENGINE_THREADS=1" in environ, replica


def test_a_killed_replica_is_skipped_and_takes_traffic_again_once_restarted(stack, standin):
    """SIGKILLed between requests: every request still answers (a round planned on it before the next load sample
    moves its drafts), and the supervisor `deliberate up` runs restarts it; within 30 s it drafts again."""
    supervisor = Supervisor(stack, initial_backoff_s=0.2, log=lambda line: None)
    supervisor.check()
    stack.processes["drafter-2"].send_signal(signal.SIGKILL)
    stack.processes["drafter-2"].wait()
    for seed in range(10, 13):  # every request finds the live replica
        assert solve(stack, seed).answer
    while supervisor.restarts["drafter-2"] < 1:
        supervisor.check()
        time.sleep(0.1)
    restarted = time.monotonic()
    stack.wait_healthy(BACK_IN_TRAFFIC_S, services=("drafter-2",))
    seed = 20
    while drafting_calls(stack, "drafter-2") < 1:  # a new process: its counter starts at 0
        assert time.monotonic() - restarted < BACK_IN_TRAFFIC_S, "the restarted replica got no call"
        assert solve(stack, seed).answer
        seed += 1
    assert standin_calls(standin) == []


def replica_drafts(stack: Stack, replica: str, outcome: str) -> float:
    samples = scrape(stack.metrics_url("scheduler"))
    return value(samples, "deliberate_replica_drafts_total", replica=stack.address_of(replica), outcome=outcome)


def test_one_requests_drafts_are_split_over_both_replicas(stack):
    before = {replica: replica_drafts(stack, replica, "generated") for replica in stack.drafter_replicas}
    response = solve(stack, 40, num_drafts=4)
    assert len(response.drafts) >= 4
    split = {r: replica_drafts(stack, r, "generated") - before[r] for r in stack.drafter_replicas}
    assert split == {"drafter": 2, "drafter-2": 2}  # both idle: two each, in one round
    assert sorted(report.draft.index for report in response.drafts)[:4] == [0, 1, 2, 3]
    # The response says where each ran: two on each replica, none moved.
    placements = [report.placement for report in response.drafts if report.draft.index < 4]
    assert Counter(p.replica for p in placements) == {stack.address_of(r): 2 for r in stack.drafter_replicas}
    assert not any(p.moved_from or p.moved_reason for p in placements)


def test_a_round_without_early_stopping_is_split_too(stack):
    request = build_request("What is 2 + 3?", num_drafts=4, max_new_tokens=8, refine_max_new_tokens=4, seed=41)
    request.disable_streaming_verification = True
    request.disable_quorum = True
    with grpc.insecure_channel(stack.address) as channel:
        response = scheduler_service_pb2_grpc.SchedulerServiceStub(channel).Solve(request, timeout=120)
    assert response.status != pb.SOLVE_STATUS_FAILED
    assert response.early_stop.quorum == 0 and not response.early_stop.aborted  # every draft ran to its end
    replicas = Counter(report.placement.replica for report in response.drafts)
    assert replicas == {stack.address_of(r): 2 for r in stack.drafter_replicas}


def test_a_replica_lost_mid_round_loses_no_draft(stack, otlp_receiver):
    """drafter-2 is SIGKILLed while it decodes its part of a round: its drafts move to drafter, the solve answers."""
    lost = stack.address_of("drafter-2")
    moved_before = replica_drafts(stack, "drafter-2", "moved")
    answer: dict = {}

    def run() -> None:
        request = build_request(
            "Write a long story about the sea, at least ten sentences.", num_drafts=4, max_new_tokens=480,
            refine_max_new_tokens=4, seed=50, disable_default_arithmetic=True,
        )  # fmt: skip
        request.disable_quorum = True  # every draft runs to its end: none is stopped on a quorum
        with grpc.insecure_channel(stack.address) as channel:
            answer["response"] = scheduler_service_pb2_grpc.SchedulerServiceStub(channel).Solve(request, timeout=120)

    solving = threading.Thread(target=run)
    solving.start()
    deadline = time.monotonic() + 60
    while value(scrape(stack.metrics_url("drafter-2")), "deliberate_engine_sequences_running") < 1:
        assert time.monotonic() < deadline, "drafter-2 never started decoding"
        time.sleep(0.05)
    # Just into decoding, far from the end: a story may end well before 480 tokens, and SmolLM2 on one quiet thread
    # decodes ~100 tokens a second (with 2.5 s, a quiet CI machine had finished drafter-2's drafts before the kill).
    time.sleep(0.3)
    stack.processes["drafter-2"].send_signal(signal.SIGKILL)
    solving.join(120)
    response = answer["response"]
    assert response.answer and response.status != pb.SOLVE_STATUS_FAILED
    indexes = sorted(report.draft.index for report in response.drafts)
    assert indexes == [0, 1, 2, 3]  # every draft accounted for, none lost
    assert all(report.draft.text and report.verdict.draft_id == report.draft.id for report in response.drafts)
    assert replica_drafts(stack, "drafter-2", "moved") - moved_before == 2  # drafter-2's part of the round
    log = (stack.log_dir / "scheduler.log").read_text()
    assert f'"replica": "{lost}"' in log and "drafter replica down" in log and "draft moved" in log
    lines = [json.loads(line) for line in log.splitlines() if '"msg": "draft moved"' in line]
    moves = [move for move in lines if move["request_id"] == response.request_id]
    assert len(moves) == 2 and {move["from"] for move in moves} == {lost}
    # The response says which drafts moved, from where and why: those the log says, all now on drafter.
    assert {report.placement.replica for report in response.drafts} == {stack.address_of("drafter")}
    moved_reports = [report for report in response.drafts if report.placement.moved_from]
    assert sorted(r.draft.index for r in moved_reports) == sorted(move["index"] for move in moves)
    for report in moved_reports:
        assert report.placement.moved_from == lost
        assert report.placement.moved_reason.startswith(f"replica {lost} lost: drafter unavailable"), report.placement
    # Whether a moved draft had streamed tokens before the kill depends on the machine's speed (tokens_discarded);
    # either way it is generated again whole on drafter.
    assert all(move["tokens_discarded"] >= 0 for move in moves), moves
    spans = wait_for_draft_spans(otlp_receiver, response.trace_id, 4)
    moved = [s for s in spans if "moved" in s["events"]]
    assert len(moved) == 2
    for span in moved:
        assert span["attributes"]["deliberate.draft.moved_from"] == lost
        assert span["attributes"]["deliberate.draft.replica"] == stack.address_of("drafter")
    stack.start("drafter-2")  # back for the tests after this one
    stack.wait_healthy(BACK_IN_TRAFFIC_S, services=("drafter-2",))


def test_control_the_standin_is_called_once_it_reports_serving(stack, standin):
    """Without this the test above could pass because the stand-in is unreachable, not because of its health."""
    standin[2].send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + 20
    seed = 30
    while not standin_calls(standin):
        assert time.monotonic() < deadline, "the stand-in reported SERVING but got no call"
        try:
            solve(stack, seed)
        except grpc.RpcError as error:  # the stand-in answers UNAVAILABLE: a request it drafts fails
            assert error.code() == grpc.StatusCode.UNAVAILABLE
        seed += 1
        time.sleep(0.2)
    assert set(standin_calls(standin)) <= {"StreamDrafts", "GenerateDrafts", "GetLoad"}
