"""`python -m deliberate.drafter`: the Drafter service."""

from __future__ import annotations

from deliberate_api.drafter.v1 import drafter_service_pb2, drafter_service_pb2_grpc

from ..engines.service import run_engine_service
from .server import DrafterServicer
from .settings import DrafterSettings


def main(argv: list[str] | None = None) -> None:
    run_engine_service(
        "drafter",
        DrafterSettings,
        DrafterServicer,
        drafter_service_pb2.DESCRIPTOR.services_by_name["DrafterService"],
        drafter_service_pb2_grpc.add_DrafterServiceServicer_to_server,
        ["GenerateDrafts", "StreamDrafts"],
        argv,
    )


if __name__ == "__main__":
    main()
