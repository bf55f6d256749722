"""`python -m deliberate.verifier`: the Verifier service, with gRPC health and HTTP GET /health."""

from __future__ import annotations

from deliberate.verifier.v1 import verifier_service_pb2, verifier_service_pb2_grpc

from ..core.config import parse_settings
from ..core.http_health import HttpHealthEndpoint
from ..core.server import ServiceSpec, run
from .server import VerifierServicer
from .settings import VerifierSettings


def main(argv: list[str] | None = None) -> None:
    settings = parse_settings(VerifierSettings, argv, prog="deliberate.verifier")
    servicer = VerifierServicer(settings)
    serving = {"value": False}
    http_health = HttpHealthEndpoint(
        settings.host,
        settings.http_port,
        lambda: {
            "service": "verifier",
            "serving": serving["value"],
            "rules": "loaded" if serving["value"] else "loading",
        },
    )

    async def start_http_health() -> None:
        http_health.start()

    async def stop_http_health() -> None:
        http_health.stop()

    run(
        ServiceSpec(
            name="verifier",
            port=settings.port,
            grpc_services=[verifier_service_pb2.DESCRIPTOR.services_by_name["VerifierService"].full_name],
            add_servicers=lambda server: verifier_service_pb2_grpc.add_VerifierServiceServicer_to_server(
                servicer, server
            ),
            prepare=start_http_health,
            on_health_change=lambda value: serving.update(value=value),
            on_shutdown=[stop_http_health],
        ),
        settings,
    )


if __name__ == "__main__":
    main()
