"""deploy/compose.yaml: valid Compose, health-gated order, and the Verifier left to the watchdog."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from deploy.check_compose import check, interpolate

COMPOSE = Path(__file__).resolve().parents[2] / "deploy/compose.yaml"
SERVICES = ("scheduler", "drafter", "verifier", "refiner")


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(interpolate(COMPOSE.read_text()))


def test_validates_against_the_compose_specification():
    assert sorted(check(COMPOSE)) == ["drafter", "gateway", "jaeger", "redis", "refiner", "scheduler", "verifier"]


def test_a_misspelled_key_is_rejected(tmp_path):
    broken = tmp_path / "compose.yaml"
    broken.write_text(COMPOSE.read_text().replace('restart: "no"', 'restartt: "no"'))
    with pytest.raises(ValueError, match="restartt"):
        check(broken)


def test_the_scheduler_starts_after_its_three_backends_are_healthy(compose):
    depends = compose["services"]["scheduler"]["depends_on"]
    assert {name: d["condition"] for name, d in depends.items()} == {
        "verifier": "service_healthy",
        "drafter": "service_healthy",
        "refiner": "service_healthy",
        "redis": "service_healthy",
    }


def test_only_the_watchdog_restarts_the_verifier_by_the_name_it_is_given(compose):
    services = compose["services"]
    assert services["verifier"]["restart"] == "no"
    scheduler_env = services["scheduler"]["environment"]
    assert scheduler_env["DELIBERATE_RESTARTER"] == "container"
    assert scheduler_env["DELIBERATE_VERIFIER_CONTAINER"] == services["verifier"]["container_name"]
    socket = scheduler_env["DELIBERATE_CONTAINER_SOCKET"]
    assert any(volume.endswith(f":{socket}") for volume in services["scheduler"]["volumes"])
    assert all("volumes" not in services[name] for name in ("verifier", "drafter", "refiner"))


def test_services_are_hardened_and_export_traces_to_jaeger(compose):
    for name in SERVICES:
        service = compose["services"][name]
        assert service["read_only"] is True, name
        assert service["cap_drop"] == ["ALL"], name
        assert service["environment"]["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://jaeger:4317", name
        assert service["build"]["target"] == name


def test_the_gateway_fronts_the_scheduler_once_it_is_healthy(compose):
    gateway = compose["services"]["gateway"]
    assert gateway["depends_on"] == {"scheduler": {"condition": "service_healthy"}}
    assert gateway["environment"]["DELIBERATE_SCHEDULER_ADDRESS"] == "scheduler:50051"
    assert gateway["ports"] == ["8080:8080"] and gateway["build"]["target"] == "gateway"
    assert gateway["read_only"] is True and gateway["cap_drop"] == ["ALL"]
    assert gateway["environment"]["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://jaeger:4317"


def test_the_scheduler_keeps_its_state_in_redis_on_a_named_volume(compose):
    services = compose["services"]
    assert services["scheduler"]["environment"]["DELIBERATE_STATE_URL"] == "redis://redis:6379/0"
    assert not any(volume.endswith(":/var/lib/deliberate") for volume in services["scheduler"]["volumes"])
    redis = services["redis"]
    command = redis["command"]
    assert command[command.index("--appendonly") + 1] == "yes"
    data = command[command.index("--dir") + 1]
    assert f"redis-data:{data}" in redis["volumes"] and "redis-data" in compose["volumes"]
    assert redis["read_only"] is True and redis["cap_drop"] == ["ALL"]
    assert "redis-cli" in redis["healthcheck"]["test"]
