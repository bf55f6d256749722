"""A program that runs the stack (a benchmark, `deliberate eval`) and is stopped by SIGTERM stops its services
too: Stack turns the signal into SystemExit, so its `__exit__` drains them instead of leaving them running."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.model

RUNS_THE_STACK = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from deliberate.cli.stack import Ports, Stack
    with Stack(ports=Ports.free(), log_dir=Path(sys.argv[1])) as stack:
        pids = {name: process.pid for name, process in stack.processes.items()}
        pids["verifier"] = stack.verifier_pid()  # the Scheduler starts and supervises it
        print("pids", json.dumps(pids), flush=True)
        time.sleep(600)
    """
)


def gone(pid: int) -> bool:
    """The process has exited (a zombie counts as exited: it runs nothing)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except FileNotFoundError:
        return True


def test_sigterm_stops_the_services_of_a_program_that_runs_the_stack(tmp_path):
    program = subprocess.Popen([sys.executable, "-c", RUNS_THE_STACK, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        line = next(line for line in program.stdout if line.startswith("pids "))
        pids = json.loads(line.removeprefix("pids "))
        assert {"drafter", "verifier", "refiner", "scheduler"} <= set(pids)
        assert not any(gone(pid) for pid in pids.values())
        program.send_signal(signal.SIGTERM)
        assert program.wait(timeout=60) == 128 + signal.SIGTERM
    finally:
        if program.poll() is None:  # a failed assertion above: still let the program stop its services
            program.terminate()
            try:
                program.wait(timeout=60)
            except subprocess.TimeoutExpired:
                program.kill()
    deadline = time.monotonic() + 10
    while not all(gone(pid) for pid in pids.values()) and time.monotonic() < deadline:
        time.sleep(0.2)
    still_running = {name: pid for name, pid in pids.items() if not gone(pid)}
    for pid in still_running.values():
        os.kill(pid, signal.SIGKILL)
    assert not still_running, f"left running after SIGTERM: {still_running}"
