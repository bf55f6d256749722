"""In-process engine on Hugging Face transformers (the `engine` extra: torch), on a GGUF de-quantized to fp32.

One `model.generate` call decodes all prompts of a request as one batch. Around it:
- the prompt prefix that all drafts share is prefilled once (see `_batch_inputs`);
- a streamer turns the batch's token stream into per-row TextDelta / Completion events;
- logits processors add OpenAI-style presence/frequency penalties and a fast exact nucleus sampler, and, when a
  request asks for them (`top_logprobs`), record each step's log-probabilities for the per-token trace;
- a stopping criterion aborts the batch when `cancel` is set;
- skinny matmuls make small-batch decode steps cheaper on CPU.
The last three are `transformers_decoding.py`'s.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    LogitsProcessorList,
    MinNewTokensLengthLogitsProcessor,
    StoppingCriteriaList,
)
from transformers.generation.streamers import BaseStreamer
from transformers.utils import logging as hf_logging

from .base import (
    Batch,
    Completion,
    Engine,
    EventSink,
    FinishReason,
    SamplingParams,
    TextDelta,
    TraceBuilder,
    chat_prompt,
    cpu_count,
)
from .models import resolve_model
from .transformers_decoding import (
    CancelCriterion,
    NucleusSampler,
    PresenceFrequencyPenalty,
    TokenLogprobs,
    use_skinny_matmuls,
)

# A batch's common prompt prefix is prefilled once when it is at least this long (in tokens).
MIN_SHARED_PREFIX = 16


# The sequences one batch is counted as holding when full (see `TransformersEngine.capacity`).
BATCH_CAPACITY = 8


class TransformersEngine(Engine):
    """One `model.generate` per call: the batch has one RNG (its first sequence's seed), stops as a whole
    on cancel, and decodes without a schema constraint (the Verifier checks the schema)."""

    name = "transformers"

    def __init__(self, model: torch.nn.Module, tokenizer) -> None:
        self._model = model.eval()
        self._tokenizer = tokenizer
        # Drafts differ in length (one strategy hint each); left padding keeps every row's last token
        # last. _batch_inputs pads on its own, this covers any other batch tokenization.
        tokenizer.padding_side = "left"
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        self._eos_ids = _eos_token_ids(model, tokenizer)
        use_skinny_matmuls(model)
        self._lock = threading.Lock()  # one generate at a time: the model and its RNG are shared

    @property
    def capacity(self) -> int:
        # One batch at a time, of any size: count the Drafter's default request (8 drafts) as full. Only the
        # split between busy and queued depends on it; their sum against it is the load either way.
        return BATCH_CAPACITY

    @classmethod
    def load(cls, model: str = "embedded", *, threads: int | None = None) -> TransformersEngine:
        """Loads `model`: an embedded model's name (models.py), a .gguf file, or a directory (HF format or
        holding one .gguf).

        `threads` sets torch's (process-wide) intra-op threads; default: every CPU this process may
        use. Give it fewer when other busy processes share those CPUs: a thread that waits for a CPU
        stalls every matmul, and decoding then runs ~2.5x slower than with one thread.
        """
        torch.set_num_threads(threads or cpu_count())
        network, tokenizer = load_pretrained(model)
        return cls(network, tokenizer)

    @classmethod
    def from_settings(cls, model: str, threads: int, settings: object) -> TransformersEngine:
        return cls.load(model, threads=threads or None)

    def format_chat(self, system: str, user: str) -> str:
        return chat_prompt(self._tokenizer, system, user)

    def decode(self, batch: Batch) -> list[Completion]:
        params = batch.params
        with self._lock, torch.inference_mode():  # latencies include any wait for the lock, as a caller sees them
            inputs, prompt_tokens = self._batch_inputs(batch.prompts)
            recorder = TokenLogprobs(params.top_logprobs) if params.top_logprobs > 0 else None
            streamer = _RowStreamer(self._tokenizer, prompt_tokens, self._eos_ids, batch.emit, batch.started, recorder)
            stop_on_cancel = CancelCriterion(batch.cancel)
            if params.seed is not None:  # one RNG for the batch: sequence_seeds' first seed
                torch.manual_seed(params.seed)
            self._model.generate(
                **inputs,
                **self._decoding_options(params, prompt_length=inputs["input_ids"].shape[1], recorder=recorder),
                streamer=streamer,
                stopping_criteria=StoppingCriteriaList([stop_on_cancel]),
            )
            completions = streamer.close_open_rows("aborted" if stop_on_cancel.fired else "length")
            batch.step_times += streamer.step_times
            return completions

    def _batch_inputs(self, prompts: Sequence[str]) -> tuple[dict, list[int]]:
        """generate() inputs for the batch, and each prompt's length in tokens.

        Drafts share a long prefix (system prompt, question) and differ in the strategy hint. That
        prefix is run once and its KV cache copied to every row; the rest of each prompt follows,
        padded on its left, so each row reads [shared prefix][padding][own suffix]. Positions come
        from the attention mask, so a row sees the same positions as it would unpadded. Without a
        shared prefix this is plain left padding.
        """
        # Prompts come from format_chat, which already holds the template's special tokens.
        rows = self._tokenizer(list(prompts), add_special_tokens=False)["input_ids"]
        shared = _common_prefix_length(rows) if len(rows) > 1 else 0
        shared = min(shared, min(len(row) for row in rows) - 1)  # every row keeps a token to prefill
        if shared < MIN_SHARED_PREFIX:
            shared = 0
        width = max(len(row) for row in rows) - shared
        pad = self._tokenizer.pad_token_id
        input_ids, attention_mask = [], []
        for row in rows:
            padding = width - (len(row) - shared)
            input_ids.append(row[:shared] + [pad] * padding + row[shared:])
            attention_mask.append([1] * shared + [0] * padding + [1] * (len(row) - shared))
        inputs = {"input_ids": torch.tensor(input_ids), "attention_mask": torch.tensor(attention_mask)}
        if shared:
            prefix = self._model(input_ids=inputs["input_ids"][:1, :shared], use_cache=True, logits_to_keep=1)
            prefix.cache.batch_repeat_interleave(len(rows))
            inputs["cache"] = prefix.cache
        return inputs, [len(row) for row in rows]

    def _decoding_options(
        self, params: SamplingParams, prompt_length: int, recorder: TokenLogprobs | None = None
    ) -> dict:
        # In this order: the recorder sees the model's own logits, before anything below changes them.
        processors = LogitsProcessorList([recorder] if recorder is not None else [])
        # The minimum length is ours rather than generate's (`min_new_tokens`): generate would run its own processor
        # ahead of ours, and the recorder would see EOS masked.
        if (min_new_tokens := min(params.min_new_tokens, params.max_new_tokens)) > 0:
            processors.append(MinNewTokensLengthLogitsProcessor(prompt_length, min_new_tokens, sorted(self._eos_ids)))
        if params.presence_penalty or params.frequency_penalty:
            processors.append(
                PresenceFrequencyPenalty(params.presence_penalty, params.frequency_penalty, prompt_length)
            )
        if params.temperature > 0:
            processors.append(NucleusSampler(params.temperature, params.top_p))
        return {
            "max_new_tokens": params.max_new_tokens,
            # Sampling happens in NucleusSampler, which leaves one finite score per row: greedy
            # selection then picks the sampled token. Without it this is plain greedy decoding.
            "do_sample": False,
            "logits_processor": processors,
            "eos_token_id": sorted(self._eos_ids),
            "pad_token_id": self._tokenizer.pad_token_id,
        }


def _common_prefix_length(rows: list[list[int]]) -> int:
    """How many leading tokens all rows share."""
    length = 0
    for column in zip(*rows, strict=False):
        if any(token != column[0] for token in column):
            break
        length += 1
    return length


# --- Streaming: one batch of tokens per step in, per-row events out ---------------------------------------


@dataclass
class _Row:
    ids: list[int] = field(default_factory=list)
    pieces: list[str] = field(default_factory=list)  # the text deltas sent so far
    # Detokenizer window (as in vLLM): ids[prefix:read] were already turned into text; decoding from
    # `prefix` keeps tokenizers that drop a fragment's leading space (SentencePiece) correct.
    prefix: int = 0
    read: int = 0
    done: bool = False
    sent: int = 0  # characters of text sent so far
    trace: TraceBuilder = field(default_factory=TraceBuilder)


class _RowStreamer(BaseStreamer):
    """Receives the prompt batch, then each step's new tokens; emits TextDelta and per-row Completion. With a
    `recorder`, each row's tokens also get their log-probabilities (the Completion's trace)."""

    def __init__(
        self,
        tokenizer,
        prompt_tokens: list[int],
        eos_ids: set[int],
        on_event: EventSink,
        started,
        recorder: TokenLogprobs | None = None,
    ):
        self._tokenizer = tokenizer
        self._recorder = recorder
        self._prompt_tokens = prompt_tokens
        self._eos_ids = eos_ids
        self._on_event = on_event
        self._started = started
        self._rows = [_Row() for _ in prompt_tokens]
        self._completions: list[Completion | None] = [None] * len(prompt_tokens)
        self._prompt_seen = False
        self.step_times: list[float] = []

    def put(self, value: torch.Tensor) -> None:
        if not self._prompt_seen:  # generate hands over the prompt batch first
            self._prompt_seen = True
            return
        self.step_times.append(time.perf_counter())
        step = self._recorder.take(value) if self._recorder is not None else None
        for index, token in enumerate(value.reshape(-1).tolist()):
            row = self._rows[index]
            if row.done:  # finished rows keep receiving padding
                continue
            row.ids.append(token)
            stop = token in self._eos_ids
            self._emit_text(index, final=stop)
            if step is not None:
                sampled, top = step
                row.trace.add(sampled[index], top[index], row.sent)
            if stop:
                self._complete(index, "stop")

    def end(self) -> None:
        """Nothing to do: the engine closes the rows that are still open, knowing why they stopped."""

    def close_open_rows(self, reason: FinishReason) -> list[Completion]:
        for index, row in enumerate(self._rows):
            if not row.done:
                self._complete(index, reason)
        return [completion for completion in self._completions if completion is not None]

    def _complete(self, index: int, reason: FinishReason) -> None:
        row = self._rows[index]
        self._emit_text(index, final=True)
        row.done = True
        if row.trace.ends:  # text held back for a character cut in the middle ends with the last token
            row.trace.ends[-1] = row.sent
        completion = Completion(
            index=index,
            text="".join(row.pieces),
            prompt_tokens=self._prompt_tokens[index],
            completion_tokens=len(row.ids),  # includes the EOS token when the row stopped on it
            finish_reason=reason,
            latency_s=time.perf_counter() - self._started,
            trace=row.trace.trace(),
        )
        self._completions[index] = completion
        self._on_event(completion)

    def _emit_text(self, index: int, final: bool) -> None:
        row = self._rows[index]
        seen = self._decode(row.ids[row.prefix : row.read])
        text = self._decode(row.ids[row.prefix :])
        # A trailing U+FFFD is a multi-byte character cut in the middle: wait for its next token.
        if len(text) <= len(seen) or (text.endswith("\ufffd") and not final):
            return
        delta = text[len(seen) :]
        row.prefix, row.read = row.read, len(row.ids)
        row.pieces.append(delta)
        row.sent += len(delta)
        self._on_event(TextDelta(index, delta, row.trace.new_confidences()))

    def _decode(self, ids: list[int]) -> str:
        # No clean-up: it rewrites " ." as "." and would change text that was already sent.
        return self._tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)


# --- Loading --------------------------------------------------------------------------------------------


def load_pretrained(model: str) -> tuple[torch.nn.Module, object]:
    """`model`'s network (fp32, de-quantized from a GGUF) and tokenizer, as transformers loads them: the engine
    serves them, `deliberate bench train-judge` fine-tunes them."""
    directory, gguf_file = _locate(model)
    # local_files_only: an engine never reaches the network, whatever the environment says.
    with _quiet_progress_bars(), _parse_gguf_once():
        tokenizer = AutoTokenizer.from_pretrained(directory, gguf_file=gguf_file, local_files_only=True)
        network = AutoModelForCausalLM.from_pretrained(
            directory, gguf_file=gguf_file, dtype=torch.float32, local_files_only=True
        )
    return network, tokenizer


def _locate(model: str) -> tuple[str, str | None]:
    """(directory, gguf file name or None) for from_pretrained."""
    path = resolve_model(model)
    if path.is_file() and path.suffix == ".gguf":
        return str(path.parent), path.name
    if path.is_dir() and (path / "config.json").is_file():
        return str(path), None
    ggufs = sorted(path.glob("*.gguf")) if path.is_dir() else []
    if len(ggufs) != 1:
        raise FileNotFoundError(f"model {model!r}: expected an HF config.json or exactly one .gguf in {path}")
    return str(path), ggufs[0].name


def _eos_token_ids(model, tokenizer) -> set[int]:
    configured = model.generation_config.eos_token_id
    ids = set(configured if isinstance(configured, list) else [configured])
    ids.add(tokenizer.eos_token_id)
    ids.discard(None)
    return ids


@contextlib.contextmanager
def _quiet_progress_bars() -> Iterator[None]:
    """Hides the weight-loading progress bars so service logs stay clean."""
    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    # The GGUF de-quantisation bar uses tqdm directly, not transformers' switch.
    gguf_utils = importlib.import_module("transformers.modeling_gguf_pytorch_utils")
    original_tqdm = getattr(gguf_utils, "tqdm", None)
    if original_tqdm is not None:
        gguf_utils.tqdm = functools.partial(original_tqdm, disable=True)
    try:
        yield
    finally:
        if original_tqdm is not None:
            gguf_utils.tqdm = original_tqdm
        if was_enabled:
            hf_logging.enable_progress_bar()


@contextlib.contextmanager
def _parse_gguf_once() -> Iterator[None]:
    """Shares one GGUFReader between the tokenizer, config and weights loads.

    transformers opens the file three times; parsing its metadata (49k-token vocabulary) takes
    ~6 s on 2 CPUs each time. The reader only reads, so one instance serves all three.
    """
    try:
        import gguf
    except ImportError:  # an HF-format model needs no GGUF support
        yield
        return
    original = gguf.GGUFReader
    gguf.GGUFReader = functools.lru_cache(maxsize=4)(original)  # transformers imports it at call time
    try:
        yield
    finally:
        gguf.GGUFReader = original
