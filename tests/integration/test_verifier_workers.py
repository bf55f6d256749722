"""`deliberate.verifier --workers 2`: two real worker processes serve one port; they stop together on SIGTERM, a
worker that dies takes the Verifier down (so its restarter restarts all of it), the watchdog's `process` restarter
replaces every worker, and workers whose parent was killed outright stop themselves."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
import urllib.error
import urllib.request
from pathlib import Path

import grpc
import pytest

from deliberate.cli.stack import Ports, Stack
from deliberate.scheduler.watchdog.restarters import ProcessRestarter
from deliberate.verifier.rules import verify_text
from deliberate_api.common.v1 import common_pb2
from deliberate_api.verifier.v1 import verifier_service_pb2, verifier_service_pb2_grpc

DRAFTS = ["48 + 24 = 72\nFinal answer: 72", "48 + 24 = 73\nFinal answer: 73", "no answer here"]


@pytest.fixture
def stack(tmp_path):
    return Stack(ports=Ports.free(), log_dir=tmp_path, verifier_args=["--workers", "2"])


def health(stack: Stack) -> tuple[int, dict]:
    url = f"http://{stack.host}:{stack.ports.verifier_http}/health"
    try:
        with urllib.request.urlopen(url, timeout=2) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def wait_all_serving(stack: Stack, timeout_s: float = 90) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            status, body = health(stack)
            if status == 200:
                return body
        except OSError:
            pass
        time.sleep(0.25)
    raise TimeoutError(f"the workers did not all serve; see {stack.log_dir}")


def workers_of(pid: int) -> list[int]:
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [int(c) for c in children if b"spawn_main" in Path(f"/proc/{c}/cmdline").read_bytes()]


def gone(pids: list[int], timeout_s: float = 30) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not any(Path(f"/proc/{pid}").exists() and not is_zombie(pid) for pid in pids):
            return True
        time.sleep(0.2)
    return False


def is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def verify_over_connections(stack: Stack, connections: int) -> list[list[bool]]:
    """The drafts' validity, once over each of `connections` separate connections."""
    request = verifier_service_pb2.VerifyDraftsRequest(
        prompt="What is 48 + 24?",
        drafts=[common_pb2.Draft(id=f"d{i}", index=i, text=text) for i, text in enumerate(DRAFTS)],
        constraints=[common_pb2.Constraint(rule_pack="arithmetic")],
    )

    async def call_each() -> list[list[bool]]:
        channels = [
            grpc.aio.insecure_channel(stack.address_of("verifier"), options=[("grpc.use_local_subchannel_pool", 1)])
            for _ in range(connections)
        ]
        try:
            stubs = [verifier_service_pb2_grpc.VerifierServiceStub(channel) for channel in channels]
            replies = await asyncio.gather(*(stub.VerifyDrafts(request, timeout=30) for stub in stubs))
        finally:
            for channel in channels:
                await channel.close()
        return [[verdict.valid for verdict in reply.verdicts] for reply in replies]

    return asyncio.run(call_each())


def test_workers_serve_one_port_and_drain_together_on_sigterm(stack):
    parent = stack.start("verifier")
    try:
        body = wait_all_serving(stack)
        assert body["workers"] == 2 and body["workers_serving"] == 2
        assert "arithmetic" in body["rule_packs"]
        workers = workers_of(parent.pid)
        assert len(workers) == 2
        # The arithmetic pack fails the wrong sum; the last draft has no answer at all.
        assert verify_over_connections(stack, 6) == [[True, False, False]] * 6
        assert [verify_text(text, None).valid for text in DRAFTS] == [True, True, False]  # the pack decided
    finally:
        parent.send_signal(signal.SIGTERM)
        assert parent.wait(30) == 0
    assert gone(workers)


def test_a_worker_that_dies_stops_the_whole_verifier(stack):
    parent = stack.start("verifier")
    try:
        wait_all_serving(stack)
        workers = workers_of(parent.pid)
        os.kill(workers[1], signal.SIGKILL)
        assert parent.wait(30) == 1
        assert gone(workers)
        log = (stack.log_dir / "verifier.log").read_text()
        assert "worker exited; stopping the Verifier" in log
    finally:
        if parent.poll() is None:
            os.killpg(parent.pid, signal.SIGKILL)


def test_the_watchdog_process_restarter_replaces_every_worker(stack):
    restarter = ProcessRestarter(stack.command("verifier"), log_path=stack.log_dir / "verifier.log")
    restarter.start()
    try:
        wait_all_serving(stack)
        old_workers = workers_of(restarter.pid)
        summary = asyncio.run(restarter.restart())
        assert "replaced by pid" in summary
        assert gone(old_workers)
        wait_all_serving(stack)
        new_workers = workers_of(restarter.pid)
        assert len(new_workers) == 2 and not set(new_workers) & set(old_workers)
        assert verify_over_connections(stack, 4) == [[True, False, False]] * 4
    finally:
        restarter.stop()


def test_workers_of_a_parent_killed_outright_stop_themselves(stack):
    parent = stack.start("verifier")
    wait_all_serving(stack)
    workers = workers_of(parent.pid)
    try:
        parent.kill()  # the parent only, not its group
        parent.wait(10)
        assert gone(workers), "orphaned workers kept running"
    finally:
        for pid in workers:
            if not gone([pid], timeout_s=0):
                os.kill(pid, signal.SIGKILL)
