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

# Its output goes to a file, not a pipe: a pipe nobody reads fills and blocks whoever writes to it.
RUNS_THE_STACK = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from deliberate.cli.stack import Ports, Stack
    here = Path(sys.argv[1])
    with Stack(ports=Ports.free(), log_dir=here / "logs") as stack:
        pids = {name: process.pid for name, process in stack.processes.items()}
        pids["verifier"] = stack.verifier_pid()  # the Scheduler starts and supervises it
        (here / "pids.json").write_text(json.dumps(pids))
        time.sleep(600)
    """
)
# Stack.down gives each service 15 s to drain after SIGTERM, then kills it.
STOP_TIMEOUT_S = 120


def gone(pid: int) -> bool:
    """The process has exited (a zombie counts as exited: it runs nothing)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")
    except FileNotFoundError:
        return True


def started_pids(program: subprocess.Popen, path: Path, timeout_s: float = 300) -> dict[str, int]:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert program.poll() is None and time.monotonic() < deadline, "the stack did not start"
        time.sleep(0.5)
    return json.loads(path.read_text())


def test_sigterm_stops_the_services_of_a_program_that_runs_the_stack(tmp_path):
    log = tmp_path / "program.log"
    with log.open("w") as output:
        program = subprocess.Popen(
            [sys.executable, "-c", RUNS_THE_STACK, str(tmp_path)], stdout=output, stderr=subprocess.STDOUT
        )
    pids: dict[str, int] = {}
    try:
        pids = started_pids(program, tmp_path / "pids.json")
        assert {"drafter", "verifier", "refiner", "scheduler"} <= set(pids)
        assert not any(gone(pid) for pid in pids.values())
        program.send_signal(signal.SIGTERM)
        try:
            code = program.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running {STOP_TIMEOUT_S} s after SIGTERM; its output:\n{log.read_text()[-3000:]}")
        assert code == 128 + signal.SIGTERM, log.read_text()[-3000:]
    finally:
        if program.poll() is None:  # a failed assertion above: still let the program stop its services
            program.terminate()
            try:
                program.wait(timeout=STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                program.kill()
        still_running = left_running(pids)
        for pid in still_running.values():  # whatever failed, leave no service behind on the machine
            os.kill(pid, signal.SIGKILL)
    assert not still_running, f"left running after SIGTERM: {still_running}"


def left_running(pids: dict[str, int], grace_s: float = 10) -> dict[str, int]:
    deadline = time.monotonic() + grace_s
    while not all(gone(pid) for pid in pids.values()) and time.monotonic() < deadline:
        time.sleep(0.2)
    return {name: pid for name, pid in pids.items() if not gone(pid)}


def test_the_stack_hands_back_sigterm_as_it_found_it():
    program = textwrap.dedent(
        """
        import signal, tempfile
        from pathlib import Path
        from deliberate.cli.stack import Ports, Stack
        with Stack(ports=Ports.free(), log_dir=Path(tempfile.mkdtemp()), with_gateway=False):
            inside = signal.getsignal(signal.SIGTERM)
        after = signal.getsignal(signal.SIGTERM)
        print("handled inside:", inside is not signal.SIG_DFL, "default after:", after is signal.SIG_DFL)
        """
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300)
    assert "handled inside: True default after: True" in done.stdout, done.stdout + done.stderr[-3000:]
