"""The Scheduler's watchdog over the Verifier: probe `GET /health`, restart after consecutive failures.

Every `interval_s` (30 s by default) the watchdog asks the Verifier's HTTP health endpoint (core/http_health.py:
200 while serving, 503 otherwise). After `failures_to_restart` consecutive failed probes it restarts the Verifier
through a pluggable restarter (restarters.py: a supervised process, a command, a container, Kubernetes pods).

Several Scheduler replicas may watch one Verifier. With a `lease` (lease.py's `RedisLease`, when the Scheduler's
state is in Redis) only the lease holder restarts it; the others keep probing and reporting health. Without one,
the watchdog acts alone, as the single Scheduler of a laptop does.

Each restart raises an alert three ways: a log event, the `deliberate_watchdog_restarts_total` metric counter and a
"verifier.restarted" event on a `watchdog.restart` span.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Protocol

from opentelemetry import trace

from ...core import metrics
from .restarters import Restarter, RestartError

log = logging.getLogger("deliberate.watchdog")

# Span and metric attribute names (the `deliberate.` prefix, as in core/telemetry.py).
RESTARTER = "deliberate.watchdog.restarter"
FAILURES = "deliberate.watchdog.consecutive_failures"
ACTION = "deliberate.watchdog.action"
# While a starting or restarted Verifier is awaited, it is probed at least this often (seconds).
GRACE_PROBE_S = 1.0


class Lease(Protocol):
    holder: str

    async def held(self) -> bool:
        """Takes or renews the lease; True while this holder has it."""
        ...

    async def release(self) -> None: ...


def stop_if_cancelled() -> None:
    """Honours a cancellation that an await swallowed: redis-py's read timeout racing a task's cancel (Python
    3.11's `asyncio.timeout`) can drop the CancelledError, and the loop would then never stop."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


class Watchdog:
    """Probes `url` every `interval_s`; after `failures_to_restart` consecutive failures, restarts the target once.

    After a restart, failures are not counted for `restart_grace_s` (the Verifier is booting), nor for
    `startup_grace_s` (default: the same) after `run()` starts; the first healthy probe ends either grace early.
    A restarter that raises is logged and tried again at the next threshold.
    Run it as a task (`asyncio.create_task(watchdog.run())`) and cancel the task to stop it.
    """

    def __init__(
        self,
        url: str,
        restarter: Restarter,
        interval_s: float = 30.0,
        failures_to_restart: int = 3,
        timeout_s: float = 2.0,
        restart_grace_s: float = 60.0,
        startup_grace_s: float | None = None,
        on_restart: Callable[[str], object] | None = None,
        lease: Lease | None = None,
    ):
        if failures_to_restart < 1:
            raise ValueError("failures_to_restart must be at least 1")
        self.url = url
        self.restarter = restarter
        self.interval_s = interval_s
        self.failures_to_restart = failures_to_restart
        self.timeout_s = timeout_s
        self.restart_grace_s = restart_grace_s
        self.startup_grace_s = restart_grace_s if startup_grace_s is None else startup_grace_s
        self.on_restart = on_restart
        self.lease = lease
        self.acting = lease is None  # may restart; with a lease, only while holding it

        self.healthy = False  # until the first probe says otherwise
        self.consecutive_failures = 0
        self.restarts = 0
        self.restart_failures = 0
        self.last_restart_at: float | None = None  # wall-clock seconds since the epoch
        self.last_restart = ""  # the restarter's description, or why it failed
        self.last_error = ""  # why the last failed probe failed
        self.last_probe_at: float | None = None
        self._grace_until: float | None = None  # monotonic
        self._healthy_event = asyncio.Event()

        # Probes go straight to the Verifier: a proxy from the environment must not stand in between.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        self.tracer = trace.get_tracer("deliberate.watchdog")

    @property
    def in_grace(self) -> bool:
        return self._grace_until is not None and time.monotonic() < self._grace_until

    async def run(self) -> None:
        # The series exist (at 0) from the start, so a dashboard's increase() sees the first one. Not in __init__:
        # the service's meter provider is installed later, and a proxy drops what it is given before that.
        metrics.RESTARTS.add(0, {"restarter": self.restarter.name})
        metrics.HEARTBEAT_FAILURES.add(0)
        # The Verifier may be booting alongside the Scheduler (and is, for the process restarter).
        self._grace_until = time.monotonic() + self.startup_grace_s
        try:
            while True:
                self.record(await self.probe())
                await self.update_role()
                stop_if_cancelled()
                if self.consecutive_failures >= self.failures_to_restart:
                    if self.acting:
                        await self.restart()
                    elif self.consecutive_failures == self.failures_to_restart:  # once per outage
                        log.warning(
                            "verifier unhealthy; the lease holder restarts it",
                            extra={"url": self.url, "failures": self.consecutive_failures},
                        )
                await asyncio.sleep(self.next_probe_in())
        finally:
            if self.lease is not None and self.acting:
                await self.lease.release()  # the next holder need not wait for the expiry

    def next_probe_in(self) -> float:
        """The heartbeat interval; while a starting or restarted Verifier is awaited (grace, not yet healthy), at
        most GRACE_PROBE_S, so health (GetState, `deliberate_verifier_up`) turns true soon after it answers."""
        if self.in_grace and not self.healthy:
            return min(self.interval_s, GRACE_PROBE_S)
        return self.interval_s

    async def update_role(self) -> None:
        """With a lease, take or renew it on every heartbeat (its expiry is several heartbeats long)."""
        if self.lease is None:
            return
        acting = await self.lease.held()
        if acting != self.acting:
            log.info(
                "watchdog lease %s", "taken: this replica restarts the Verifier" if acting else "lost: observing only"
            )
        if acting and not self.acting and not self.healthy:
            # The previous holder may be restarting the Verifier (a restart longer than the lease lets the lease
            # lapse): failures seen while observing do not count, and the restart grace applies. A Verifier that
            # answered the last probe is not being restarted: its next failures count at once.
            self.consecutive_failures = 0
            self._grace_until = time.monotonic() + self.restart_grace_s
        self.acting = acting

    async def probe(self) -> bool:
        """One `GET url` in a worker thread, so a slow Verifier never blocks the Scheduler's event loop."""
        ok, self.last_error = await asyncio.to_thread(self._probe)
        self.last_probe_at = time.time()
        return ok

    def _probe(self) -> tuple[bool, str]:
        try:
            with self._opener.open(self.url, timeout=self.timeout_s) as response:
                return (True, "") if response.status == 200 else (False, f"HTTP {response.status}")
        except urllib.error.HTTPError as error:  # a 503 while not serving lands here
            return False, f"HTTP {error.code}"
        except (urllib.error.URLError, OSError) as error:  # refused, unreachable, timed out
            reason = getattr(error, "reason", error)
            return False, f"{type(reason).__name__}: {reason}"

    def record(self, ok: bool) -> None:
        self.healthy = ok
        if ok:
            self.consecutive_failures = 0
            self._grace_until = None
            self._healthy_event.set()
            return
        self._healthy_event.clear()
        metrics.HEARTBEAT_FAILURES.add(1)
        if not self.in_grace:
            self.consecutive_failures += 1

    async def restart(self) -> None:
        failures, self.consecutive_failures = self.consecutive_failures, 0
        attributes = {RESTARTER: self.restarter.name}
        with self.tracer.start_as_current_span(
            "watchdog.restart", attributes={**attributes, FAILURES: failures}
        ) as span:
            try:
                description = await self.restarter.restart()
            except Exception as error:  # the loop must survive; the next threshold tries again
                self.restart_failures += 1
                self.last_restart = f"failed: {error}"
                span.record_exception(error)
                span.set_status(trace.StatusCode.ERROR, str(error))
                log.error(
                    "verifier restart failed",
                    extra={
                        "url": self.url,
                        "restarter": self.restarter.name,
                        "failures": failures,
                        "error": str(error),
                    },
                    exc_info=not isinstance(error, RestartError),  # a traceback only for the unexpected
                )
                return
            self.restarts += 1
            self.last_restart_at = time.time()
            self.last_restart = description
            self._grace_until = time.monotonic() + self.restart_grace_s
            span.add_event("verifier.restarted", {FAILURES: failures, ACTION: description})
            metrics.RESTARTS.add(1, {"restarter": self.restarter.name})
            log.warning(
                "verifier restarted",
                extra={
                    "url": self.url,
                    "restarter": self.restarter.name,
                    "failures": failures,
                    "action": description,
                    "restarts": self.restarts,
                },
            )
        await self._notify(description)

    async def _notify(self, description: str) -> None:
        if self.on_restart is None:
            return
        try:
            result = self.on_restart(description)
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("on_restart callback failed")

    async def wait_healthy(self, timeout_s: float | None) -> bool:
        """True once a probe has found the target healthy, False if `timeout_s` passes first (None: no limit)."""
        if self.healthy:
            return True
        try:
            await asyncio.wait_for(self._healthy_event.wait(), timeout_s)
        except TimeoutError:
            return False
        return True
