"""`deliberate up --solve-example` as `make run` runs it: every service starts, the example is solved and shown
to its final status, and Ctrl-C stops them all cleanly."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading

import pytest

from deliberate.cli.local_redis import free_port

pytestmark = pytest.mark.model


def test_up_solves_its_example_and_stops_on_ctrl_c(tmp_path):
    command = [
        sys.executable, "-m", "deliberate_client.cli", "up", "--solve-example", "--example-max-new-tokens", "24",
        "--port", str(free_port()), "--gateway-port", str(free_port()), "--log-dir", str(tmp_path),
    ]  # fmt: skip
    up = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    timer = threading.Timer(400, up.kill)  # a hang fails the test instead of blocking the suite
    timer.start()
    lines: list[str] = []
    try:
        for line in up.stdout:
            lines.append(line)
            if line.startswith("still serving"):
                break
        up.send_signal(signal.SIGINT)
        lines.extend(up.stdout)
        code = up.wait()
    finally:
        timer.cancel()
        up.kill()
    output = "".join(lines)
    assert "all four services, the risk model and the gateway SERVING" in output, output
    assert "\nstatus  " in output, output  # the example reached its final answer
    assert "still serving" in output, output
    assert code == 0, output
    assert "stopped: risk (0), drafter (0), refiner (0), scheduler (0), gateway (0)" in output, output
