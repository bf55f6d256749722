"""The machinery every engine shares, behind the contract of `interface.py`.

An engine subclasses `Engine` and writes `format_chat`, `decode` (one batch, blocking) and `from_settings` (how
the plugin loader builds it); `Engine` does the rest: the opening and closing of every `generate` (the template
method), the thread→async bridge (`stream`), the load meter and the decoding-speed average. The helpers below
(`sequence_cancelled`, `TraceBuilder`, `error_message`, `cpu_count`, `chat_prompt`) are what several engines
share. The contract's types are re-exported here, where the services have always found them.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from abc import abstractmethod
from collections.abc import AsyncIterator, Collection, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from pydantic import BaseModel

from ..selection.confidence import TokenTrace, token_confidence
from .interface import (
    Cancellation,
    Completion,
    EngineCapabilities,
    EngineError,
    EngineInterface,
    EngineLoad,
    EventSink,
    FinishReason,
    GenerationEvent,
    SamplingParams,
    TextDelta,
)
from .workload import LoadMeter

__all__ = [
    "Batch",
    "Cancellation",
    "Completion",
    "Engine",
    "EngineCapabilities",
    "EngineError",
    "EventSink",
    "FinishReason",
    "GenerationEvent",
    "SamplingParams",
    "TextDelta",
    "TraceBuilder",
    "chat_prompt",
    "cpu_count",
    "error_message",
    "sequence_cancelled",
    "sequence_seeds",
]

log = logging.getLogger("deliberate.engine")

# Weight of the newest measurement in the decoding-speed average.
SPEED_EWMA_ALPHA = 0.3


def sequence_cancelled(cancel: threading.Event, index: int) -> bool:
    """Whether sequence `index` is to stop: its own cancel, or the whole generation's."""
    return cancel.is_cancelled(index) if isinstance(cancel, Cancellation) else cancel.is_set()


class TraceBuilder:
    """Collects one sequence's per-token log-probabilities as the engine decodes it."""

    def __init__(self) -> None:
        self.logprobs: list[float] = []
        self.confidences: list[float] = []
        self.ends: list[int] = []
        self.handed_out = 0  # confidences already sent with a TextDelta

    def add(self, logprob: float, top_logprobs: Sequence[float], text_end: int) -> None:
        """One token: its log-probability, the top-k candidates' and where its text ends in the continuation."""
        self.logprobs.append(logprob)
        self.confidences.append(token_confidence(top_logprobs))
        self.ends.append(text_end)

    def new_confidences(self) -> tuple[float, ...]:
        """The token confidences added since the last call: what the sequence's next TextDelta carries."""
        new = tuple(self.confidences[self.handed_out :])
        self.handed_out = len(self.confidences)
        return new

    def trace(self) -> TokenTrace | None:
        if not self.logprobs:
            return None
        return TokenTrace(tuple(self.logprobs), tuple(self.confidences), tuple(self.ends))


def serialized(on_event: EventSink) -> EventSink:
    """`on_event` behind a lock: an engine that emits from several threads still hands the sink one event at a
    time, as the single-threaded engines do."""
    lock = threading.Lock()

    def emit(event: GenerationEvent) -> None:
        with lock:
            on_event(event)

    return emit


def error_message(error: object) -> str:
    """The message of an OpenAI-style error object (`{"message": …}`, as llama.cpp and OpenAI servers send), or
    the error as text."""
    return error.get("message", str(error)) if isinstance(error, dict) else str(error)


def sequence_seeds(params: SamplingParams, count: int) -> list[int | None]:
    """One seed per sequence: params.seed + index, so a seeded request is reproducible and its
    sequences still differ; None (random) when the request gave no seed."""
    if params.seed is None:
        return [None] * count
    return [params.seed + index for index in range(count)]


def cpu_count() -> int:
    """The CPUs this process may run on (its affinity), not the host's."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def chat_prompt(tokenizer, system: str, user: str) -> str:
    """A system + user message rendered with a Hugging Face tokenizer's chat template, ready for generation."""
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


@dataclass
class Batch:
    """One `generate` call, as an engine's `decode` receives it."""

    prompts: Sequence[str]  # never empty
    params: SamplingParams
    emit: EventSink  # the caller's sink behind a lock: safe to call from any thread
    cancel: threading.Event
    output_schema: dict | None
    started: float  # time.perf_counter() when the call began: the completions' latencies count from it
    seeds: list[int | None]  # sequence_seeds(params, len(prompts))
    # Times of one sequence's decoding steps (its tokens), which `decode` fills: they feed the speed average.
    step_times: list[float] = field(default_factory=list)
    # Sequences decoded free even when the call has an output schema (a decision program among JSON drafts).
    free_sequences: frozenset[int] = frozenset()

    def schema_of(self, index: int) -> dict | None:
        """The schema sequence `index` is constrained to, if any."""
        return None if index in self.free_sequences else self.output_schema


class Engine(EngineInterface):
    """An engine plugin's base: implement `format_chat`, `decode` and `from_settings` (and `capacity` where the
    engine decodes more than one sequence at once).

    Implementations serialize their own calls if the backend is not re-entrant.
    """

    name: str = "engine"
    capabilities = EngineCapabilities()
    # The engine's own settings (flags and environment variables, docs/configuration.md): a pydantic model that
    # EngineSettings composes; None where the model and the thread count are all the engine needs.
    settings_class: ClassVar[type[BaseModel] | None] = None

    @classmethod
    @abstractmethod
    def from_settings(cls, model: str, threads: int, settings: BaseModel | None) -> Engine:
        """The engine loaded on `model` (an embedded model's name or a local path; engines that load none ignore
        it), with `threads` CPU threads (0: every CPU the process may use) and its `settings_class` instance
        (None where it declares none)."""

    @abstractmethod
    def decode(self, batch: Batch) -> list[Completion]:
        """Blocking: generates `batch`, emitting its events, as `generate` promises; appends one sequence's
        decoding-step times to `batch.step_times`."""

    def generate(
        self,
        prompts: Sequence[str],
        params: SamplingParams,
        on_event: EventSink,
        cancel: threading.Event,
        *,
        output_schema: dict | None = None,
        free_sequences: Collection[int] = (),
    ) -> list[Completion]:
        if not prompts:
            return []
        # Latencies count from here, including any wait for the engine, as a caller sees them.
        started = time.perf_counter()
        seeds = sequence_seeds(params, len(prompts))
        batch = Batch(prompts, params, serialized(on_event), cancel, output_schema, started, seeds)
        batch.free_sequences = frozenset(free_sequences)
        completions = self.decode(batch)
        self._record_speed(batch.step_times)
        return completions

    # Updated by _record_speed after each generation; None until the first one.
    _tokens_per_second: float | None = None
    # Created on first use (by `stream` or `load_report`, both on the event loop).
    _meter: LoadMeter | None = None

    @property
    def capacity(self) -> int:
        return 1

    def load_report(self) -> EngineLoad:
        """Sequences busy and queued now, and the recent speed, over the calls made through `stream`."""
        return self._load_meter().snapshot(self.capacity)

    def _load_meter(self) -> LoadMeter:
        if self._meter is None:
            self._meter = LoadMeter()
        return self._meter

    @property
    def tokens_per_second(self) -> float | None:
        return self._tokens_per_second

    def _record_speed(self, step_times: list[float]) -> None:
        """Folds one generation's decoding-step timestamps into the speed average."""
        # Every decode step adds one token to each running sequence, so steps/s is one sequence's speed.
        if len(step_times) < 2 or step_times[-1] <= step_times[0]:
            return
        measured = (len(step_times) - 1) / (step_times[-1] - step_times[0])
        previous = self._tokens_per_second
        self._tokens_per_second = (
            measured if previous is None else SPEED_EWMA_ALPHA * measured + (1 - SPEED_EWMA_ALPHA) * previous
        )

    async def stream(
        self,
        prompts: Sequence[str],
        params: SamplingParams,
        *,
        output_schema: dict | None = None,
        cancel: Cancellation | None = None,
        free_sequences: Collection[int] = (),
    ) -> AsyncIterator[GenerationEvent]:
        """Runs `generate` in a worker thread and yields its events as they happen.

        Closing the iterator early (client cancel, deadline) aborts the engine's work, and so does setting
        `cancel`, which also lets the caller stop single sequences meanwhile. A generation stopped before its
        end is logged ("generation aborted") with how long the engine took to stop.
        """
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[GenerationEvent | BaseException | None] = asyncio.Queue()
        cancel = cancel if cancel is not None else Cancellation()
        meter = self._load_meter()
        meter.submitted(len(prompts))
        completed: list[int] = []  # indexes; appended by the worker thread(s)
        ended_at = 0.0

        def emit(event: GenerationEvent | BaseException | None) -> None:
            if isinstance(event, Completion):  # its slot is free from now on, whatever the consumer does
                completed.append(event.index)
                meter.completed(event.completion_tokens)
            loop.call_soon_threadsafe(queue.put_nowait, event)

        def work() -> None:
            nonlocal ended_at
            try:
                self.generate(prompts, params, emit, cancel, output_schema=output_schema, free_sequences=free_sequences)
                emit(None)
            except BaseException as error:  # handed to the consumer, never lost in the thread
                emit(error)
            finally:
                ended_at = time.monotonic()

        def ended(_) -> None:
            # No completion can follow now: what did not complete leaves the count.
            meter.abandoned(len(prompts) - len(completed))
            if cancel.set_at is not None and cancel.set_at < ended_at:
                stopped_within_s = round(ended_at - cancel.set_at, 3)
                log.info("generation aborted", extra={"sequences": len(prompts), "stopped_within_s": stopped_within_s})

        worker = loop.run_in_executor(None, work)
        worker.add_done_callback(ended)  # runs in this call's context: the log carries the request's trace
        try:
            while (event := await queue.get()) is not None:
                if isinstance(event, BaseException):
                    raise event
                yield event
        finally:
            cancel.set()
            await asyncio.shield(worker)
