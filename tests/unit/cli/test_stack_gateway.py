"""The local stack's gateway: its port, its wiring to the Scheduler, and where clients are told to find it."""

from __future__ import annotations

import sys
from dataclasses import astuple

from deliberate.cli.stack import GATEWAY, Ports, Stack, TlsFiles


def test_free_ports_include_a_distinct_gateway_port():
    ports = Ports.free()
    assert len(set(astuple(ports))) == len(astuple(ports)) and ports.gateway not in (0, 8080)
    assert Ports().gateway == 8080


def test_the_gateway_is_wired_to_the_scheduler_and_announced_to_clients():
    stack = Stack(ports=Ports(scheduler=50061, gateway=18080))
    assert stack.command(GATEWAY) == [
        sys.executable, "-m", "deliberate.gateway", "--host", "127.0.0.1", "--port", "18080",
        "--scheduler-address", "127.0.0.1:50061",
    ]  # fmt: skip
    assert stack.client_env() == {
        "DELIBERATE_ADDRESS": "127.0.0.1:50061",
        "DELIBERATE_GATEWAY_URL": "http://127.0.0.1:18080",
    }
    assert "DELIBERATE_GATEWAY_URL" not in Stack(with_gateway=False).client_env()


def test_an_unanswered_gateway_port_is_not_serving():
    assert not Stack(ports=Ports(gateway=Ports.free().gateway)).is_serving(GATEWAY)


def test_a_tls_stack_serves_every_service_with_its_certificate_and_calls_with_the_client_one(tmp_path):
    stack = Stack(ports=Ports(scheduler=50061, gateway=18080), tls=TlsFiles.in_dir(tmp_path), auth_tokens_file=tmp_path)
    serving = {"tls_cert_file": f"{tmp_path}/server.pem", "tls_key_file": f"{tmp_path}/server-key.pem",
               "tls_client_ca_file": f"{tmp_path}/ca.pem"}  # fmt: skip
    calling = {"downstream_tls_ca_file": f"{tmp_path}/ca.pem", "downstream_tls_cert_file": f"{tmp_path}/client.pem",
               "downstream_tls_key_file": f"{tmp_path}/client-key.pem"}  # fmt: skip
    assert stack.wiring("drafter").items() >= serving.items()
    assert not stack.wiring("drafter").keys() & {*calling, "auth_tokens_file"}
    assert stack.wiring("scheduler").items() >= (serving | calling | {"auth_tokens_file": str(tmp_path)}).items()
    assert stack.wiring(GATEWAY).items() >= (serving | calling).items()
    assert stack.client_env()["DELIBERATE_GATEWAY_URL"] == "https://127.0.0.1:18080"
    assert stack.client_env()["DELIBERATE_CLIENT_TLS_CERT_FILE"] == f"{tmp_path}/client.pem"
