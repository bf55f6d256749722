"""What operators touch besides Solve: gRPC health, reflection through grpcurl, the Verifier's HTTP /health."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.model

SERVICE_NAMES = {
    "scheduler": "deliberate.scheduler.v1.SchedulerService",
    "drafter": "deliberate.drafter.v1.DrafterService",
    "verifier": "deliberate.verifier.v1.VerifierService",
    "refiner": "deliberate.refiner.v1.RefinerService",
}


def grpcurl(*args: str) -> str:
    binary = shutil.which("grpcurl") or str(Path(sys.executable).parent / "grpcurl")
    result = subprocess.run([binary, "-plaintext", *args], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize("service", sorted(SERVICE_NAMES))
def test_reflection_and_health_through_grpcurl(stack, service):
    address = stack.address_of(service)
    listed = grpcurl(address, "list").split()
    assert SERVICE_NAMES[service] in listed
    assert "grpc.health.v1.Health" in listed
    health = json.loads(
        grpcurl("-d", json.dumps({"service": SERVICE_NAMES[service]}), address, "grpc.health.v1.Health/Check")
    )
    assert health == {"status": "SERVING"}


def test_grpcurl_describes_the_solve_request(stack):
    described = grpcurl(stack.address, "describe", "deliberate.scheduler.v1.SolveRequest")
    assert "num_drafts" in described and "output_schema" in described


def test_verifier_http_health(stack):
    with urllib.request.urlopen(f"http://127.0.0.1:{stack.ports.verifier_http}/health", timeout=5) as reply:
        assert reply.status == 200
        body = json.loads(reply.read())
    assert body["serving"] is True and body["service"] == "verifier"
