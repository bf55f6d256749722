"""`python -m deliberate.drafter`: the Drafter service."""

from __future__ import annotations

import asyncio

from deliberate.drafter.v1 import drafter_service_pb2, drafter_service_pb2_grpc

from ..core.config import parse_settings
from ..core.server import ServiceSpec, run
from ..engines import load_engine
from .server import DrafterServicer
from .settings import DrafterSettings


def main(argv: list[str] | None = None) -> None:
    settings = parse_settings(DrafterSettings, argv, prog="deliberate.drafter")
    servicer = DrafterServicer(settings)

    async def load_model() -> None:
        servicer.engine = await asyncio.to_thread(load_engine, settings.engine, settings.model)

    run(
        ServiceSpec(
            name="drafter",
            port=settings.port,
            grpc_services=[drafter_service_pb2.DESCRIPTOR.services_by_name["DrafterService"].full_name],
            add_servicers=lambda server: drafter_service_pb2_grpc.add_DrafterServiceServicer_to_server(
                servicer, server
            ),
            prepare=load_model,
        ),
        settings,
    )


if __name__ == "__main__":
    main()
