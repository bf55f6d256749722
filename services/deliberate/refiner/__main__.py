"""`python -m deliberate.refiner`: the Refiner service."""

from __future__ import annotations

from deliberate_api.refiner.v1 import refiner_service_pb2, refiner_service_pb2_grpc

from ..engines.service import run_engine_service
from .server import RefinerServicer
from .settings import RefinerSettings


def main(argv: list[str] | None = None) -> None:
    run_engine_service(
        "refiner",
        RefinerSettings,
        RefinerServicer,
        refiner_service_pb2.DESCRIPTOR.services_by_name["RefinerService"],
        refiner_service_pb2_grpc.add_RefinerServiceServicer_to_server,
        ["Refine"],
        argv,
    )


if __name__ == "__main__":
    main()
