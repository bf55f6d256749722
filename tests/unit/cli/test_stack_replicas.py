"""The local stack's Drafter replicas (cli/stack.py, `deliberate up --drafters N`): ports, wiring, engine threads.
Through real processes: tests/integration/test_drafter_replicas.py."""

from __future__ import annotations

import pytest

from deliberate.cli.stack import Ports, Stack


def test_a_stack_with_two_drafters_wires_both_into_the_scheduler():
    stack = Stack(ports=Ports.free(), drafters=2)
    assert stack.drafter_replicas == ["drafter", "drafter-2"]
    assert stack.services() == ("risk", "drafter", "drafter-2", "verifier", "refiner", "scheduler")
    second = stack.address_of("drafter-2")
    assert second != stack.address_of("drafter")
    assert stack.wiring("scheduler")["drafter_address"] == f"{stack.address_of('drafter')},{second}"
    command = stack.command("drafter-2")
    assert command[1:3] == ["-m", "deliberate.drafter"]
    assert command[command.index("--port") + 1] == second.rsplit(":", 1)[1]
    assert stack.metrics_url("drafter-2") != stack.metrics_url("drafter")
    assert stack.replica_env("drafter-2") == {"DELIBERATE_ENGINE_THREADS": "1"}
    assert stack.replica_env("refiner") == {}


def test_a_stack_with_one_drafter_is_wired_as_before():
    stack = Stack(ports=Ports.free())
    assert stack.wiring("scheduler")["drafter_address"] == stack.address_of("drafter")
    assert stack.replica_env("drafter") == {}  # every CPU, as before
    assert "drafter-2" not in stack.services()


def test_a_stack_needs_a_drafter():
    with pytest.raises(ValueError, match="at least 1"):
        Stack(ports=Ports.free(), drafters=0)


def test_drafter_env_reaches_every_drafter_replica_and_no_other_service(monkeypatch):
    monkeypatch.delenv("DELIBERATE_ENGINE_THREADS", raising=False)
    stack = Stack(ports=Ports.free(), drafters=2, env={"DELIBERATE_MODEL": "m"},
                  drafter_env={"DELIBERATE_ENGINE_THREADS": "1", "DELIBERATE_MODEL": "d"})  # fmt: skip
    for drafter in stack.drafter_replicas:
        assert stack.service_env(drafter)["DELIBERATE_ENGINE_THREADS"] == "1"
        assert stack.service_env(drafter)["DELIBERATE_MODEL"] == "d"  # over `env`
    assert "DELIBERATE_ENGINE_THREADS" not in stack.service_env("refiner")
    assert stack.service_env("refiner")["DELIBERATE_MODEL"] == "m"


def test_refiner_env_gives_the_refiner_its_own_model_and_nothing_else(monkeypatch):
    monkeypatch.setenv("DELIBERATE_MODEL", "inherited")
    stack = Stack(ports=Ports.free(), drafters=2, drafter_env={"DELIBERATE_MODEL": "small"},
                  refiner_env={"DELIBERATE_MODEL": "large"})  # fmt: skip
    assert stack.service_env("refiner")["DELIBERATE_MODEL"] == "large"
    assert {stack.service_env(d)["DELIBERATE_MODEL"] for d in stack.drafter_replicas} == {"small"}
    assert stack.service_env("scheduler")["DELIBERATE_MODEL"] == "inherited"
