"""Keeps a Stack's own processes (drafter, refiner, scheduler, gateway) running: one that exits unexpectedly is
started again after an exponential backoff; a crash loop gives up so the caller can stop the stack.

The Verifier is not among them: the Scheduler starts it, and the Scheduler's watchdog restarts it (docs/reliability.md).
`deliberate up` calls `check()` twice a second; tests and `deliberate bench soak` drive the same object in-process.
"""

from __future__ import annotations

import signal
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from .stack import Stack


class CrashLoop(RuntimeError):
    """A service failed `max_fast_failures` times in a row, each within `healthy_after_s` of its start."""


@dataclass
class Tracked:
    started_at: float
    fast_failures: int = 0  # consecutive exits within healthy_after_s of a start
    restart_at: float | None = None  # set while waiting out a backoff


@dataclass
class Supervisor:
    stack: Stack
    initial_backoff_s: float = 1.0
    max_backoff_s: float = 30.0
    # A service that stayed up this long is healthy again: its next exit starts over at the initial backoff.
    healthy_after_s: float = 60.0
    # 1 + 2 + 4 + 8 + 16 s of backoff before giving up: a service that cannot start does not flap for ever.
    max_fast_failures: int = 6
    log: Callable[[str], None] = field(default=lambda line: print(line, file=sys.stderr, flush=True))
    restarts: Counter = field(default_factory=Counter)
    tracked: dict[str, Tracked] = field(default_factory=dict, init=False)

    def check(self, now: float | None = None) -> None:
        """One round: notice exits, schedule their restarts, start those whose backoff has passed.
        Raises CrashLoop when a service exhausted its fast failures."""
        now = time.monotonic() if now is None else now
        for service, process in list(self.stack.processes.items()):
            state = self.tracked.setdefault(service, Tracked(started_at=now))
            if state.restart_at is not None:
                if now >= state.restart_at:
                    self.restart(service, state, now)
                continue
            if process.poll() is None:
                if now - state.started_at >= self.healthy_after_s:
                    state.fast_failures = 0
                continue
            self.schedule_restart(service, process.returncode, state, now)

    def schedule_restart(self, service: str, code: int, state: Tracked, now: float) -> None:
        fast = now - state.started_at < self.healthy_after_s
        state.fast_failures = state.fast_failures + 1 if fast else 1
        if state.fast_failures >= self.max_fast_failures:
            raise CrashLoop(
                f"{service} exited ({describe_exit(code)}) {state.fast_failures} times in a row, each within "
                f"{self.healthy_after_s:.0f}s of its start; giving up" + self.stack.log_hint(service)
            )
        backoff = min(self.initial_backoff_s * 2 ** (state.fast_failures - 1), self.max_backoff_s)
        state.restart_at = now + backoff
        self.log(
            f"{service} exited ({describe_exit(code)}); restart attempt {state.fast_failures} "
            f"of {self.max_fast_failures - 1} in {backoff:g}s"
        )

    def restart(self, service: str, state: Tracked, now: float) -> None:
        process = self.stack.start(service)
        state.started_at, state.restart_at = now, None
        self.restarts[service] += 1
        self.log(f"{service} restarted as pid {process.pid} (restart {self.restarts[service]} of {service})")


def describe_exit(code: int) -> str:
    """Popen's returncode in words: a negative code is the signal that ended the process."""
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"
