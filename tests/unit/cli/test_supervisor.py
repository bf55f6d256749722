"""The supervisor's backoff and crash-loop limit, on real processes that exit at once."""

from __future__ import annotations

import sys
import time

import pytest

from deliberate.cli.stack import Stack
from deliberate.cli.supervisor import CrashLoop, Supervisor, describe_exit


class ExitingStack(Stack):
    """Every service is a Python process that exits with code 3 as soon as it starts."""

    def command(self, service: str) -> list[str]:
        return [sys.executable, "-c", "raise SystemExit(3)"]


def test_a_crash_loop_backs_off_exponentially_then_gives_up(tmp_path):
    stack = ExitingStack(log_dir=tmp_path)
    lines: list[str] = []
    supervisor = Supervisor(stack, initial_backoff_s=0.1, max_backoff_s=0.3, max_fast_failures=4, log=lines.append)
    stack.start("drafter")
    started = time.monotonic()
    with pytest.raises(CrashLoop, match=r"drafter exited \(exit code 3\) 4 times in a row"):
        while time.monotonic() - started < 10:
            supervisor.check()
            time.sleep(0.01)
    assert supervisor.restarts["drafter"] == 3
    backoffs = [line.split(" in ")[-1] for line in lines if "restart attempt" in line]
    assert backoffs == ["0.1s", "0.2s", "0.3s"]  # doubling, capped at max_backoff_s
    assert time.monotonic() - started >= 0.1 + 0.2 + 0.3
    assert "restart attempt 1 of 3" in lines[0] and "drafter restarted as pid" in lines[1]


def test_a_service_that_stayed_up_starts_over_at_the_initial_backoff(tmp_path):
    stack = ExitingStack(log_dir=tmp_path)
    lines: list[str] = []
    supervisor = Supervisor(stack, initial_backoff_s=1.0, healthy_after_s=60.0, max_fast_failures=3, log=lines.append)
    stack.start("refiner").wait()
    supervisor.check(now=0.0)  # first seen: tracked from now; it has exited, so a restart is scheduled
    supervisor.check(now=1.0)  # backoff passed: restarted
    stack.processes["refiner"].wait()
    supervisor.check(now=1.5)  # a fast failure again: 2 s
    assert lines[-1].endswith("restart attempt 2 of 2 in 2s")
    supervisor.check(now=3.5)
    stack.processes["refiner"].wait()
    supervisor.check(now=100.0)  # it had been up 96.5 s: counted as healthy, so no crash loop
    assert lines[-1].endswith("restart attempt 1 of 2 in 1s")


def test_exit_descriptions_name_the_signal():
    assert describe_exit(-9) == "signal SIGKILL"
    assert describe_exit(2) == "exit code 2"
