"""The base every engine-backed service shares (Drafter, Refiner; the Verifier's judge uses `open_engine`).

`open_engine` builds the engine inside an async context manager; `EngineServicer.open` builds the servicer
with it, so no servicer ever runs without its engine; `run_engine_service` is the whole `__main__` of such a
service: its settings, its servicer class and its generated `add_…_to_server` function.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Self

import grpc

from deliberate_api.common.v1 import common_pb2

from ..core import metrics
from ..core.config import parse_settings
from ..core.requests import InvalidArgument, sampling_overrides
from ..core.server import ServiceSpec, method_names, run
from . import load_engine
from .base import Cancellation, Engine, EngineError, GenerationEvent, SamplingParams
from .settings import EngineSettings

log = logging.getLogger("deliberate.engine")


@asynccontextmanager
async def open_engine(
    name: str, model: str, threads: int = 0, settings: EngineSettings | None = None
) -> AsyncIterator[Engine]:
    """Loads the engine in a worker thread (the event loop keeps answering signals meanwhile); `settings` hold
    the engine's own (None: its defaults)."""
    engine = await asyncio.to_thread(load_engine, name, model, threads, settings)
    metrics.observe_engine(engine)
    try:
        yield engine
    finally:
        # The engines free their model with the process; nothing of theirs outlives it.
        log.info("engine released", extra={"engine": engine.name})


def open_engine_of(settings: EngineSettings):
    """`open_engine` with a Drafter's or Refiner's settings."""
    return open_engine(settings.engine, settings.model, settings.engine_threads, settings)


class EngineServicer:
    """What a servicer that generates with an engine holds: its settings, its engine, its sampling defaults."""

    def __init__(self, settings: EngineSettings, engine: Engine):
        self.settings = settings
        self.engine = engine
        self.defaults = settings.default_sampling()

    @classmethod
    @asynccontextmanager
    async def open(cls, settings: EngineSettings) -> AsyncIterator[Self]:
        """The servicer with its engine loaded; the engine is released on exit."""
        async with open_engine_of(settings) as engine:
            yield cls(settings, engine)

    def sampling(self, proto: common_pb2.SamplingParams) -> SamplingParams:
        """The service's defaults with the request's overrides, their ranges checked at the edge."""
        return replace(self.defaults, **sampling_overrides(proto))

    @asynccontextmanager
    async def generation(
        self,
        context: grpc.aio.ServicerContext,
        prompts: Sequence[str],
        sampling: SamplingParams,
        output_schema: dict | None = None,
        cancel: Cancellation | None = None,
        free_sequences: Collection[int] = (),
    ) -> AsyncIterator[AsyncIterator[GenerationEvent]]:
        """The engine's events for this RPC. The engine stops as soon as the RPC ends (the client cancelled,
        its deadline passed): gRPC does not close a streaming handler it cancels while that handler waits
        to send, so closing the event stream alone would leave the engine decoding for no one.
        `cancel`: the caller's, to stop single sequences meanwhile. An EngineError ends the RPC with the
        status it names."""
        cancel = cancel if cancel is not None else Cancellation()
        context.add_done_callback(lambda _: cancel.set())
        events = self.engine.stream(
            prompts, sampling, output_schema=output_schema, cancel=cancel, free_sequences=free_sequences
        )
        try:
            async with contextlib.aclosing(events):
                yield events
        except EngineError as error:
            log.warning("generation failed", extra={"engine": self.engine.name, "error": str(error)})
            await context.abort(grpc.StatusCode[error.status], str(error))

    async def validated(self, validate: Callable, request, context: grpc.aio.ServicerContext):
        """`validate(request)`'s result, or INVALID_ARGUMENT naming the field it refused."""
        try:
            return validate(request)
        except InvalidArgument as error:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(error))


def run_engine_service(
    name: str,
    settings_class: type[EngineSettings],
    servicer_class: type[EngineServicer],
    service_descriptor,
    add_servicer: Callable[[EngineServicer, grpc.aio.Server], None],
    work_methods: Sequence[str],
    argv: list[str] | None = None,
) -> None:
    """Parses the settings and serves what `servicer_class.open(settings)` yields; health turns SERVING once
    the model is loaded."""
    settings = parse_settings(settings_class, argv, prog=f"deliberate.{name}")
    run(
        ServiceSpec(
            name=name,
            port=settings.port,
            metrics_port=settings.metrics_port,
            grpc_services=[service_descriptor.full_name],
            dependencies=lambda: servicer_class.open(settings),
            add_servicers=add_servicer,
            work_methods=method_names(service_descriptor, *work_methods),
            max_in_flight=settings.max_in_flight,
        ),
        settings,
    )
