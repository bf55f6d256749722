"""`python -m deliberate.drafter`: the Drafter service."""

from __future__ import annotations

from deliberate_api.drafter.v1 import drafter_service_pb2, drafter_service_pb2_grpc

from ..core.config import parse_settings
from ..core.server import run_engine_service
from .server import DrafterServicer
from .settings import DrafterSettings


def main(argv: list[str] | None = None) -> None:
    settings = parse_settings(DrafterSettings, argv, prog="deliberate.drafter")
    run_engine_service(
        "drafter",
        settings,
        DrafterServicer(settings),
        drafter_service_pb2.DESCRIPTOR.services_by_name["DrafterService"].full_name,
        drafter_service_pb2_grpc.add_DrafterServiceServicer_to_server,
    )


if __name__ == "__main__":
    main()
