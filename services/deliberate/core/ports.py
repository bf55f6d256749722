"""Every service's default ports, declared once: the settings' defaults, the local stack (`deliberate up`) and the
Scheduler's default downstream addresses read them here. deploy/compose.yaml, the Kubernetes manifests and the
Containerfiles cannot import Python: tests/repo/test_ports_declared_once.py checks that they agree with this table.
"""

from __future__ import annotations

from dataclasses import dataclass

LOCALHOST = "127.0.0.1"


@dataclass(frozen=True)
class ServicePorts:
    grpc: int
    metrics: int  # Prometheus GET /metrics
    http: int | None = None  # an HTTP endpoint of its own, where the service has one

    @property
    def local_address(self) -> str:
        """host:port of the service on this machine, at its default gRPC port."""
        return f"{LOCALHOST}:{self.grpc}"


SCHEDULER_PORTS = ServicePorts(grpc=50051, metrics=9464)
DRAFTER_PORTS = ServicePorts(grpc=50052, metrics=9465)
VERIFIER_PORTS = ServicePorts(grpc=50053, metrics=9466, http=8081)  # http: GET /health, the watchdog's probe
REFINER_PORTS = ServicePorts(grpc=50054, metrics=9467)
RISK_PORTS = ServicePorts(grpc=50055, metrics=9468)
# The OpenAI-compatible gateway speaks HTTP only.
GATEWAY_PORT = 8080

SERVICE_PORTS = {
    "scheduler": SCHEDULER_PORTS,
    "drafter": DRAFTER_PORTS,
    "verifier": VERIFIER_PORTS,
    "refiner": REFINER_PORTS,
    "risk": RISK_PORTS,
}
