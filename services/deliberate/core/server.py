"""The life of one service process: build its dependencies, listen, serve, drain on SIGTERM, close them.

A service names what it needs (an engine, stubs, a judge) as an async context manager; the servicers are
built from what it yields, so none is ever half-constructed. The port is bound first (a taken port fails
at once), but the server starts answering only once the dependencies are ready: until then every probe
and client sees UNAVAILABLE, and `deliberate up`, compose and Kubernetes wait for SERVING.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.descriptor import ServiceDescriptor
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from . import metrics
from .admission import Admission, InFlightLimit
from .config import CommonSettings, flag_name
from .logs import setup_logging
from .telemetry import setup_tracing
from .tls import server_credentials

log = logging.getLogger("deliberate.server")

# Large enough for a 5-draft report; the request limits are enforced by each service.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024


@asynccontextmanager
async def no_dependencies() -> AsyncIterator[None]:
    yield None


@dataclass
class ServiceSpec:
    name: str  # "drafter", "verifier", …
    port: int
    metrics_port: int  # GET /metrics (Prometheus); 0 = no endpoint
    # Full gRPC service names, e.g. "deliberate.drafter.v1.DrafterService".
    grpc_services: Sequence[str]
    # Registers the servicers, given what `dependencies` yielded and the server: the argument order of the
    # generated `add_…Servicer_to_server(servicer, server)`, which fits as it is when they yield the servicer.
    add_servicers: Callable[[Any, grpc.aio.Server], None]
    # Entered inside the running event loop after tracing is set up (so channels are instrumented);
    # exited after the server drained.
    dependencies: Callable[[], AbstractAsyncContextManager[Any]] = no_dependencies
    on_health_change: Callable[[bool], None] | None = None
    # Run before every handler, in order (the Scheduler's bearer tokens: core/auth.py).
    interceptors: Sequence[grpc.aio.ServerInterceptor] = ()
    # The methods that do the service's work (full names, "/deliberate.drafter.v1.DrafterService/GenerateDrafts"):
    # at most `max_in_flight` of their calls run at once, a call beyond is refused (core/admission.py).
    work_methods: Sequence[str] = ()
    max_in_flight: int = 8
    # Refuse at once a work call whose deadline the calls in flight put out of reach (core/admission.py).
    admit_by_deadline: bool = False
    # Several processes serve the port (SO_REUSEPORT): the kernel spreads new connections over them.
    reuse_port: bool = False


def method_names(service: ServiceDescriptor, *methods: str) -> list[str]:
    """Full method names, as the server sees them, of `service`'s `methods` (a name it lacks is a KeyError)."""
    return [f"/{service.full_name}/{service.methods_by_name[method].name}" for method in methods]


async def serve(spec: ServiceSpec, settings: CommonSettings) -> None:
    setup_logging(spec.name, settings.log_level)
    provider = setup_tracing(spec.name, settings.trace_exporter, settings.trace_file)
    metrics_endpoint = metrics.setup_metrics(spec.name, settings.host, spec.metrics_port)  # a taken port fails here

    limit = InFlightLimit(spec.max_in_flight, flag_name("max_in_flight"), by_deadline=spec.admit_by_deadline)
    metrics.observe_in_flight(limit)
    server = grpc.aio.server(
        # Tokens are checked first: a refused caller takes no slot.
        interceptors=[*spec.interceptors, Admission(limit, spec.work_methods)],
        options=[
            ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
            ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
            *([("grpc.so_reuseport", 1)] if spec.reuse_port else []),
            # A GOAWAY after this age makes a round_robin client re-resolve (core/balancing.py); calls in flight
            # finish on the old connection (no grace limit).
            *(
                [("grpc.max_connection_age_ms", round(settings.max_connection_age_s * 1000))]
                if settings.max_connection_age_s
                else []
            ),
        ],
    )
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
    credentials = server_credentials(settings.tls_cert_file, settings.tls_key_file, settings.tls_client_ca_file)
    if credentials is None:
        server.add_insecure_port(address)
    else:  # health and reflection too: one port, one protocol
        server.add_secure_port(address, credentials)

    async def set_health(serving: bool) -> None:
        status = health_pb2.HealthCheckResponse.SERVING if serving else health_pb2.HealthCheckResponse.NOT_SERVING
        for name in ("", *spec.grpc_services):
            await health_servicer.set(name, status)
        if spec.on_health_change:
            spec.on_health_change(serving)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)

    try:
        async with contextlib.AsyncExitStack() as resources:  # entered in a task, so a SIGTERM can interrupt it
            entering = asyncio.ensure_future(resources.enter_async_context(spec.dependencies()))
            stopped = asyncio.ensure_future(stop.wait())
            await asyncio.wait({entering, stopped}, return_when=asyncio.FIRST_COMPLETED)
            stopped.cancel()
            if not entering.done():  # stopped while, say, the model was still loading
                entering.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await entering
                return
            spec.add_servicers(entering.result(), server)  # a failed preparation ends the process with its error
            await set_health(False)
            await server.start()
            try:
                await set_health(True)
                transport = "plain text" if credentials is None else "mtls" if settings.tls_client_ca_file else "tls"
                log.info("serving", extra={"address": address, "transport": transport})
                await stop.wait()
            finally:  # drained before the dependencies close: in-flight calls still have their engine
                log.info("shutting down", extra={"grace_s": settings.shutdown_grace_s})
                await set_health(False)
                await server.stop(settings.shutdown_grace_s)
    finally:
        provider.shutdown()  # flushes pending spans
        metrics_endpoint.shutdown()
        log.info("stopped")


def run(spec: ServiceSpec, settings: CommonSettings) -> None:
    asyncio.run(serve(spec, settings))
