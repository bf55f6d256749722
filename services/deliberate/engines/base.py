"""The one interface every LLM engine implements (llamacpp, transformers, vllm, remote).

What each engine can do beyond plain generation (`EngineCapabilities`):
- llamacpp: a seed per sequence, cancelling one sequence alone, decoding constrained to a JSON Schema;
- vllm: a seed per sequence and cancelling one sequence alone; no schema constraint yet;
- remote (an OpenAI-compatible server): a seed per sequence, cancelling one alone, the schema as `response_format`;
- transformers: one seed per batch (the first), cancel stops the whole batch, no schema constraint.
An engine that cannot honour a request's schema generates unconstrained and says so in `capabilities`;
the Verifier still checks every draft against the schema.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from ..selection.confidence import TokenTrace, token_confidence
from .load import EngineLoad, LoadMeter

FinishReason = Literal["stop", "length", "aborted"]

log = logging.getLogger("deliberate.engine")

# Weight of the newest measurement in the decoding-speed average.
SPEED_EWMA_ALPHA = 0.3


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 0.3
    top_p: float = 0.95
    max_new_tokens: int = 384
    presence_penalty: float = 0.2
    frequency_penalty: float = 0.1
    seed: int | None = None
    # Benchmarks force equal lengths; services leave it at 0.
    min_new_tokens: int = 0
    # Candidates per token whose log-probabilities the engine reports (token confidence); 0 reports none.
    top_logprobs: int = 0


@dataclass(frozen=True)
class TextDelta:
    """Newly decoded text of sequence `index`, in generation order."""

    index: int
    text: str


@dataclass(frozen=True)
class Completion:
    """A finished sequence; emitted as soon as that sequence stops, not when the batch does."""

    index: int
    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: FinishReason
    latency_s: float
    # Per-token log-probabilities, where the request asked for them (`top_logprobs`) and the engine reports them.
    trace: TokenTrace | None = None


GenerationEvent = TextDelta | Completion
EventSink = Callable[[GenerationEvent], None]


class Cancellation(threading.Event):
    """Cancels a whole generation (`set()`) or single sequences of it (`cancel_sequence(i)`).

    An Event, so an engine that can only stop its whole batch treats it as before.
    """

    def __init__(self) -> None:
        super().__init__()
        self._sequences: set[int] = set()
        self.set_at: float | None = None  # time.monotonic() of the first set()

    def set(self) -> None:
        if self.set_at is None:
            self.set_at = time.monotonic()
        super().set()

    def cancel_sequence(self, index: int) -> None:
        self._sequences.add(index)

    def is_cancelled(self, index: int) -> bool:
        return self.is_set() or index in self._sequences


def sequence_cancelled(cancel: threading.Event, index: int) -> bool:
    """Whether sequence `index` is to stop: its own cancel, or the whole generation's."""
    return cancel.is_cancelled(index) if isinstance(cancel, Cancellation) else cancel.is_set()


class TraceBuilder:
    """Collects one sequence's per-token log-probabilities as the engine decodes it."""

    def __init__(self) -> None:
        self.logprobs: list[float] = []
        self.confidences: list[float] = []
        self.ends: list[int] = []

    def add(self, logprob: float, top_logprobs: Sequence[float], text_end: int) -> None:
        """One token: its log-probability, the top-k candidates' and where its text ends in the continuation."""
        self.logprobs.append(logprob)
        self.confidences.append(token_confidence(top_logprobs))
        self.ends.append(text_end)

    def trace(self) -> TokenTrace | None:
        if not self.logprobs:
            return None
        return TokenTrace(tuple(self.logprobs), tuple(self.confidences), tuple(self.ends))


class EngineError(RuntimeError):
    """An engine refused or failed a generation. `status` names the gRPC status code (grpc.StatusCode's name)
    the services answer with; INTERNAL unless the engine knows better (the remote engine maps HTTP errors)."""

    def __init__(self, message: str, status: str = "INTERNAL") -> None:
        super().__init__(message)
        self.status = status


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


@dataclass(frozen=True)
class EngineCapabilities:
    seed_per_sequence: bool = False
    cancel_one_sequence: bool = False
    output_schema: bool = False


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


class Engine(ABC):
    """Generates continuations for a batch of prompts in one call.

    Implementations serialize their own calls if the backend is not re-entrant.
    """

    name: str = "engine"
    capabilities = EngineCapabilities()

    @abstractmethod
    def format_chat(self, system: str, user: str) -> str:
        """Renders a system + user message with the model's chat template, ready for generation."""

    @abstractmethod
    def generate(
        self,
        prompts: Sequence[str],
        params: SamplingParams,
        on_event: EventSink,
        cancel: threading.Event,
        *,
        output_schema: dict | None = None,
    ) -> list[Completion]:
        """Blocking. One batched generation for all prompts.

        Calls `on_event` with TextDelta while decoding and with each Completion as its sequence
        stops. Setting `cancel` aborts the whole batch within one decoding step; unfinished
        sequences then complete with finish_reason "aborted". A `Cancellation` can also stop one
        sequence (where `capabilities.cancel_one_sequence`). Sequence i is seeded with
        `sequence_seeds(params, n)[i]` where the engine can (`capabilities.seed_per_sequence`).
        With `output_schema`, decoding is constrained to it where `capabilities.output_schema`.
        Returns completions in prompt order.
        """

    # Updated by _record_speed after each generation; None until the first one.
    _tokens_per_second: float | None = None
    # Created on first use (by `stream` or `load_report`, both on the event loop).
    _meter: LoadMeter | None = None

    @property
    def capacity(self) -> int:
        """Sequences the engine decodes at once; more wait for a free slot."""
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
        """Measured single-sequence decoding speed, or None before the first generation."""
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
                self.generate(prompts, params, emit, cancel, output_schema=output_schema)
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
