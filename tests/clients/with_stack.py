"""Runs client test commands against one real local stack (`make test-clients`).

    python -m tests.clients.with_stack CMD [CMD ...]

Starts the four services on free loopback ports with the tests' small model (as tests/conftest.py), then runs
each CMD (a shell command line) with `DELIBERATE_ADDRESS` (the Scheduler, host:port) and `DELIBERATE_GATEWAY_URL`
(the OpenAI-compatible gateway, http://host:port) in its environment, stops
the stack, and exits non-zero when any command failed. The commands run one after another against the same
stack, so each language's suite sees a warm model.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from deliberate.cli.stack import Ports, Stack
from tests.conftest import TEST_MODEL


def main(commands: list[str]) -> int:
    if not commands:
        print(__doc__, file=sys.stderr)
        return 2
    log_dir = Path(tempfile.mkdtemp(prefix="deliberate-client-tests-"))
    # The clients' suites check the stream's order for a round of N drafts that all arrive: rounds all at once (in
    # the default cascade, round_started's N is the most a round may start).
    env = {"DELIBERATE_MODEL": os.environ.get("DELIBERATE_MODEL", TEST_MODEL), "DELIBERATE_DRAFT_COUNT": "all_at_once"}
    failed = []
    with Stack(ports=Ports.free(), env=env, log_dir=log_dir) as stack:
        for command in commands:
            print(f"== {command}  (against {stack.address}; service logs in {log_dir})", flush=True)
            done = subprocess.run(command, shell=True, env={**os.environ, **stack.client_env()})
            if done.returncode != 0:
                failed.append(command)
    for command in failed:
        print(f"FAILED: {command}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
