"""No service outlives the `deliberate up` that started it, however `up` ends: two signals in quick succession (the
second used to reach `up` inside its shutdown and abandon it), or SIGKILL (each service then gets the kernel's
parent-death signal, cli/parent_death.py). Afterwards no process `up` started runs and every port is free again."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import asdict, astuple
from pathlib import Path

import pytest

from deliberate.cli.stack import Ports
from tests.processes import descendants, left_running, port_free

pytestmark = pytest.mark.model

# `deliberate up` itself, with every service on a free port: it has flags for the Scheduler's and the gateway's
# ports only. It runs in the test's folder, so its .deliberate/ (state, Redis data) is the test's own.
RUNS_UP = textwrap.dedent(
    """
    import argparse, json, sys
    from deliberate.cli import up
    from deliberate.cli.stack import Ports
    ports = Ports(**json.loads(sys.argv[1]))
    parser = argparse.ArgumentParser(prog="deliberate")
    up.add_command(parser.add_subparsers())
    own_ports = ["--port", str(ports.scheduler), "--gateway-port", str(ports.gateway)]
    args = parser.parse_args(["up", *own_ports, *sys.argv[2:]])
    up.Ports = lambda **_: ports
    sys.exit(args.run(args))
    """
)
STARTED = "SERVING after"
# Stack.down gives each service 15 s to drain after SIGTERM, then kills it.
STOP_TIMEOUT_S = 120
# After SIGKILL of `up`: each service drains (--shutdown-grace-s, 5 s), the Scheduler stops its Verifier too.
ORPHAN_GRACE_S = 60


def test_a_second_signal_during_the_shutdown_is_ignored_and_nothing_is_left(tmp_path):
    with started_up(tmp_path) as up:
        # SIGTERM (say, `timeout`) with a Ctrl-C right behind it: both are pending when Python runs its handlers,
        # so the second handler runs inside the first one's shutdown, where it used to raise KeyboardInterrupt.
        os.kill(up.process.pid, signal.SIGTERM)
        os.kill(up.process.pid, signal.SIGINT)
        try:
            code = up.process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running {STOP_TIMEOUT_S} s after the signals; its output:\n{up.output()}")
        assert code == 0, up.output()
        assert "stopped: " in up.output()
        up.assert_nothing_left(grace_s=10)


def test_services_end_when_up_is_killed_outright(tmp_path):
    with started_up(tmp_path, "--state", "redis") as up:  # its own redis-server too
        assert any("redis-server" in name for name in up.started), up.started
        os.kill(up.process.pid, signal.SIGKILL)
        assert up.process.wait(timeout=10) == -signal.SIGKILL
        up.assert_nothing_left(grace_s=ORPHAN_GRACE_S)


class RunningUp:
    def __init__(self, folder: Path, options: tuple[str, ...]):
        self.log = folder / "up.log"
        self.ports = Ports.free()
        with self.log.open("w") as output:  # a file, not a pipe: a pipe nobody reads fills and blocks `up`
            self.process = subprocess.Popen(
                [sys.executable, "-c", RUNS_UP, json.dumps(asdict(self.ports)), "--log-dir", "logs", *options],
                cwd=folder,
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        self.started: dict[str, int] = {}

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

    def wait_serving(self, timeout_s: float = 300) -> None:
        """Until `up` reports every service SERVING; then `started` holds every process below it."""
        deadline = time.monotonic() + timeout_s
        while STARTED not in self.output():
            assert self.process.poll() is None, f"`up` exited with {self.process.returncode}:\n{self.output()}"
            assert time.monotonic() < deadline, f"not SERVING after {timeout_s} s:\n{self.output()}"
            time.sleep(0.5)
        self.started = descendants(self.process.pid)
        # Risk, Drafter, Refiner, Scheduler, the Verifier the Scheduler started, the gateway.
        assert sum("-m deliberate." in name for name in self.started) >= 6, self.started
        assert not port_free(self.ports.scheduler), "the probe must see a port that a service holds"

    def all_ports(self) -> list[int]:
        redis = re.search(r"redis://127\.0\.0\.1:(\d+)", self.output())
        return [*astuple(self.ports), *([int(redis[1])] if redis else [])]

    def assert_nothing_left(self, grace_s: float) -> None:
        still_running = left_running(self.started, grace_s)
        assert not still_running, f"left running: {still_running}\n{self.output()}"
        taken = [port for port in self.all_ports() if not port_free(port)]
        assert not taken, f"ports still taken: {taken}"

    def stop(self) -> None:
        """Whatever failed, leave nothing behind on the machine."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for pid in left_running(self.started, grace_s=ORPHAN_GRACE_S).values():
            os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def started_up(folder: Path, *options: str) -> Iterator[RunningUp]:
    up = RunningUp(folder, options)
    try:
        up.wait_serving()
        yield up
    finally:
        up.stop()
