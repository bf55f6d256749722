"""`deliberate up`'s supervisor: the Drafter and the Refiner are SIGKILLed in a running stack, the supervisor
starts them again and the stack answers a solve again."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from deliberate.cli.stack import Ports, Stack
from deliberate.cli.supervisor import Supervisor
from deliberate.scheduler.decisions import best_draft_answer
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb
from deliberate_client.client import DeliberateClient, build_request

pytestmark = pytest.mark.model


def test_sigkilled_drafter_and_refiner_are_restarted(tmp_path):
    lines: list[str] = []
    stack = Stack(ports=Ports.free(), log_dir=tmp_path, state_dir=tmp_path, with_gateway=False)
    supervisor = Supervisor(stack, initial_backoff_s=0.5, log=lines.append)
    stopped = threading.Event()

    def supervise() -> None:
        while not stopped.wait(0.2):
            supervisor.check()

    with stack:
        watcher = threading.Thread(target=supervise, daemon=True)
        watcher.start()
        try:
            killed = {service: stack.processes[service].pid for service in ("drafter", "refiner")}
            for pid in killed.values():
                os.killpg(pid, signal.SIGKILL)
            deadline = time.monotonic() + 30
            while sum(supervisor.restarts.values()) < 2 and time.monotonic() < deadline:
                time.sleep(0.2)
            assert supervisor.restarts == {"drafter": 1, "refiner": 1}, lines
            stack.wait_healthy(120)
            for service, pid in killed.items():
                assert stack.processes[service].pid != pid
                assert f"{service} exited (signal SIGKILL); restart attempt 1 of 5 in 0.5s" in lines
            with DeliberateClient(stack.address) as client:
                request = build_request("What is 2 + 3?", num_drafts=2, max_new_tokens=24, refine_max_new_tokens=8)
                response = client.solve(request, timeout=90)
            assert response.answer
            assert stack.processes["scheduler"].poll() is None, "the scheduler was left alone"
        finally:
            stopped.set()
            watcher.join()


def test_a_dead_refiner_costs_the_polish_not_the_answer(tmp_path):
    stack = Stack(ports=Ports.free(), log_dir=tmp_path, state_dir=tmp_path, with_gateway=False)
    with stack:
        refiner = stack.processes["refiner"]
        os.killpg(refiner.pid, signal.SIGKILL)
        refiner.wait(10)  # no supervisor here: it stays dead
        with DeliberateClient(stack.address) as client:
            request = build_request("What is 2 + 3?", num_drafts=2, max_new_tokens=24, refine_max_new_tokens=8)
            response = client.solve(request, timeout=90)
    report = next(r for r in response.drafts if r.draft.id == response.selected_draft_ids[0])
    best = report.draft
    # The best draft is the answer, its final line in plain text (as a passed-through answer is).
    assert response.answer == best_draft_answer(report, pb.SolveRequest())
    assert "refinement unavailable (refiner unavailable" in response.status_reason
    assert f"answering with the best draft #{best.index}" in response.status_reason
