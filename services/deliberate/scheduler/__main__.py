"""`python -m deliberate.scheduler`: the client-facing Scheduler service, with its load monitor, learned
selection weights and the Verifier watchdog."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path

from deliberate.scheduler.v1 import scheduler_service_pb2, scheduler_service_pb2_grpc

from ..core.config import parse_settings
from ..core.server import ServiceSpec, run
from .downstream import Downstream, Stubs
from .load import DrafterLoadSampler, LoadMonitor
from .pipeline import Pipeline
from .server import SchedulerServicer
from .settings import SchedulerSettings
from .watchdog import ProcessRestarter, Watchdog, build_restarter
from .weights import WeightLearner

log = logging.getLogger("deliberate.scheduler")


def restarter_from(settings: SchedulerSettings):
    options = {
        "process": {"command": settings.verifier_command},
        "container": {"container": settings.verifier_container, "socket_path": settings.container_socket},
        "kubernetes": {"namespace": settings.kubernetes_namespace, "label_selector": settings.kubernetes_selector},
        "none": {},
    }
    if settings.restarter == "process" and not settings.verifier_command:
        raise SystemExit("--restarter process needs --verifier-command (the Scheduler starts and supervises it)")
    return build_restarter(settings.restarter, **options.get(settings.restarter, {}))


def main(argv: list[str] | None = None) -> None:
    settings = parse_settings(SchedulerSettings, argv, prog="deliberate.scheduler")
    Path(settings.weights_path).parent.mkdir(parents=True, exist_ok=True)
    restarter = restarter_from(settings)
    watchdog = Watchdog(
        settings.verifier_health_url,
        restarter,
        interval_s=settings.watchdog_interval_s,
        failures_to_restart=settings.watchdog_failures,
    )

    @contextlib.asynccontextmanager
    async def supervised_pipeline() -> AsyncIterator[SchedulerServicer]:
        """The stubs, the learned weights, and the load monitor and watchdog running beside the server."""
        if isinstance(restarter, ProcessRestarter):
            pid = await asyncio.to_thread(restarter.start)
            log.info("verifier started", extra={"pid": pid, "command": restarter.command})
        try:
            async with Stubs.open(settings) as stubs:
                downstream = Downstream(stubs, settings, watchdog)
                load = LoadMonitor(DrafterLoadSampler(downstream.drafter_load))
                learner = WeightLearner.load(settings.weights_path)
                background = [
                    asyncio.ensure_future(load.run(settings.load_interval_s)),
                    asyncio.ensure_future(watchdog.run()),
                ]
                try:
                    yield SchedulerServicer(settings, Pipeline(settings, downstream, learner=learner, load=load))
                finally:
                    for task in background:
                        task.cancel()
                        with contextlib.suppress(asyncio.CancelledError):
                            await task
        finally:
            if isinstance(restarter, ProcessRestarter):
                await asyncio.to_thread(restarter.stop)

    run(
        ServiceSpec(
            name="scheduler",
            port=settings.port,
            grpc_services=[scheduler_service_pb2.DESCRIPTOR.services_by_name["SchedulerService"].full_name],
            dependencies=supervised_pipeline,
            add_servicers=scheduler_service_pb2_grpc.add_SchedulerServiceServicer_to_server,
        ),
        settings,
    )


if __name__ == "__main__":
    main()
