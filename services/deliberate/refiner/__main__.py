"""`python -m deliberate.refiner`: the Refiner service."""

from __future__ import annotations

import asyncio

from deliberate.refiner.v1 import refiner_service_pb2, refiner_service_pb2_grpc

from ..core.config import parse_settings
from ..core.server import ServiceSpec, run
from ..engines import load_engine
from .server import RefinerServicer
from .settings import RefinerSettings


def main(argv: list[str] | None = None) -> None:
    settings = parse_settings(RefinerSettings, argv, prog="deliberate.refiner")
    servicer = RefinerServicer(settings)

    async def load_model() -> None:
        servicer.engine = await asyncio.to_thread(load_engine, settings.engine, settings.model)

    run(
        ServiceSpec(
            name="refiner",
            port=settings.port,
            grpc_services=[refiner_service_pb2.DESCRIPTOR.services_by_name["RefinerService"].full_name],
            add_servicers=lambda server: refiner_service_pb2_grpc.add_RefinerServiceServicer_to_server(
                servicer, server
            ),
            prepare=load_model,
        ),
        settings,
    )


if __name__ == "__main__":
    main()
