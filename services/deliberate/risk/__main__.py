"""`python -m deliberate.risk`: the risk-model service, with gRPC health."""

from __future__ import annotations

from deliberate_api.risk.v1 import risk_model_service_pb2, risk_model_service_pb2_grpc

from ..core.config import parse_settings
from ..core.server import ServiceSpec, method_names, run
from .server import RiskModelServicer
from .settings import RiskSettings


def main(argv: list[str] | None = None) -> None:
    settings = parse_settings(RiskSettings, argv, prog="deliberate.risk")
    service = risk_model_service_pb2.DESCRIPTOR.services_by_name["RiskModelService"]
    run(
        ServiceSpec(
            name="risk",
            port=settings.port,
            metrics_port=settings.metrics_port,
            grpc_services=[service.full_name],
            add_servicers=lambda _, server: risk_model_service_pb2_grpc.add_RiskModelServiceServicer_to_server(
                RiskModelServicer(), server
            ),
            work_methods=method_names(service, "Score"),
            max_in_flight=settings.max_in_flight,
        ),
        settings,
    )


if __name__ == "__main__":
    main()
