"""The local stack's gateway: its port, its wiring to the Scheduler, and where clients are told to find it."""

from __future__ import annotations

import sys
from dataclasses import astuple

from deliberate.cli.stack import GATEWAY, Ports, Stack


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
