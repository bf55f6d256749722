"""The life of one service process: listen, get ready, serve, drain on SIGTERM.

Health goes NOT_SERVING → SERVING only after `prepare` (e.g. model loading) finished, so `deliberate up`,
compose and Kubernetes probes wait for a service that can really answer.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from .config import CommonSettings
from .logs import setup_logging
from .telemetry import setup_tracing

log = logging.getLogger("deliberate.server")

# Large enough for a 5-draft report; the request limits are enforced by each service.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024


@dataclass
class ServiceSpec:
    name: str  # "drafter", "verifier", …
    port: int
    # Full gRPC service names, e.g. "deliberate.drafter.v1.DrafterService".
    grpc_services: Sequence[str]
    add_servicers: Callable[[grpc.aio.Server], None]
    prepare: Callable[[], Awaitable[None]] | None = None
    on_health_change: Callable[[bool], None] | None = None
    on_shutdown: list[Callable[[], Awaitable[None]]] = field(default_factory=list)


async def serve(spec: ServiceSpec, settings: CommonSettings) -> None:
    setup_logging(spec.name, settings.log_level)
    provider = setup_tracing(spec.name, settings.trace_exporter)

    server = grpc.aio.server(
        options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ]
    )
    spec.add_servicers(server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        [
            *spec.grpc_services,
            health_pb2.DESCRIPTOR.services_by_name["Health"].full_name,
            reflection.SERVICE_NAME,
        ],
        server,
    )
    address = f"{settings.host}:{spec.port}"
    server.add_insecure_port(address)

    async def set_health(serving: bool) -> None:
        status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        for name in ("", *spec.grpc_services):
            await health_servicer.set(name, status)
        if spec.on_health_change:
            spec.on_health_change(serving)

    await set_health(False)
    await server.start()
    log.info("listening", extra={"address": address})

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)

    try:
        if spec.prepare:
            prepared = asyncio.ensure_future(spec.prepare())
            stopped = asyncio.ensure_future(stop.wait())
            await asyncio.wait({prepared, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if not prepared.done():
                prepared.cancel()
            else:
                prepared.result()  # a failed preparation ends the process with its error
        if not stop.is_set():
            await set_health(True)
            log.info("serving", extra={"address": address})
            await stop.wait()
    finally:
        log.info("shutting down", extra={"grace_s": settings.shutdown_grace_s})
        await set_health(False)
        await server.stop(settings.shutdown_grace_s)
        for hook in spec.on_shutdown:
            await hook()
        provider.shutdown()  # flushes pending spans
        log.info("stopped")


def run(spec: ServiceSpec, settings: CommonSettings) -> None:
    asyncio.run(serve(spec, settings))


def run_engine_service(name: str, settings, servicer, grpc_service: str, add_servicer) -> None:
    """Runs a service whose servicer needs an LLM engine (Drafter, Refiner): it reports SERVING once the
    model is loaded into `servicer.engine`."""
    from ..engines import load_engine

    async def load_model() -> None:
        servicer.engine = await asyncio.to_thread(load_engine, settings.engine, settings.model, settings.engine_threads)

    run(
        ServiceSpec(
            name=name,
            port=settings.port,
            grpc_services=[grpc_service],
            add_servicers=lambda server: add_servicer(servicer, server),
            prepare=load_model,
        ),
        settings,
    )
