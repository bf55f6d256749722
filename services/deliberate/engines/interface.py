"""The contract between the services and an LLM engine: what they may ask of one, and the types that cross it.

Only the contract: the machinery every engine shares (the template `generate`, the thread→async bridge, the
load meter, the speed average) is `base.Engine`; the engines themselves are plugins (`deliberate.engines`
entry points, `engines/__init__.py`).

What each engine can do beyond plain generation (`EngineCapabilities`):
- llamacpp: a seed per sequence, cancelling one sequence alone, decoding constrained to a JSON Schema;
- vllm: a seed per sequence and cancelling one sequence alone; no schema constraint yet;
- remote (an OpenAI-compatible server): a seed per sequence, cancelling one alone, the schema as `response_format`;
- transformers: one seed per batch (the first), cancel stops the whole batch, no schema constraint.
An engine that cannot honour a request's schema generates unconstrained and says so in `capabilities`;
the Verifier still checks every draft against the schema.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Literal

from ..selection.confidence import TokenTrace

FinishReason = Literal["stop", "length", "aborted"]


@dataclass(frozen=True)
class SamplingParams:
    # The services' sampling defaults (EngineSettings reads them): 256 new tokens cut off 33-67 % of the default
    # model's drafts before their final line (bench/studies/gsm8k-headline/eval-budget256.md).
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
    # Token confidence (selection.confidence.token_confidence) of each token decoded since the sequence's last
    # delta; empty where the engine reports no log-probabilities. What the Scheduler's confidence stop reads.
    confidences: tuple[float, ...] = ()


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


class EngineError(RuntimeError):
    """An engine refused or failed a generation. `status` names the gRPC status code (grpc.StatusCode's name)
    the services answer with; INTERNAL unless the engine knows better (the remote engine maps HTTP errors)."""

    def __init__(self, message: str, status: str = "INTERNAL") -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class EngineCapabilities:
    seed_per_sequence: bool = False
    cancel_one_sequence: bool = False
    output_schema: bool = False


@dataclass(frozen=True)
class EngineLoad:
    """How busy an engine is (the Drafter reports it, the Scheduler chooses N from it)."""

    busy_sequences: int
    queued_sequences: int
    capacity: int
    recent_tokens_per_second: float
    window_s: float


class EngineInterface(ABC):
    """What a service may ask of an engine: render a chat, generate a batch (blocking, or streamed on the event
    loop), and say how busy and how fast it is."""

    name: str
    capabilities: EngineCapabilities

    @property
    @abstractmethod
    def capacity(self) -> int:
        """Sequences the engine decodes at once; more wait for a free slot."""

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
        free_sequences: Collection[int] = (),
    ) -> list[Completion]:
        """Blocking. One batched generation for all prompts.

        Calls `on_event` with TextDelta while decoding and with each Completion as its sequence
        stops, one event at a time. Setting `cancel` aborts the whole batch within one decoding step; unfinished
        sequences then complete with finish_reason "aborted". A `Cancellation` can also stop one
        sequence (where `capabilities.cancel_one_sequence`). Sequence i is seeded with
        params.seed + i where the engine can (`capabilities.seed_per_sequence`).
        With `output_schema`, decoding is constrained to it where `capabilities.output_schema`, except for the
        sequences in `free_sequences` (a decision program among JSON drafts), decoded free.
        Returns completions in prompt order; raises EngineError where the engine refuses or fails.
        """

    @abstractmethod
    def stream(
        self,
        prompts: Sequence[str],
        params: SamplingParams,
        *,
        output_schema: dict | None = None,
        cancel: Cancellation | None = None,
        free_sequences: Collection[int] = (),
    ) -> AsyncIterator[GenerationEvent]:
        """`generate` off the event loop, its events yielded as they happen; closing the iterator (or setting
        `cancel`) aborts the engine's work."""

    @abstractmethod
    def load_report(self) -> EngineLoad:
        """Sequences busy and queued now, and the recent speed."""

    @property
    @abstractmethod
    def tokens_per_second(self) -> float | None:
        """Measured single-sequence decoding speed, or None before the first generation."""
