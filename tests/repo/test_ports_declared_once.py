"""Ports are declared once, in deliberate/core/ports.py: the settings, the local stack and the default addresses
read that table. What cannot import it — deploy/compose.yaml, Prometheus' scrape config, the Kubernetes
manifests (and their rendered output), the Containerfiles, the Python client's default address — is checked
against it here."""

from __future__ import annotations

import argparse
import inspect
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from deliberate.cli.stack import Ports
from deliberate.core.ports import GATEWAY_PORT, SCHEDULER_PORTS, SERVICE_PORTS
from deliberate.gateway.settings import GatewaySettings
from deliberate.settings_table import SETTINGS
from deliberate.verifier.settings import VerifierSettings
from deliberate_client import cli as client_cli
from deliberate_client.client import DeliberateClient

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
CONTAINERFILES = sorted(DEPLOY.glob("Containerfile*"))
K8S_MANIFESTS = sorted((DEPLOY / "k8s").rglob("*.yaml")) + sorted((DEPLOY / "rendered").glob("*.yaml"))
DEPLOY_TEXTS = [DEPLOY / "compose.yaml", DEPLOY / "prometheus" / "prometheus.yml", *CONTAINERFILES, *K8S_MANIFESTS]

# Each service's ports, by the name it has in deploy/ (compose service, Kubernetes object, image target, host).
PORTS_OF = {
    name: {ports.grpc, ports.metrics} | ({ports.http} if ports.http else set()) for name, ports in SERVICE_PORTS.items()
} | {"gateway": {GATEWAY_PORT}}
# A service reached by its name: `verifier:50053`, `dns:///drafter-headless:50052`, `http://verifier:8081/health`,
# `risk.deliberate.svc.cluster.local:50055`; not an image's tag (`deliberate-drafter:0.1.0`).
ADDRESS = re.compile(
    rf"(?<![\w-])(?P<service>{'|'.join(PORTS_OF)})(?:-headless)?(?:\.[a-z0-9.-]+)?:(?P<port>\d+)(?![\d.])"
)
# Keys of a Kubernetes object whose number is a port (annotations hold theirs as strings).
K8S_PORT_KEYS = ("containerPort", "port", "targetPort", "number", "prometheus.io/port")


def env_port(service: str, variable: str) -> int | None:
    """The port a DELIBERATE_*PORT variable must hold for `service`; None for other variables."""
    if service == "gateway":
        return GATEWAY_PORT if variable == "DELIBERATE_PORT" else None
    ports = SERVICE_PORTS[service]
    return {"DELIBERATE_PORT": ports.grpc, "DELIBERATE_METRICS_PORT": ports.metrics,
            "DELIBERATE_HTTP_PORT": ports.http}.get(variable)  # fmt: skip


def test_the_settings_and_the_local_stack_default_to_the_table():
    for name, ports in SERVICE_PORTS.items():
        defaults = {key: field.default for key, field in SETTINGS[name].model_fields.items()}
        assert (defaults["port"], defaults["metrics_port"]) == (ports.grpc, ports.metrics)
        assert (getattr(Ports, name), getattr(Ports, f"{name}_metrics")) == (defaults["port"], defaults["metrics_port"])
    assert VerifierSettings.model_fields["http_port"].default == Ports.verifier_http == SERVICE_PORTS["verifier"].http
    assert GatewaySettings.model_fields["port"].default == Ports.gateway == GATEWAY_PORT


def test_the_python_client_calls_the_schedulers_default_port():
    """The client distribution does not depend on the servers, so it writes the address itself."""
    assert inspect.signature(DeliberateClient).parameters["address"].default == SCHEDULER_PORTS.local_address
    parser = argparse.ArgumentParser()
    client_cli.add_solve_options(parser)
    assert parser.get_default("address") == SCHEDULER_PORTS.local_address


def addresses(path: Path) -> Iterator[tuple[str, int]]:
    for match in ADDRESS.finditer(path.read_text()):
        yield match["service"], int(match["port"])


@pytest.mark.parametrize("path", DEPLOY_TEXTS, ids=lambda path: str(path.relative_to(DEPLOY)))
def test_every_address_in_deploy_names_a_port_of_its_service(path):
    wrong = [f"{service}:{port}" for service, port in addresses(path) if port not in PORTS_OF[service]]
    assert not wrong, f"not a port of that service (deliberate/core/ports.py): {wrong}"


def test_the_address_check_sees_every_services_ports():
    seen = {address for path in DEPLOY_TEXTS for address in addresses(path)}
    for name, ports in SERVICE_PORTS.items():
        assert {(name, ports.grpc), (name, ports.metrics)} <= seen, name


def port_numbers(node: object, service: str) -> Iterator[tuple[str, int, int | None]]:
    """(where, found, expected) for each port in a Kubernetes object; `expected` None: any port of the service."""
    if isinstance(node, list):
        for item in node:
            yield from port_numbers(item, service)
    if not isinstance(node, dict):
        return
    ports = SERVICE_PORTS.get(service)
    named = {"grpc": ports.grpc, "metrics": ports.metrics} if ports else {}
    for key, value in node.items():
        if key in K8S_PORT_KEYS and str(value).isdigit():
            yield key, int(value), named.get(node.get("name")) if key != "targetPort" else None
        else:
            yield from port_numbers(value, service)
    if str(node.get("name", "")).startswith("DELIBERATE_") and str(node.get("value", "")).isdigit():
        if (expected := env_port(service, node["name"])) is not None:
            yield node["name"], int(node["value"]), expected


def k8s_objects() -> Iterator[tuple[str, str, dict]]:
    """(file, service, object) for each object in the manifests that belongs to one of the services."""
    for path in K8S_MANIFESTS:
        for document in yaml.safe_load_all(path.read_text()):
            if not isinstance(document, dict):  # a kustomization's JSON patch
                continue
            name = (document.get("metadata") or {}).get("name", "")
            if (service := name.removesuffix("-headless")) in PORTS_OF:
                yield str(path.relative_to(DEPLOY)), service, document


def test_kubernetes_ports_are_the_tables():
    checked = 0
    for where, service, document in k8s_objects():
        for key, found, expected in port_numbers(document, service):
            checked += 1
            assert found in PORTS_OF[service], (where, service, key, found)
            assert expected is None or found == expected, (where, service, key, found, expected)
    assert checked > 50


def containerfile_stages(path: Path) -> dict[str, str]:
    """Each build stage's text, by its name (`FROM runtime AS drafter`)."""
    parts = re.split(r"^FROM \S+ AS (\S+)\s*$", path.read_text(), flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


@pytest.mark.parametrize("path", CONTAINERFILES, ids=lambda path: path.name)
def test_each_image_serves_and_exposes_its_services_ports(path):
    images = {name: text for name, text in containerfile_stages(path).items() if name in PORTS_OF}
    assert images
    for name, text in images.items():
        for variable, port in re.findall(r"\b(DELIBERATE_\w*PORT)=(\d+)", text):
            assert int(port) == env_port(name, variable), (name, variable)
        assert re.search(r"\bDELIBERATE_PORT=(\d+)", text), name
        (exposed,) = re.findall(r"^EXPOSE (.+)$", text, flags=re.MULTILINE)
        assert {int(port) for port in exposed.split()} == PORTS_OF[name], name
    if path.name == "Containerfile":
        assert set(images) == set(PORTS_OF)


def test_compose_publishes_and_configures_the_tables_ports():
    services = yaml.safe_load((DEPLOY / "compose.yaml").read_text())["services"]
    for name in PORTS_OF:
        for published in services[name].get("ports", []):
            assert int(str(published).rsplit(":", 1)[1]) in PORTS_OF[name], (name, published)
        for variable, value in (services[name].get("environment") or {}).items():
            if (expected := env_port(name, variable)) is not None:
                assert int(value) == expected, (name, variable)
    assert services["scheduler"]["ports"] == [f"{SCHEDULER_PORTS.grpc}:{SCHEDULER_PORTS.grpc}"]
