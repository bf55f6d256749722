"""`python -m deliberate.core.healthcheck`: the images' HEALTHCHECK, against a real gRPC health server."""

from __future__ import annotations

from concurrent import futures

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from deliberate.core.healthcheck import main


@pytest.fixture
def health_server():
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield servicer, port
    server.stop(0)


def test_exits_zero_only_while_serving(health_server, capsys):
    servicer, port = health_server
    servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    assert main([f"127.0.0.1:{port}"]) == 0
    servicer.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
    assert main([f"127.0.0.1:{port}"]) == 1
    assert "NOT_SERVING" in capsys.readouterr().out


def test_defaults_to_the_service_port_from_the_environment(health_server, monkeypatch):
    servicer, port = health_server
    servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    monkeypatch.setenv("DELIBERATE_PORT", str(port))
    assert main([]) == 0


def test_an_unreachable_server_is_unhealthy_not_a_crash(capsys):
    probe = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    free_port = probe.add_insecure_port("127.0.0.1:0")  # bound, never started, then released: nobody serves it
    probe.stop(0)
    assert main([f"127.0.0.1:{free_port}", "--timeout-s", "1"]) == 1
    # gRPC reports a refused connection as UNAVAILABLE, or as DEADLINE_EXCEEDED while it is still retrying
    printed = capsys.readouterr().out
    assert "UNAVAILABLE" in printed or "DEADLINE_EXCEEDED" in printed, printed


def test_http_mode_exits_zero_only_for_a_200(capsys):
    """The gateway image's HEALTHCHECK (`--http /health`), against a real HTTP health endpoint."""
    import socket

    from deliberate.core.http_health import HttpHealthEndpoint

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    state = {"serving": True}
    endpoint = HttpHealthEndpoint("127.0.0.1", port, lambda: dict(state))
    endpoint.start()
    try:
        assert main([f"127.0.0.1:{port}", "--http", "/health"]) == 0
        state["serving"] = False
        assert main([f"127.0.0.1:{port}", "--http", "/health"]) == 1
        assert "HTTP 503" in capsys.readouterr().out
        assert main([f"127.0.0.1:{port}", "--http", "/nowhere"]) == 1
    finally:
        endpoint.stop()
