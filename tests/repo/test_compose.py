"""deploy/compose.yaml: valid Compose, health-gated order, and the Verifier left to the watchdog."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from deploy.check_compose import check, interpolate

from deliberate.drafter.settings import DrafterSettings
from deliberate.refiner.settings import RefinerSettings
from deliberate.risk.settings import RiskSettings
from deliberate.scheduler.settings import SchedulerSettings
from deliberate.verifier.settings import VerifierSettings

COMPOSE = Path(__file__).resolve().parents[2] / "deploy/compose.yaml"
PROMETHEUS_CONFIG = COMPOSE.parent / "prometheus/prometheus.yml"
SETTINGS = {
    "scheduler": SchedulerSettings,
    "drafter": DrafterSettings,
    "verifier": VerifierSettings,
    "refiner": RefinerSettings,
    "risk": RiskSettings,
}
SERVICES = ("scheduler", "drafter", "verifier", "refiner", "risk")


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(interpolate(COMPOSE.read_text()))


def test_validates_against_the_compose_specification():
    assert sorted(check(COMPOSE)) == [
        "drafter",
        "gateway",
        "jaeger",
        "prometheus",
        "redis",
        "refiner",
        "risk",
        "scheduler",
        "verifier",
    ]


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


def test_the_verifier_calls_the_risk_model_once_it_is_healthy(compose):
    verifier = compose["services"]["verifier"]
    assert verifier["environment"]["DELIBERATE_RISK_ADDRESS"] == f"risk:{RiskSettings.model_fields['port'].default}"
    assert verifier["depends_on"]["risk"] == {"condition": "service_healthy"}
    assert compose["services"]["risk"]["restart"] == "unless-stopped"


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


def test_prometheus_scrapes_every_service_on_its_metrics_port(compose):
    prometheus = compose["services"]["prometheus"]
    config_mount = next(v for v in prometheus["volumes"] if v.endswith(":/etc/prometheus/prometheus.yml:ro"))
    assert (COMPOSE.parent / config_mount.split(":")[0]).resolve() == PROMETHEUS_CONFIG
    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text())
    targets = {job["job_name"]: job["static_configs"][0]["targets"] for job in config["scrape_configs"]}
    assert targets == {
        name: [f"{name}:{model.model_fields['metrics_port'].default}"] for name, model in SETTINGS.items()
    }
    for name in SERVICES:
        assert "DELIBERATE_METRICS_PORT" not in compose["services"][name]["environment"], "the default is scraped"


def test_prometheus_config_passes_promtool():
    if shutil.which("promtool") is None:
        pytest.skip("promtool is not installed (apt-get install prometheus)")
    result = subprocess.run(["promtool", "check", "config", str(PROMETHEUS_CONFIG)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
