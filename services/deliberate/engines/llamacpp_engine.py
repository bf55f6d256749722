"""In-process engine on llama.cpp (PyPI `xllamacpp`, prebuilt CPU wheels): the default engine.

It runs a GGUF as it is (no de-quantization) in llama.cpp's server core, in process: `parallel` slots
decode side by side in one continuous batch, and a unified KV cache lets a slot reuse the prompt
prefix another slot already evaluated. Each sequence of a `generate` call is one streaming completion
request from its own thread, so each has its own seed, its own JSON-Schema grammar and its own stop:
the stream callback returns True to end that request alone, within one decoding step.

xllamacpp is imported only when an engine is loaded: the package imports without it.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from .base import (
    Batch,
    Completion,
    Engine,
    EngineCapabilities,
    EngineError,
    FinishReason,
    TextDelta,
    TraceBuilder,
    cpu_count,
    error_message,
    sequence_cancelled,
)
from .models import gguf_file

log = logging.getLogger("deliberate.engine")

# Sequences decoded side by side; a call with more waits for a free slot (the Drafter's limit is 8).
DEFAULT_PARALLEL = 8
# KV cache tokens per slot: a ~300-token prompt and up to 1,024 new tokens fit with room for a 2k budget.
DEFAULT_CONTEXT_PER_SLOT = 2560
# Keywords llama.cpp's JSON-Schema-to-grammar converter refuses; with one anywhere in a schema it decodes with no
# grammar at all, silently (measured on xllamacpp with the ad example's `uniqueItems`: prose instead of JSON).
# They are left out of the grammar only: it is then looser than the schema, which the Verifier checks in full.
GRAMMAR_UNSUPPORTED = frozenset({
    "uniqueItems", "contains", "minContains", "maxContains", "not", "if", "then", "else", "propertyNames",
    "dependentRequired", "dependentSchemas", "unevaluatedItems", "unevaluatedProperties",
})  # fmt: skip
# Where a schema holds subschemas: one or a list of them, or a mapping of names to them.
SUBSCHEMAS = frozenset({"items", "additionalProperties", "additionalItems", "prefixItems", "anyOf", "oneOf", "allOf"})
SUBSCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions"})
# Stand-ins rendered once through the model's chat template; format_chat replaces them.
SYSTEM_MARKER = "\x1fDELIBERATE_SYSTEM\x1f"
USER_MARKER = "\x1fDELIBERATE_USER\x1f"


class LlamaCppEngine(Engine):
    name = "llamacpp"
    capabilities = EngineCapabilities(seed_per_sequence=True, cancel_one_sequence=True, output_schema=True)

    def __init__(self, server, model_path: Path, chat_template: tuple[str, str, str], parallel: int) -> None:
        self._server = server
        self.model_path = model_path
        self._template = chat_template  # (before the system text, between system and user, after user)
        self.parallel = parallel

    @classmethod
    def load(
        cls,
        model: str = "embedded",
        *,
        parallel: int = DEFAULT_PARALLEL,
        context_per_slot: int = DEFAULT_CONTEXT_PER_SLOT,
        threads: int | None = None,
        host_prompt_cache_mib: int = 0,
    ) -> LlamaCppEngine:
        """Loads `model` (an embedded model's name, or a .gguf file / a directory holding one).

        `host_prompt_cache_mib`: llama.cpp's copy of finished prompts' KV in host RAM (its default is 8 GiB).
        Off: every question differs, and with it the Drafter's RSS grew ~25 MB per evaluation problem
        (`deliberate bench prompt-cache-memory` measures it)."""
        import xllamacpp

        path = gguf_file(model)
        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.n_parallel = parallel
        params.kv_unified = True  # one KV pool: slots share the prompt prefix already evaluated
        params.cache_ram_mib = host_prompt_cache_mib
        params.n_ctx = parallel * context_per_slot
        params.cpuparams.n_threads = params.cpuparams_batch.n_threads = threads or cpu_count()
        params.verbosity = -1  # llama.cpp's own logs are per token; the service logs per request
        params.warmup = False
        params.n_threads_http = 1  # its HTTP front (loopback, unused by deliberate) needs no more
        server = xllamacpp.Server(params)
        engine = cls(server, path, _render_template_once(server), parallel)
        log.info("llama.cpp engine ready", extra={"model": str(path), "parallel": parallel})
        return engine

    @classmethod
    def from_settings(cls, model: str, threads: int, settings: object) -> LlamaCppEngine:
        return cls.load(model, threads=threads or None)

    @property
    def capacity(self) -> int:
        return self.parallel  # llama.cpp's slots; further sequences wait in its queue

    def format_chat(self, system: str, user: str) -> str:
        before, between, after = self._template
        return f"{before}{system}{between}{user}{after}"

    def decode(self, batch: Batch) -> list[Completion]:
        sequences = [
            _Sequence(index, prompt, batch.seeds[index], batch.started) for index, prompt in enumerate(batch.prompts)
        ]
        with ThreadPoolExecutor(len(sequences), thread_name_prefix="llamacpp") as pool:
            completions = list(pool.map(lambda sequence: self._complete(sequence, batch), sequences))
        batch.step_times += max(sequences, key=lambda s: len(s.token_times)).token_times
        return completions

    def _complete(self, sequence: _Sequence, batch: Batch) -> Completion:
        params, output_schema, on_event, cancel = (
            batch.params,
            batch.schema_of(sequence.index),
            batch.emit,
            batch.cancel,
        )
        request = {
            "prompt": sequence.prompt,
            "n_predict": params.max_new_tokens,
            "temperature": params.temperature,  # 0 is greedy in llama.cpp
            "top_p": params.top_p,
            "top_k": 0,  # nucleus sampling alone, as the other engines do
            "min_p": 0.0,
            "presence_penalty": params.presence_penalty,  # OpenAI semantics, as SamplingParams
            "frequency_penalty": params.frequency_penalty,
            "repeat_penalty": 1.0,
            "cache_prompt": True,
            "stream": True,
        }
        if sequence.seed is not None:
            request["seed"] = sequence.seed
        if params.min_new_tokens > 0:  # benchmarks force equal lengths; llama.cpp has no minimum, only no EOS
            request["ignore_eos"] = True
        if output_schema is not None:
            request["json_schema"] = grammar_schema(output_schema)
        if params.top_logprobs > 0:  # of the model's whole distribution, before sampling: ~4 % slower (bench/)
            request["logprobs"] = params.top_logprobs

        def on_chunk(chunk: dict) -> bool:
            if sequence_cancelled(cancel, sequence.index):
                sequence.cancelled = True
                return True  # ends this request alone
            sequence.read(chunk)
            if sequence.pending:
                on_event(TextDelta(sequence.index, sequence.pending, sequence.trace.new_confidences()))
                sequence.pending = ""
            return False

        if sequence_cancelled(cancel, sequence.index):
            sequence.cancelled = True
        else:
            result = self._server.handle_completions(request, on_chunk)
            if isinstance(result, dict) and "error" in result:  # e.g. a prompt longer than a slot's context
                raise EngineError(error_message(result["error"]))
        if sequence.error is not None:
            raise EngineError(sequence.error)
        completion = sequence.completion(time.perf_counter() - sequence.started)
        on_event(completion)
        return completion


def grammar_schema(schema: object) -> object:
    """`schema` without the keywords llama.cpp cannot turn into grammar (GRAMMAR_UNSUPPORTED), at every level of
    subschemas; property names and values (`const`, `enum`, `default`) are data and stay as they are."""
    if not isinstance(schema, dict):
        return schema
    kept = {}
    for key, value in schema.items():
        if key in GRAMMAR_UNSUPPORTED:
            continue
        if key in SUBSCHEMAS:
            value = [grammar_schema(item) for item in value] if isinstance(value, list) else grammar_schema(value)
        elif key in SUBSCHEMA_MAPS and isinstance(value, dict):
            value = {name: grammar_schema(item) for name, item in value.items()}
        kept[key] = value
    return kept


@dataclass
class _Sequence:
    """One sequence's request and what its stream has delivered so far."""

    index: int
    prompt: str
    seed: int | None
    started: float
    text: str = ""
    pending: str = ""  # text received and not yet emitted
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None
    cancelled: bool = False
    error: str | None = None
    token_times: list[float] = field(default_factory=list)
    trace: TraceBuilder = field(default_factory=TraceBuilder)

    def read(self, chunk: dict) -> None:
        if "error" in chunk:
            self.error = error_message(chunk["error"])
            return
        for choice in chunk.get("choices") or ():
            if piece := choice.get("text"):
                self.text += piece
                self.pending += piece
                self.token_times.append(time.perf_counter())
            for token in (choice.get("logprobs") or {}).get("content") or ():
                top = [candidate["logprob"] for candidate in token.get("top_logprobs") or ()]
                self.trace.add(token["logprob"], top, len(self.text))
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        if usage := chunk.get("usage"):
            self.prompt_tokens = usage.get("prompt_tokens", self.prompt_tokens)
            self.completion_tokens = usage.get("completion_tokens", self.completion_tokens)

    def completion(self, latency_s: float) -> Completion:
        reason: FinishReason
        if self.cancelled:
            reason = "aborted"
        elif self.finish_reason == "stop":
            reason = "stop"
        else:
            reason = "length"
        # A cancelled stream never sees its usage chunk: count the pieces it did see.
        tokens = self.completion_tokens or len(self.token_times)
        return Completion(self.index, self.text, self.prompt_tokens, tokens, reason, latency_s, self.trace.trace())


def _render_template_once(server) -> tuple[str, str, str]:
    """The model's chat template split around the system and user texts.

    llama.cpp renders the template (from the GGUF) for a chat request and reports the prompt when asked
    to be verbose; rendering it once with markers gives a format_chat that needs no template engine here.
    """
    response = server.handle_chat_completions(
        {
            "messages": [{"role": "system", "content": SYSTEM_MARKER}, {"role": "user", "content": USER_MARKER}],
            "max_tokens": 1,
            "verbose": True,
        }
    )
    prompt = (response.get("__verbose") or {}).get("prompt", "") if isinstance(response, dict) else ""
    before, found_system, rest = prompt.partition(SYSTEM_MARKER)
    between, found_user, after = rest.partition(USER_MARKER)
    if not (found_system and found_user):
        raise EngineError(f"could not read the model's chat template (llama.cpp answered {str(response)[:200]!r})")
    return before, between, after
