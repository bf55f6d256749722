"""A program that runs the stack (a benchmark, `deliberate bench eval`) and is stopped by SIGTERM stops its services
too: Stack turns the signal into SystemExit, so its `__exit__` drains them instead of leaving them running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from tests.processes import gone, left_running, wait_for_json

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
        # Written whole: the test reads the file as soon as it exists.
        (here / "pids.json.partial").write_text(json.dumps(pids))
        (here / "pids.json.partial").replace(here / "pids.json")
        time.sleep(600)
    """
)
# Stack.down gives each service 15 s to drain after SIGTERM, then kills it.
STOP_TIMEOUT_S = 120


def test_sigterm_stops_the_services_of_a_program_that_runs_the_stack(tmp_path):
    log = tmp_path / "program.log"
    with log.open("w") as output:
        program = subprocess.Popen(
            [sys.executable, "-c", RUNS_THE_STACK, str(tmp_path)], stdout=output, stderr=subprocess.STDOUT
        )
    pids: dict[str, int] = {}
    try:
        pids = wait_for_json(tmp_path / "pids.json", still_writing=lambda: program.poll() is None)
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
