"""The Verifier watchdog against real HTTP servers, a real Verifier process, and fake engine and cluster APIs."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from deliberate.scheduler.redis_client import redis_client
from deliberate.scheduler.watchdog import watchdog as watchdog_module
from deliberate.scheduler.watchdog.lease import RedisLease
from deliberate.scheduler.watchdog.restarters import NoRestarter, ProcessRestarter, RestartError
from deliberate.scheduler.watchdog.watchdog import Watchdog
from tests.metrics import in_process_value

INTERVAL_S = 0.05


class FakeVerifier:
    """A real HTTP server whose /health answers `status` (or hangs); it records every probe it sees."""

    def __init__(self, status: int = 200):
        self.status = status
        self.hang_s = 0.0
        self.probes: list[int] = []  # the status answered to each probe, in order
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                status = fake.status
                fake.probes.append(status)
                time.sleep(fake.hang_s)
                payload = json.dumps({"service": "verifier", "serving": status == 200}).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                try:
                    self.wfile.write(payload)
                except BrokenPipeError:  # the probe timed out and hung up
                    pass

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_port}/health"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def failing_probes_since_last_success(self) -> int:
        count = 0
        for status in reversed(self.probes):
            if status == 200:
                break
            count += 1
        return count

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def verifier():
    fake = FakeVerifier()
    yield fake
    fake.close()


class RecordingRestarter:
    """Records how many probes the fake Verifier had seen at each restart; can fail on chosen calls."""

    name = "recording"

    def __init__(self, fake: FakeVerifier, fail_on: tuple[int, ...] = (), then: Callable[[], None] | None = None):
        self.fake = fake
        self.fail_on = fail_on
        self.then = then
        self.calls: list[int] = []
        self.failure_streaks: list[int] = []  # failed probes since the last healthy one, at each call

    async def restart(self) -> str:
        self.calls.append(len(self.fake.probes))
        self.failure_streaks.append(self.fake.failing_probes_since_last_success())
        if len(self.calls) in self.fail_on:
            raise RestartError("engine unreachable")
        if self.then:
            self.then()
        return f"restart #{len(self.calls)}"


async def until(condition: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


async def watching(watchdog: Watchdog, body: Callable[[], object]) -> None:
    """Runs `body()` while the watchdog loop runs, then checks that the loop survived and stops it."""
    task = asyncio.create_task(watchdog.run())
    try:
        await body()
        assert not task.done(), task
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- the loop -------------------------------------------------------------------------------------------------------


def test_healthy_target_is_never_restarted(verifier):
    restarter = RecordingRestarter(verifier)
    watchdog = Watchdog(verifier.url, restarter, interval_s=INTERVAL_S)

    async def body():
        assert await watchdog.wait_healthy(2.0)
        await until(lambda: len(verifier.probes) >= 8)

    asyncio.run(watching(watchdog, body))
    assert restarter.calls == []
    assert watchdog.healthy and watchdog.consecutive_failures == 0 and watchdog.restarts == 0


def test_restarts_after_exactly_three_failed_probes_and_alerts(verifier, monkeypatch, caplog):
    # A real SDK tracer in place of the global no-op one, only for this watchdog; metrics read in process.
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    monkeypatch.setattr(watchdog_module.trace, "get_tracer", tracer_provider.get_tracer)
    restarts_before = in_process_value("deliberate.watchdog.restarts", restarter="recording")
    failures_before = in_process_value("deliberate.watchdog.heartbeat.failures")

    verifier.status = 503
    restarter = RecordingRestarter(verifier)
    restarted: list[str] = []
    watchdog = Watchdog(
        verifier.url,
        restarter,
        interval_s=INTERVAL_S,
        restart_grace_s=60,
        startup_grace_s=0,
        on_restart=restarted.append,
    )

    async def body():
        await until(lambda: restarter.calls)
        await until(lambda: len(verifier.probes) >= 10)  # still failing, but within the restart grace

    with caplog.at_level(logging.WARNING, logger="deliberate.watchdog"):
        asyncio.run(watching(watchdog, body))

    assert restarter.calls == [3]
    assert watchdog.restarts == 1 and restarted == ["restart #1"]
    assert watchdog.last_restart_at is not None and not watchdog.healthy
    assert watchdog.consecutive_failures == 0  # failures inside the grace do not count
    assert watchdog.in_grace
    assert watchdog.last_error == "HTTP 503"

    (record,) = [r for r in caplog.records if r.getMessage() == "verifier restarted"]
    assert record.levelno == logging.WARNING
    assert (record.restarter, record.failures, record.action, record.restarts) == ("recording", 3, "restart #1", 1)

    (span,) = [s for s in spans.get_finished_spans() if s.name == "watchdog.restart"]
    (event,) = span.events
    assert event.name == "verifier.restarted"
    assert event.attributes[watchdog_module.FAILURES] == 3
    assert event.attributes[watchdog_module.ACTION] == "restart #1"

    assert in_process_value("deliberate.watchdog.restarts", restarter="recording") == restarts_before + 1
    failed = in_process_value("deliberate.watchdog.heartbeat.failures") - failures_before
    assert 3 <= failed <= len(verifier.probes), "every failed probe counted (the last may be cut off by the stop)"


def test_without_grace_every_third_failure_restarts(verifier):
    verifier.status = 503
    restarter = RecordingRestarter(verifier)
    watchdog = Watchdog(verifier.url, restarter, interval_s=INTERVAL_S, restart_grace_s=0)

    async def body():
        await until(lambda: len(restarter.calls) >= 2)

    asyncio.run(watching(watchdog, body))
    assert restarter.calls == [3, 6]


def test_a_healthy_probe_ends_the_grace_early(verifier):
    verifier.status = 503
    # The "restart" heals the fake Verifier, which the next probe sees.
    restarter = RecordingRestarter(verifier, then=lambda: setattr(verifier, "status", 200))
    watchdog = Watchdog(verifier.url, restarter, interval_s=INTERVAL_S, restart_grace_s=60, startup_grace_s=0)

    async def body():
        await until(lambda: restarter.calls)
        assert await watchdog.wait_healthy(2.0)
        verifier.status = 503  # fails again, long before the 60 s grace would end
        await until(lambda: len(restarter.calls) >= 2)

    asyncio.run(watching(watchdog, body))
    assert restarter.failure_streaks == [3, 3]
    assert watchdog.restarts == 2


def test_a_failing_restarter_is_retried_at_the_next_threshold(verifier, caplog):
    verifier.status = 503
    restarter = RecordingRestarter(verifier, fail_on=(1,))
    watchdog = Watchdog(verifier.url, restarter, interval_s=INTERVAL_S, restart_grace_s=60, startup_grace_s=0)

    async def body():
        await until(lambda: len(restarter.calls) >= 2)

    with caplog.at_level(logging.WARNING, logger="deliberate.watchdog"):
        asyncio.run(watching(watchdog, body))

    assert restarter.calls == [3, 6]
    assert (watchdog.restarts, watchdog.restart_failures) == (1, 1)
    (failure,) = [r for r in caplog.records if r.getMessage() == "verifier restart failed"]
    assert failure.levelno == logging.ERROR and failure.error == "engine unreachable"


def test_wait_healthy_waits_for_the_first_healthy_probe(verifier):
    verifier.status = 503
    watchdog = Watchdog(verifier.url, NoRestarter(), interval_s=INTERVAL_S, failures_to_restart=1000)

    async def body():
        assert not await watchdog.wait_healthy(0.2)
        verifier.status = 200
        assert await watchdog.wait_healthy(2.0)

    asyncio.run(watching(watchdog, body))


def test_probe_failures_say_why(verifier):
    watchdog = Watchdog(verifier.url, NoRestarter(), timeout_s=0.2)

    async def probe(url: str) -> tuple[bool, str]:
        watchdog.url = url
        return await watchdog.probe(), watchdog.last_error

    assert asyncio.run(probe(verifier.url)) == (True, "")
    verifier.status = 503
    assert asyncio.run(probe(verifier.url)) == (False, "HTTP 503")
    verifier.status, verifier.hang_s = 200, 0.5
    ok, error = asyncio.run(probe(verifier.url))
    assert not ok and "timed out" in error
    ok, error = asyncio.run(probe(f"http://127.0.0.1:{free_port()}/health"))
    assert not ok and "ConnectionRefusedError" in error


# --- process: the real Verifier, killed and restarted ---------------------------------------------------------------


def test_process_restarter_brings_a_killed_verifier_back(tmp_path):
    http_port = free_port()
    command = [sys.executable, "-m", "deliberate.verifier", "--host", "127.0.0.1"]
    command += ["--port", str(free_port()), "--http-port", str(http_port), "--metrics-port", "0"]
    restarter = ProcessRestarter(command, log_path=tmp_path / "verifier.log")
    url = f"http://127.0.0.1:{http_port}/health"
    watchdog = Watchdog(url, restarter, interval_s=INTERVAL_S, timeout_s=0.5, restart_grace_s=30)
    first_pid = restarter.start()

    async def body():
        assert await watchdog.wait_healthy(30.0), (tmp_path / "verifier.log").read_text()
        assert watchdog.restarts == 0  # its ~1 s boot fell inside the startup grace
        os.kill(first_pid, signal.SIGKILL)
        await until(lambda: watchdog.restarts == 1, timeout_s=10.0)
        assert await watchdog.wait_healthy(30.0), (tmp_path / "verifier.log").read_text()

    try:
        asyncio.run(watching(watchdog, body))
        assert restarter.pid != first_pid
        assert f"pid {first_pid} (exit code -9) replaced by pid {restarter.pid}" in watchdog.last_restart
        with urllib.request.urlopen(url, timeout=2.0) as response:
            assert response.status == 200 and json.load(response)["serving"] is True
    finally:
        stopped = restarter.stop(grace_s=10.0)
    assert stopped == "exit code 0"  # SIGTERM drains the Verifier cleanly
    assert restarter.process.poll() == 0


# --- the lease: one acting watchdog among replicas ------------------------------------------------------------------


def test_only_the_lease_holder_restarts_and_another_takes_over_when_it_stops(verifier, redis_server):
    verifier.status = 503

    async def scenario():
        client = redis_client(redis_server.url, 0.5)
        restarters = [RecordingRestarter(verifier, then=lambda: setattr(verifier, "status", 200)) for _ in "ab"]
        watchdogs = [
            Watchdog(
                verifier.url,
                restarter,
                interval_s=INTERVAL_S,
                restart_grace_s=0,
                lease=RedisLease(client, "test:lease:watchdog", name, ttl_s=1.0),
            )
            for name, restarter in zip("ab", restarters, strict=True)
        ]
        tasks = [asyncio.create_task(w.run()) for w in watchdogs]
        await until(lambda: sum(w.restarts for w in watchdogs) == 1)
        await until(lambda: all(w.healthy for w in watchdogs))
        first = next(w for w in watchdogs if w.restarts)
        holder_first = await client.get("test:lease:watchdog")
        observer = next(w for w in watchdogs if not w.restarts)
        observer_state = observer.acting, observer.restarts  # what GetState reports as its role and restarts

        # The acting replica goes away (its lease is released); the next outage is the other's to handle.
        first_task = tasks[watchdogs.index(first)]
        first_task.cancel()
        await asyncio.gather(first_task, return_exceptions=True)
        verifier.status = 503
        second = next(w for w in watchdogs if w is not first)
        await until(lambda: second.restarts == 1)
        holder_second = await client.get("test:lease:watchdog")
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await client.aclose()
        return first, second, holder_first, holder_second, observer_state

    first, second, holder_first, holder_second, observer_state = asyncio.run(scenario())
    assert first.lease.holder == holder_first and first.restarts == 1
    assert second.lease.holder == holder_second != holder_first and second.restarts == 1
    assert observer_state == (False, 0)  # observing, never restarted


def test_a_replica_taking_over_the_lease_during_a_long_restart_does_not_restart_again(verifier, redis_server):
    """A restart longer than the lease lets it lapse; the replica that takes it over must not restart the
    Verifier the holder is bringing back (the container test saw two restarts this way)."""
    verifier.status = 503

    class SlowRestarter(RecordingRestarter):
        async def restart(self) -> str:
            description = await super().restart()
            await asyncio.sleep(1.5)  # longer than the lease: its holder cannot renew meanwhile
            verifier.status = 200
            return description

    async def scenario():
        client = redis_client(redis_server.url, 0.5)
        watchdogs = [
            Watchdog(
                verifier.url,
                SlowRestarter(verifier),
                interval_s=INTERVAL_S,
                restart_grace_s=3.0,
                startup_grace_s=0,
                lease=RedisLease(client, "test:lease:slow", name, ttl_s=0.5),
            )
            for name in "ab"
        ]
        tasks = [asyncio.create_task(w.run()) for w in watchdogs]
        try:
            await until(lambda: sum(w.restarts for w in watchdogs) == 1, timeout_s=20)
            await until(lambda: all(w.healthy for w in watchdogs), timeout_s=20)
            await asyncio.sleep(10 * INTERVAL_S)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), timeout=10)
            await client.aclose()
        return [w.restarts for w in watchdogs]

    # A bound on the whole scenario: a busy machine may make it fail, never hang.
    assert sorted(asyncio.run(asyncio.wait_for(scenario(), timeout=60))) == [0, 1]


class HandedOverLease:
    """A lease this replica takes on its second heartbeat (another holder's lease expired)."""

    holder = "b"

    def __init__(self):
        self.asked = 0

    async def held(self) -> bool:
        self.asked += 1
        return self.asked >= 2

    async def release(self) -> None:
        pass


def test_a_replica_taking_over_while_the_verifier_is_healthy_restarts_it_without_the_restart_grace(verifier):
    """Grace on takeover protects a restart the previous holder may have under way; a Verifier that answered the
    last probe is not being restarted, so when it dies just after the handover its failures count at once."""
    watchdog = Watchdog(
        verifier.url,
        RecordingRestarter(verifier),
        interval_s=INTERVAL_S,
        restart_grace_s=60.0,
        startup_grace_s=0,
        lease=HandedOverLease(),
    )

    async def body():
        await until(lambda: watchdog.acting)
        verifier.status = 503
        await until(lambda: watchdog.restarts == 1)

    asyncio.run(watching(watchdog, body))


class CancelSwallowingLease(HandedOverLease):
    """Swallows a cancellation that arrives during `held()`, as redis-py can when its read timeout races it."""

    def __init__(self):
        super().__init__()
        self.asking = asyncio.Event()
        self.swallowed = 0

    async def held(self) -> bool:
        self.asking.set()
        try:
            await asyncio.sleep(INTERVAL_S)
        except asyncio.CancelledError:
            self.swallowed += 1
        self.asking.clear()
        return True


def test_a_cancellation_swallowed_by_the_lease_still_stops_the_watchdog(verifier):
    async def scenario():
        lease = CancelSwallowingLease()
        watchdog = Watchdog(verifier.url, RecordingRestarter(verifier), interval_s=INTERVAL_S, lease=lease)
        task = asyncio.create_task(watchdog.run())
        await lease.asking.wait()
        task.cancel()
        await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), timeout=5)
        return lease, task

    lease, task = asyncio.run(scenario())
    assert lease.swallowed == 1 and task.cancelled()
