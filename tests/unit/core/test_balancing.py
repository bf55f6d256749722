"""Address settings that name several replicas: the gRPC target and service config they become
(core/balancing.py), the Scheduler's validation, and a balanced mTLS channel.
The balancing itself, through real processes: tests/integration/test_drafter_replicas.py."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from pydantic import ValidationError

from deliberate.core.balancing import channel_options, grpc_target, is_balanced
from deliberate.core.tls import aio_channel, channel_credentials, server_credentials
from deliberate.scheduler.settings import SchedulerSettings

DRAFTER = "deliberate.drafter.v1.DrafterService"
ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("address", "target"),
    [
        ("127.0.0.1:50052", "127.0.0.1:50052"),
        ("drafter:50052", "drafter:50052"),
        ("127.0.0.1:50052,127.0.0.1:50062", "ipv4:127.0.0.1:50052,127.0.0.1:50062"),
        (" 10.0.0.1:1 , 10.0.0.2:2 ", "ipv4:10.0.0.1:1,10.0.0.2:2"),
        ("[::1]:50052,[::1]:50062", "ipv6:[::1]:50052,[::1]:50062"),
        ("dns:///drafter-headless:50052", "dns:///drafter-headless:50052"),
        ("ipv4:10.0.0.1:1,10.0.0.2:2", "ipv4:10.0.0.1:1,10.0.0.2:2"),
    ],
)
def test_addresses_become_grpc_targets(address, target):
    assert grpc_target(address) == target


@pytest.mark.parametrize(
    ("address", "words"),
    [
        ("drafter-1:50052,drafter-2:50052", "dns:///name:port"),
        ("127.0.0.1:50052,", "empty entry"),
        ("127.0.0.1:50052,127.0.0.1", "not host:port"),
        ("127.0.0.1:1,[::1]:2", "IPv4 and IPv6"),
        ("  ", "empty"),
    ],
)
def test_a_list_that_grpc_could_not_resolve_is_refused_with_the_reason(address, words):
    with pytest.raises(ValueError, match=words):
        grpc_target(address)


def test_one_host_port_connects_as_before_without_a_service_config():
    assert not is_balanced("127.0.0.1:50052")
    assert channel_options("drafter:50052", DRAFTER) == ()


@pytest.mark.parametrize("address", ["127.0.0.1:1,127.0.0.1:2", "dns:///drafter-headless:50052", "ipv4:10.0.0.1:1"])
def test_replicas_get_round_robin_with_health_checking_on_the_service(address):
    options = dict(channel_options(address, DRAFTER))
    config = json.loads(options["grpc.service_config"])
    assert config["loadBalancingConfig"] == [{"round_robin": {}}]
    assert config["healthCheckConfig"] == {"serviceName": DRAFTER}


def test_an_ip_list_checks_the_first_replicas_address_under_tls():
    assert dict(channel_options("127.0.0.1:1,127.0.0.1:2", DRAFTER))["grpc.default_authority"] == "127.0.0.1:1"
    assert "grpc.default_authority" not in dict(channel_options("dns:///drafter-headless:50052", DRAFTER))


def test_the_scheduler_refuses_a_list_with_names_at_start_up():
    with pytest.raises(ValidationError, match="IP addresses only"):
        SchedulerSettings(drafter_address="drafter-1:50052,drafter-2:50052")
    assert SchedulerSettings(refiner_address="127.0.0.1:1,127.0.0.1:2").refiner_address == "127.0.0.1:1,127.0.0.1:2"


def test_replicas_over_mutual_tls_are_each_called_with_the_hostname_checked(tmp_path):
    """Two health servers serving mTLS with deploy/dev-certs.sh's certificate on loopback; a channel built as the
    Scheduler builds it (core/tls.py, core/balancing.py) reaches both through one IP-list address."""
    certs = tmp_path / "certs"
    subprocess.run([ROOT / "deploy/dev-certs.sh", certs], check=True, capture_output=True)

    async def run() -> set[str]:
        credentials = server_credentials(
            str(certs / "server.pem"), str(certs / "server-key.pem"), str(certs / "ca.pem")
        )
        servers, addresses = [], []
        for name in ("first", "second"):
            server = grpc.aio.server()
            servicer = health.aio.HealthServicer()
            health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
            port = server.add_secure_port("127.0.0.1:0", credentials)
            await server.start()
            for service in (DRAFTER, name):  # `name` is SERVING on this server only: it tells them apart
                await servicer.set(service, health_pb2.HealthCheckResponse.SERVING)
            servers.append(server)
            addresses.append(f"127.0.0.1:{port}")
        address = ",".join(addresses)
        client = channel_credentials(str(certs / "ca.pem"), str(certs / "client.pem"), str(certs / "client-key.pem"))
        reached = []
        async with aio_channel(grpc_target(address), client, channel_options(address, DRAFTER)) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            for _ in range(8):  # "first" is known on the first replica only: NOT_FOUND means the second answered
                try:
                    await stub.Check(health_pb2.HealthCheckRequest(service="first"), timeout=10)
                    reached.append("first")
                except grpc.aio.AioRpcError as error:
                    assert error.code() == grpc.StatusCode.NOT_FOUND, error.details()  # not a TLS failure
                    reached.append("second")
        for server in servers:
            await server.stop(None)
        return set(reached)

    assert asyncio.run(run()) == {"first", "second"}


def test_a_call_to_a_peer_that_restarts_is_retried_until_it_serves_again():
    """The Drafter's and Refiner's channels retry UNAVAILABLE (RETRY_POLICY): a call made while the channel still
    backs off from a peer that was down succeeds once the peer serves again; one to a peer that stays down still
    answers UNAVAILABLE, after the retries."""
    import socket
    import time

    health_service = "grpc.health.v1.Health"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    address = f"127.0.0.1:{port}"

    async def run() -> tuple[grpc.StatusCode, float, int]:
        async with aio_channel(address, None, channel_options(address, health_service, retry=True)) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            started = time.monotonic()
            try:
                await stub.Check(health_pb2.HealthCheckRequest(), timeout=10)
                down = grpc.StatusCode.OK
            except grpc.aio.AioRpcError as error:
                down = error.code()
            waited = time.monotonic() - started
            server = grpc.aio.server()
            health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
            server.add_insecure_port(address)
            await server.start()  # the channel is still backing off from the failed attempts
            try:
                reply = await stub.Check(health_pb2.HealthCheckRequest(), timeout=10)
            finally:
                await server.stop(None)
        return down, waited, reply.status

    down, waited, status = asyncio.run(run())
    assert down == grpc.StatusCode.UNAVAILABLE and waited >= 0.3  # tried again (random waits) before giving up
    assert status == health_pb2.HealthCheckResponse.SERVING


def test_retry_is_asked_for_per_service_and_keeps_the_balancing():
    assert channel_options("127.0.0.1:50052", DRAFTER) == ()
    single = json.loads(dict(channel_options("127.0.0.1:50052", DRAFTER, retry=True))["grpc.service_config"])
    assert single["methodConfig"][0]["name"] == [{"service": DRAFTER}]
    assert "loadBalancingConfig" not in single
    balanced = dict(channel_options("dns:///drafter-headless:50052", DRAFTER, retry=True))
    both = json.loads(balanced["grpc.service_config"])
    assert both["loadBalancingConfig"] == [{"round_robin": {}}] and both["methodConfig"][0]["retryPolicy"]
