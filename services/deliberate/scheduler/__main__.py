"""`python -m deliberate.scheduler`: the client-facing Scheduler service, with its load monitor, learned
selection weights and the Verifier watchdog."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
from collections.abc import AsyncIterator
from pathlib import Path

from deliberate_api.scheduler.v1 import scheduler_service_pb2, scheduler_service_pb2_grpc

from ..core import metrics
from ..core.auth import TokenAuthInterceptor, Tokens, method_permissions
from ..core.config import parse_settings
from ..core.server import ServiceSpec, method_names, run
from .downstream import Downstream, Stubs
from .drafter_load import DrafterLoadSampler, LoadMonitor
from .learning.weight_store import FileStateStore, RedisStateStore, StateStore
from .pipeline import Pipeline
from .server import SchedulerServicer
from .settings import SchedulerSettings
from .watchdog.lease import RedisLease
from .watchdog.restarters import ProcessRestarter, build_restarter
from .watchdog.watchdog import Watchdog

log = logging.getLogger("deliberate.scheduler")


def restarter_from(settings: SchedulerSettings):
    options = {
        "process": {"command": settings.verifier_command},
        "command": {"command": settings.restart_command},
        "container": {"container": settings.verifier_container, "socket_path": settings.container_socket},
        "kubernetes": {"namespace": settings.kubernetes_namespace, "label_selector": settings.kubernetes_selector},
        "none": {},
    }
    if settings.restarter == "process" and not settings.verifier_command:
        raise SystemExit("--restarter process needs --verifier-command (the Scheduler starts and supervises it)")
    if settings.restarter == "command" and not settings.restart_command:
        raise SystemExit("--restarter command needs --restart-command (the command that restarts the Verifier)")
    return build_restarter(settings.restarter, **options.get(settings.restarter, {}))


def state_from(settings: SchedulerSettings) -> tuple[StateStore, RedisLease | None]:
    """The state store --state-url names, and with Redis the lease that lets one replica's watchdog act."""
    if not settings.state_url:
        Path(settings.weights_path).parent.mkdir(parents=True, exist_ok=True)
        return FileStateStore.open(settings.weights_path), None
    if not settings.state_url.startswith(("redis://", "rediss://", "unix://")):
        raise SystemExit(f"--state-url must be redis://host:port/db (or rediss://, unix://): {settings.state_url!r}")
    if settings.watchdog_lease_s <= settings.watchdog_interval_s:
        raise SystemExit("--watchdog-lease-s must be longer than --watchdog-interval-s (the lease is renewed per beat)")
    store = RedisStateStore.from_url(
        settings.state_url, timeout_s=settings.state_timeout_s, pending_ttl_s=settings.pending_ttl_s
    )
    # Readable (which host and pid acts is visible in Redis and in the logs) and unique: containers on one host's
    # network share its hostname and each may be pid 1, so a random part tells the replicas apart.
    holder = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
    return store, RedisLease(store.client, f"{store.prefix}lease:watchdog", holder, settings.watchdog_lease_s)


SCHEDULER_SERVICE = scheduler_service_pb2.DESCRIPTOR.services_by_name["SchedulerService"].full_name
# What a token may be granted (--auth-tokens-file); a method not listed needs them all.
PERMISSION_OF_METHOD = {"Solve": "solve", "SolveStream": "solve", "SubmitFeedback": "feedback", "GetState": "state"}


def interceptors_from(settings: SchedulerSettings) -> list[TokenAuthInterceptor]:
    if not settings.auth_tokens_file:
        return []
    tokens = Tokens.load(settings.auth_tokens_file, frozenset(PERMISSION_OF_METHOD.values()))
    return [TokenAuthInterceptor(tokens, method_permissions(SCHEDULER_SERVICE, PERMISSION_OF_METHOD))]


def main(argv: list[str] | None = None) -> None:
    settings = parse_settings(SchedulerSettings, argv, prog="deliberate.scheduler")
    store, lease = state_from(settings)
    restarter = restarter_from(settings)
    interceptors = interceptors_from(settings)
    watchdog = Watchdog(
        settings.verifier_health_url,
        restarter,
        interval_s=settings.watchdog_interval_s,
        failures_to_restart=settings.watchdog_failures,
        lease=lease,
    )
    metrics.observe_verifier_health(lambda: watchdog.healthy)

    @contextlib.asynccontextmanager
    async def supervised_pipeline() -> AsyncIterator[SchedulerServicer]:
        """The stubs, the learned state, and the load monitor and watchdog running beside the server."""
        await store.start()
        log.info("scheduler state", extra={"store": store.name, "where": store.where})
        if isinstance(restarter, ProcessRestarter):
            pid = await asyncio.to_thread(restarter.start)
            log.info("verifier started", extra={"pid": pid, "command": restarter.command})
        try:
            async with Stubs.open(settings) as stubs:
                downstream = Downstream(stubs, settings, watchdog)
                workload = LoadMonitor(DrafterLoadSampler(downstream.drafter_load))
                background = [
                    asyncio.ensure_future(workload.run(settings.load_interval_s)),
                    asyncio.ensure_future(watchdog.run()),
                ]
                try:
                    pipeline = Pipeline(settings, downstream, state_store=store, workload=workload)
                    yield SchedulerServicer(settings, pipeline)
                finally:
                    for task in background:
                        task.cancel()
                        with contextlib.suppress(asyncio.CancelledError):
                            await task
        finally:
            if isinstance(restarter, ProcessRestarter):
                await asyncio.to_thread(restarter.stop)
            await store.close()

    service = scheduler_service_pb2.DESCRIPTOR.services_by_name["SchedulerService"]
    run(
        ServiceSpec(
            name="scheduler",
            port=settings.port,
            metrics_port=settings.metrics_port,
            grpc_services=[SCHEDULER_SERVICE],
            dependencies=supervised_pipeline,
            add_servicers=scheduler_service_pb2_grpc.add_SchedulerServiceServicer_to_server,
            interceptors=interceptors,
            work_methods=method_names(service, "Solve", "SolveStream"),
            max_in_flight=settings.max_in_flight,
            admit_by_deadline=settings.admit_by_deadline,
        ),
        settings,
    )


if __name__ == "__main__":
    main()
