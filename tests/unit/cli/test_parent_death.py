"""A spawned process gets SIGTERM when the process that spawned it ends, however it ends, even in a session of its
own and under a parent that ignores SIGTERM; it outlives the thread that spawned it; it is its command (same pid)."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from deliberate.cli.parent_death import MODULE, spawn
from deliberate.cli.stack import Stack
from tests.processes import command_line, left_running

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")

SPAWNS_A_SLEEPER = textwrap.dedent(
    """
    import signal, sys, time
    from deliberate.cli.parent_death import spawn
    if sys.argv[1] == "ignores-sigterm":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    print(spawn(["sleep", "600"], start_new_session=True).pid, flush=True)
    time.sleep(600)
    """
)


@pytest.mark.parametrize("parent", ["plain", "ignores-sigterm"])
def test_a_spawned_process_ends_when_its_parent_is_killed(parent):
    program = subprocess.Popen([sys.executable, "-c", SPAWNS_A_SLEEPER, parent], stdout=subprocess.PIPE, text=True)
    try:
        sleeper = int(program.stdout.readline())
        wait_until(lambda: command_line(sleeper) == "sleep 600")  # the same pid, once it is its command
    finally:
        program.kill()
        program.wait()
    left = left_running({"sleeper": sleeper}, grace_s=5)
    for pid in left.values():
        os.kill(pid, signal.SIGKILL)
    assert not left


def test_a_spawned_process_outlives_the_thread_that_spawned_it():
    spawned: list[subprocess.Popen] = []

    def start() -> None:
        sleeper = spawn(["sleep", "600"])
        spawned.append(sleeper)
        # Ends only once the sleeper asked for the signal: the kernel would send it when this thread ends.
        wait_until(lambda: command_line(sleeper.pid) == "sleep 600")

    starter = threading.Thread(target=start)
    starter.start()
    starter.join()
    (sleeper,) = spawned
    try:
        time.sleep(0.5)  # the signal, were it sent when the thread ended, has arrived by now
        assert sleeper.poll() is None
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_process_whose_parent_ended_before_it_asked_for_the_signal_does_not_run(tmp_path):
    """As if `spawn`'s process had died between starting it and the kernel's promise: the expected parent is gone,
    so it ends as the signal would have ended it, without running its command."""
    ended = subprocess.Popen(["true"])
    ended.wait()
    marker = tmp_path / "ran"
    command = [sys.executable, "-m", MODULE, "--parent", str(ended.pid), "--", "touch", str(marker)]
    assert subprocess.run(command, timeout=30).returncode == -signal.SIGTERM
    assert not marker.exists()


def test_the_verifier_the_scheduler_starts_ends_with_the_scheduler():
    scheduler = Stack().command("scheduler")
    verifier = shlex.split(scheduler[scheduler.index("--verifier-command") + 1])
    assert verifier == [sys.executable, "-m", MODULE, "--", *Stack().command("verifier")]  # no --parent: whichever


def wait_until(condition, timeout_s: float = 10) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.05)
