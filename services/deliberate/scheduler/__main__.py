"""`python -m deliberate.scheduler`: the client-facing Scheduler service."""

from __future__ import annotations

from deliberate.scheduler.v1 import scheduler_service_pb2, scheduler_service_pb2_grpc

from ..core.config import parse_settings
from ..core.server import ServiceSpec, run
from .pipeline import Pipeline, Stubs
from .server import SchedulerServicer
from .settings import SchedulerSettings


def main(argv: list[str] | None = None) -> None:
    settings = parse_settings(SchedulerSettings, argv, prog="deliberate.scheduler")

    def add_servicers(server) -> None:
        # Channels are created inside the running event loop, after the gRPC instrumentation is installed.
        servicer = SchedulerServicer(settings, Pipeline(settings, Stubs.connect(settings)))
        scheduler_service_pb2_grpc.add_SchedulerServiceServicer_to_server(servicer, server)

    run(
        ServiceSpec(
            name="scheduler",
            port=settings.port,
            grpc_services=[scheduler_service_pb2.DESCRIPTOR.services_by_name["SchedulerService"].full_name],
            add_servicers=add_servicers,
        ),
        settings,
    )


if __name__ == "__main__":
    main()
