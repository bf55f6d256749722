"""What the transformers engine hands to `model.generate`, apart from its streamer: logits processors (OpenAI-style
presence/frequency penalties, a fast exact nucleus sampler, the recorder of each step's log-probabilities), the
stopping criterion that cancels a batch, and skinny matmuls that make small-batch decode steps cheaper on CPU.

Imported with `transformers_engine`, which is imported only once the transformers engine is chosen (torch).
"""

from __future__ import annotations

import functools
import math
import threading
from collections import deque

import torch
import torch.nn.functional as F
from transformers import LogitsProcessor, StoppingCriteria

# Decode steps feed at most this many rows (batch × 1 token) through each Linear; prefill feeds more.
SKINNY_MAX_ROWS = 64

# Nucleus sampling looks for the top-p mass among this many best tokens before sorting the vocabulary.
NUCLEUS_CANDIDATES = 128


# --- Logits processors and stopping ---------------------------------------------------------------------


class PresenceFrequencyPenalty(LogitsProcessor):
    """OpenAI semantics: logits[t] -= presence * (count[t] > 0) + frequency * count[t].

    Counts only the tokens generated so far in each row: prompt tokens and left padding sit before
    `prompt_length`. Counts are kept between steps, so each step adds one column instead of recounting.
    """

    def __init__(self, presence: float, frequency: float, prompt_length: int) -> None:
        self.presence = presence
        self.frequency = frequency
        self.prompt_length = prompt_length
        self._counts: torch.Tensor | None = None
        self._counted = prompt_length  # columns of input_ids already in _counts

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self._counts is None or self._counts.shape != scores.shape:
            self._counts = torch.zeros_like(scores)
            self._counted = self.prompt_length
        new = input_ids[:, self._counted :]
        if new.numel():
            self._counts.scatter_add_(1, new, torch.ones_like(new, dtype=scores.dtype))
            self._counted = input_ids.shape[1]
        return scores - self.presence * (self._counts > 0).to(scores.dtype) - self.frequency * self._counts


class TokenLogprobs(LogitsProcessor):
    """Records each decoding step's log-probabilities for the streamer; changes no score.

    The engine runs it first, on the model's logits as they come: the log-probabilities are the model's own
    distribution, untempered, before penalties, top-p and the minimum length's EOS mask (llama.cpp reports the
    same). A step costs a log-softmax and a top-k over the vocabulary per row, only when a request asks.
    """

    def __init__(self, top_k: int) -> None:
        self.top_k = top_k
        # Steps whose tokens the streamer has not seen yet: one, or two where generate hands tokens over a step
        # late (its DeferredStopCheck); the step generate undoes then is never handed over.
        self._steps: deque[tuple[torch.Tensor, torch.Tensor]] = deque()

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        logprobs = torch.log_softmax(scores.float(), dim=-1)
        top = logprobs.topk(min(self.top_k, logprobs.shape[-1]), dim=-1).values
        self._steps.append((logprobs, top))
        return scores

    def take(self, tokens: torch.Tensor) -> tuple[list[float], list[list[float]]] | None:
        """For the oldest step not taken yet, whose sampled tokens are `tokens` (one per row): each row's sampled
        token log-probability and its top-k log-probabilities; None when no step is left."""
        if not self._steps:
            return None
        logprobs, top = self._steps.popleft()
        sampled = logprobs.gather(1, tokens.reshape(-1, 1).to(logprobs.device)).reshape(-1)
        return sampled.tolist(), top.tolist()


class NucleusSampler(LogitsProcessor):
    """Temperature + top-p sampling; returns scores that are -inf except for the sampled token.

    Same distribution as sorting the whole vocabulary, but cheaper: the nucleus is first looked for
    among the best NUCLEUS_CANDIDATES tokens, and the full sort only happens when their mass falls
    short of top_p. On CPU the full sort plus a 49k-way multinomial cost ~4 ms per row per step.
    """

    def __init__(self, temperature: float, top_p: float, candidates: int = NUCLEUS_CANDIDATES) -> None:
        self.temperature = temperature
        self.top_p = top_p
        self.candidates = candidates

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        probs = torch.softmax(scores / self.temperature, dim=-1)
        if self.top_p >= 1.0:
            chosen = torch.multinomial(probs, 1)
        else:
            chosen = self._sample_nucleus(probs)
        return torch.full_like(scores, -math.inf).scatter_(1, chosen, 0.0)

    def _sample_nucleus(self, probs: torch.Tensor) -> torch.Tensor:
        best, ids = probs.topk(min(self.candidates, probs.shape[-1]), dim=-1)
        if bool((best.sum(dim=-1) < self.top_p).any()):  # nucleus wider than the candidates
            best, ids = probs.sort(dim=-1, descending=True)
        # Keep a token while the mass ranked above it is below top_p (the smallest set reaching top_p).
        drop = best.cumsum(dim=-1) - best >= self.top_p
        drop[:, 0] = False  # the best token always stays, even for top_p = 0
        return ids.gather(1, torch.multinomial(best.masked_fill(drop, 0.0), 1))


class CancelCriterion(StoppingCriteria):
    """Stops every row at the end of the current step once `cancel` is set."""

    def __init__(self, cancel: threading.Event) -> None:
        self.cancel = cancel
        self.fired = False

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs) -> torch.BoolTensor:
        self.fired = self.fired or self.cancel.is_set()
        return torch.full((input_ids.shape[0],), self.fired, dtype=torch.bool, device=input_ids.device)


# --- Faster decode steps on CPU -------------------------------------------------------------------------


def use_skinny_matmuls(model: torch.nn.Module) -> None:
    """Routes every Linear through `skinny_linear`. Same fp32 math, different GEMM layout."""
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            module.forward = functools.partial(skinny_linear, module)


def skinny_linear(module: torch.nn.Linear, x: torch.Tensor) -> torch.Tensor:
    # A decode step multiplies a few rows (one per sequence) by each weight. On CPU, MKL handles
    # W @ xᵀ (tall weight, few columns) far better than x @ Wᵀ for 2..64 rows: 5 rows cost about
    # what 1 row does, instead of ~1.7x. Prefill (many rows) keeps the usual path.
    rows = x.numel() // x.shape[-1]
    if rows > SKINNY_MAX_ROWS or x.device.type != "cpu":
        return F.linear(x, module.weight, module.bias)
    out = torch.mm(module.weight, x.reshape(rows, -1).T).T.contiguous()
    if module.bias is not None:
        out += module.bias
    return out.reshape(*x.shape[:-1], out.shape[-1])
