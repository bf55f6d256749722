"""The Python client installed alone (deliberate-api + deliberate-client) into an empty venv: no server code, no
engine, and a `deliberate solve` that works against the real stack."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# What the client must never bring: the servers' package, engines, and what the servers alone need.
NEVER_INSTALLED = ("deliberate", "torch", "transformers", "xllamacpp", "vllm", "pydantic", "opentelemetry")
CLIENT = {"deliberate-api", "deliberate-client"}


def run(command: list[str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    # No PYTHONPATH: the test process's own points at the checkout's services/.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def client_venv(tmp_path_factory) -> Path:
    """`pip install protos/python clients/python` (non-editable: what their wheels hold) into a fresh venv."""
    where = tmp_path_factory.mktemp("client-alone")
    venv = where / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    installed = run(
        [str(venv / "bin/python"), "-m", "pip", "install", "--quiet", str(ROOT / "protos/python"),
         str(ROOT / "clients/python")],
        cwd=where,
        timeout=600,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stderr[-3000:]
    return venv


def test_the_client_alone_installs_no_server_module_and_no_engine(client_venv):
    probe = run(
        [
            str(client_venv / "bin/python"),
            "-c",
            "import importlib.metadata as m, importlib.util as u, json, deliberate_client, deliberate_api; "
            "print(json.dumps({'dists': sorted(d.metadata['Name'].lower() for d in m.distributions()), "
            f"'modules': {{n: u.find_spec(n) is not None for n in {NEVER_INSTALLED!r}}}, "
            "'client': deliberate_client.__file__}))",
        ],
        cwd=client_venv.parent,
    )
    assert probe.returncode == 0, probe.stderr
    found = json.loads(probe.stdout)
    assert CLIENT | {"grpcio", "protobuf"} <= set(found["dists"])
    assert not [d for d in found["dists"] if d not in CLIENT and d.startswith(NEVER_INSTALLED)], found["dists"]
    assert not any(found["modules"].values()), found["modules"]
    assert found["client"].startswith(str(client_venv)), "the client came from the checkout, not the venv"


def test_solve_help_works_up_says_it_needs_the_servers_and_the_lab_is_no_client_command(client_venv):
    solve_help = run([str(client_venv / "bin/deliberate"), "solve", "--help"], cwd=client_venv.parent)
    assert solve_help.returncode == 0, solve_help.stderr
    assert "--address" in solve_help.stdout and "--example" in solve_help.stdout

    refused = run([str(client_venv / "bin/deliberate"), "up", "--solve-example"], cwd=client_venv.parent)
    assert refused.returncode == 2
    assert "server distribution" in refused.stderr and "deliberate up" in refused.stderr
    # The lab is no command of the client's: without the checkout's deliberate-bench, `bench` is unknown.
    lab = run([str(client_venv / "bin/deliberate"), "bench", "eval", "--limit", "1"], cwd=client_venv.parent)
    assert lab.returncode == 2 and "invalid choice: 'bench'" in lab.stderr


@pytest.mark.model
def test_deliberate_solve_from_the_client_alone_against_the_running_stack(client_venv, stack):
    solved = run(
        [
            str(client_venv / "bin/deliberate"), "solve", "Tom has 3 boxes of 12 eggs. He uses 5. How many are left?",
            "--address", stack.address, "--num-drafts", "2", "--max-new-tokens", "24",
            "--refine-max-new-tokens", "16", "--seed", "7", "--timeout", "240", "--json",
        ],
        cwd=client_venv.parent,
    )  # fmt: skip
    assert solved.returncode == 0, solved.stderr
    final = json.loads(solved.stdout)
    assert final["answer"].strip() and final["requestId"] and final["traceId"]
    answered = ("SOLVE_STATUS_VERIFIED", "SOLVE_STATUS_COMPUTATION_CHECKED", "SOLVE_STATUS_UNCHECKED")
    assert final["status"] in (*answered, "SOLVE_STATUS_UNVERIFIED")
    assert len([d for d in final["drafts"] if d.get("round", 0) == 0]) == 2


def test_the_example_request_data_ships_with_the_client(client_venv):
    example = run(
        [
            str(client_venv / "bin/python"),
            "-c",
            "from deliberate_client.examples import ads, promotion; from deliberate_client import notify; "
            "print(len(ads.load_catalog()), ads.CONSTRAINTS[-1]['rulePack'], len(promotion.PRODUCTS), "
            "promotion.constraints()[0]['rulePack'], notify.USER_AGENT)",
        ],
        cwd=client_venv.parent,
    )
    assert example.returncode == 0, example.stderr
    assert example.stdout.split() == ["100", "ad_selection", "8", "promotion", "deliberate-client/0.1.0"]
