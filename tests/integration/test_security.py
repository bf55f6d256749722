"""Transport security and access, on one real stack: every service serves mTLS with certificates that
deploy/dev-certs.sh makes at test time, the Scheduler calls its three services over mTLS, and the Scheduler wants
a bearer token (docs/security.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from deliberate.cli.stack import SERVICES, Ports, Stack, TlsFiles
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb
from deliberate_client.client import DeliberateClient, build_request

from .conftest import ROOT

pytestmark = pytest.mark.model

FULL_TOKEN = "full-7c1d9e0b5a"  # every permission
SOLVER_TOKEN = "solver-3f8a2b61"  # may solve, not read the state or give feedback


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> TlsFiles:
    directory = tmp_path_factory.mktemp("certs")
    subprocess.run([ROOT / "deploy/dev-certs.sh", directory], check=True, capture_output=True)
    return TlsFiles.in_dir(directory)


@pytest.fixture(scope="module")
def secure_stack(certs, tmp_path_factory):
    state = tmp_path_factory.mktemp("secure-stack")
    tokens = state / "tokens"
    tokens.write_text(f"# token [permissions]\n{FULL_TOKEN}\n{SOLVER_TOKEN} solve\n")
    stack = Stack(ports=Ports.free(), log_dir=state / "logs", state_dir=state, tls=certs, auth_tokens_file=tokens)
    with stack:
        yield stack


def client(stack: Stack, token: str = "", with_certificate: bool = True) -> DeliberateClient:
    tls = stack.tls
    return DeliberateClient(
        stack.address,
        tls_ca_file=str(tls.ca),
        tls_cert_file=str(tls.client_cert) if with_certificate else "",
        tls_key_file=str(tls.client_key) if with_certificate else "",
        token=token,
    )


def short_request() -> pb.SolveRequest:
    return build_request("What is 17 + 25?", num_drafts=2, max_new_tokens=16, refine_max_new_tokens=8, seed=7)


def test_a_client_with_certificate_and_token_solves_through_four_mtls_services(secure_stack):
    with client(secure_stack, FULL_TOKEN) as deliberate:
        response = deliberate.solve(short_request(), timeout=240)
    # Drafts, verdicts and the refined answer: the Scheduler reached all three services over mTLS.
    assert len(response.drafts) == 2 * response.rounds
    assert all(report.verdict.rule_results for report in response.drafts)
    assert response.answer.strip()


def test_every_service_refuses_plain_text(secure_stack):
    for service in SERVICES:
        with grpc.insecure_channel(secure_stack.address_of(service)) as channel:
            with pytest.raises(grpc.RpcError) as refused:
                health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE, service


def test_a_tls_client_without_certificate_is_refused_in_the_handshake(secure_stack):
    with client(secure_stack, FULL_TOKEN, with_certificate=False) as deliberate:
        with pytest.raises(grpc.RpcError) as refused:
            deliberate.solve(short_request(), timeout=10)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    credentials = grpc.ssl_channel_credentials(secure_stack.tls.ca.read_bytes())
    with grpc.secure_channel(secure_stack.address_of("drafter"), credentials) as channel:
        with pytest.raises(grpc.RpcError) as refused:
            health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE


def test_the_scheduler_wants_a_known_token_with_the_permission(secure_stack):
    def state(token: str) -> pb.GetStateResponse:
        with client(secure_stack, token) as deliberate:
            return deliberate.stub.GetState(pb.GetStateRequest(), timeout=10)

    for token in ("", "wrong-token"):
        with client(secure_stack, token) as deliberate:
            with pytest.raises(grpc.RpcError) as refused:
                deliberate.solve(short_request(), timeout=10)
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED, token
            assert "bearer token" in refused.value.details()
            with pytest.raises(grpc.RpcError) as refused:  # a streaming method is refused the same way
                list(deliberate.solve_stream(short_request(), timeout=10))
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED, token

    with pytest.raises(grpc.RpcError) as refused:
        state(SOLVER_TOKEN)
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "state" in refused.value.details()
    with client(secure_stack, SOLVER_TOKEN) as deliberate:
        with pytest.raises(grpc.RpcError) as refused:
            deliberate.stub.SubmitFeedback(pb.SubmitFeedbackRequest(request_id="x"), timeout=10)
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED

    assert state(FULL_TOKEN).verifier.restarter == "process"


def test_health_needs_a_certificate_but_no_token(secure_stack):
    for service in SERVICES:
        with secure_stack.channel(service) as channel:
            reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING, service
    tls = secure_stack.tls
    probe = subprocess.run(
        [sys.executable, "-m", "deliberate.core.healthcheck", secure_stack.address,
         "--tls-ca-file", tls.ca, "--tls-cert-file", tls.cert, "--tls-key-file", tls.key],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert probe.returncode == 0 and "SERVING" in probe.stdout, probe.stdout + probe.stderr
    # The Verifier's HTTP health, which the watchdog probes, stays plain HTTP on its own port.
    with urllib.request.urlopen(f"http://127.0.0.1:{secure_stack.ports.verifier_http}/health", timeout=5) as reply:
        assert reply.status == 200


def test_the_gateway_serves_https_and_passes_the_callers_token_on(secure_stack):
    context = secure_stack.tls.ssl_context()
    with urllib.request.urlopen(f"{secure_stack.gateway_url}/health", timeout=5, context=context) as reply:
        assert json.load(reply)["scheduler"] == "SERVING"  # the gateway reaches the Scheduler over mTLS

    def chat(token: str | None) -> dict:
        body = {"model": "deliberate", "messages": [{"role": "user", "content": "2+2?"}], "num_drafts": 1,
                "max_tokens": 8, "max_draft_tokens": 16}  # fmt: skip
        headers = {"Content-Type": "application/json"} | ({"Authorization": f"Bearer {token}"} if token else {})
        request = urllib.request.Request(f"{secure_stack.gateway_url}/v1/chat/completions", json.dumps(body).encode(),
                                         headers)  # fmt: skip
        with urllib.request.urlopen(request, timeout=240, context=context) as reply:
            return json.load(reply)

    for token in (None, "wrong-token"):
        with pytest.raises(urllib.error.HTTPError) as refused:
            chat(token)
        assert refused.value.code == 401
        assert json.load(refused.value)["error"]["type"] == "authentication_error"
    assert chat(SOLVER_TOKEN)["choices"][0]["message"]["content"]


def test_deliberate_solve_takes_certificates_from_the_environment_and_the_token_from_a_file(secure_stack, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(SOLVER_TOKEN + "\n")
    env = {**os.environ, **secure_stack.client_env(), "DELIBERATE_TOKEN": "wrong-token"}

    def solve(*flags: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "deliberate_client.cli", "solve", "What is 2 + 3?", "--address",
             secure_stack.address, "--num-drafts", "1", "--max-new-tokens", "16", "--refine-max-new-tokens", "8",
             "--json", *flags],
            env=env, capture_output=True, text=True, timeout=240,
        )  # fmt: skip

    refused = solve()  # the wrong token from DELIBERATE_TOKEN, over mTLS from DELIBERATE_CLIENT_TLS_*
    assert refused.returncode == 2 and "UNAUTHENTICATED" in refused.stderr, refused.stderr
    solved = solve("--token-file", str(token_file))
    assert solved.returncode in (0, 1), solved.stderr
    assert json.loads(solved.stdout)["answer"]


def test_the_script_keeps_private_keys_private_and_none_is_committed(certs):
    for key in (certs.key, certs.client_key, certs.ca.with_name("ca-key.pem")):
        assert key.stat().st_mode & 0o077 == 0, key
    tracked = subprocess.run(["git", "grep", "-l", "PRIVATE KEY-----"], cwd=ROOT, capture_output=True, text=True)
    assert not [name for name in tracked.stdout.splitlines() if not name.endswith((".py", ".md", ".sh"))]
