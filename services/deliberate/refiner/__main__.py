"""`python -m deliberate.refiner`: the Refiner service."""

from __future__ import annotations

from deliberate_api.refiner.v1 import refiner_service_pb2, refiner_service_pb2_grpc

from ..core.config import parse_settings
from ..core.server import run_engine_service
from .server import RefinerServicer
from .settings import RefinerSettings


def main(argv: list[str] | None = None) -> None:
    settings = parse_settings(RefinerSettings, argv, prog="deliberate.refiner")
    run_engine_service(
        "refiner",
        settings,
        RefinerServicer(settings),
        refiner_service_pb2.DESCRIPTOR.services_by_name["RefinerService"].full_name,
        refiner_service_pb2_grpc.add_RefinerServiceServicer_to_server,
    )


if __name__ == "__main__":
    main()
