"""The one interface every LLM engine implements (transformers, vllm, remote)."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Literal

FinishReason = Literal["stop", "length", "aborted"]

log = logging.getLogger("deliberate.engine")

# Weight of the newest measurement in the decoding-speed average.
SPEED_EWMA_ALPHA = 0.3


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 0.3
    top_p: float = 0.95
    max_new_tokens: int = 256
    presence_penalty: float = 0.2
    frequency_penalty: float = 0.1
    seed: int | None = None
    # Benchmarks force equal lengths; services leave it at 0.
    min_new_tokens: int = 0


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


GenerationEvent = TextDelta | Completion
EventSink = Callable[[GenerationEvent], None]


def chat_prompt(tokenizer, system: str, user: str) -> str:
    """A system + user message rendered with a Hugging Face tokenizer's chat template, ready for generation."""
    messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
    return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


class Engine(ABC):
    """Generates continuations for a batch of prompts in one call.

    Implementations serialize their own calls if the backend is not re-entrant.
    """

    name: str = "engine"

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
    ) -> list[Completion]:
        """Blocking. One batched generation for all prompts.

        Calls `on_event` with TextDelta while decoding and with each Completion as its sequence
        stops. Setting `cancel` aborts the whole batch within one decoding step; unfinished
        sequences then complete with finish_reason "aborted". Returns completions in prompt order.
        """

    # Updated by _record_speed after each generation; None until the first one.
    _tokens_per_second: float | None = None

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

    async def stream(self, prompts: Sequence[str], params: SamplingParams) -> AsyncIterator[GenerationEvent]:
        """Runs `generate` in a worker thread and yields its events as they happen.

        Closing the iterator early (client cancel, deadline) aborts the engine's work.
        """
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[GenerationEvent | BaseException | None] = asyncio.Queue()
        cancel = threading.Event()

        def emit(event: GenerationEvent | BaseException | None) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, event)

        def work() -> None:
            try:
                self.generate(prompts, params, emit, cancel)
                emit(None)
            except BaseException as error:  # handed to the consumer, never lost in the thread
                emit(error)

        worker = loop.run_in_executor(None, work)
        finished = False
        try:
            while (event := await queue.get()) is not None:
                if isinstance(event, BaseException):
                    raise event
                yield event
            finished = True
        finally:
            cancel.set()
            asked = time.monotonic()
            await asyncio.shield(worker)
            if not finished:  # the consumer left early: say how fast the engine's work really stopped
                stopped_within_s = round(time.monotonic() - asked, 3)
                log.info("generation aborted", extra={"sequences": len(prompts), "stopped_within_s": stopped_within_s})
