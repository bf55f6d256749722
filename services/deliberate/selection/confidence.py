"""How sure the model was of a draft: a few numbers reduced from the log-probabilities of its tokens.

Per token the engine reports the log-probability of the token it sampled and of the top-k candidates of the
model's (untempered) distribution. From them:
- `mean_logprob`: the mean log-probability of the sampled tokens (≤ 0; near 0 = the model expected its text);
- DeepConf's token confidence (arXiv 2508.15260): minus the mean log-probability of the top-k candidates — high
  when the distribution is peaked (the candidates besides the first are improbable), low when the model hesitates;
- `min_window` / `last_window`: token confidence averaged over sliding windows of `WINDOW_TOKENS` — the lowest
  window (the draft's weakest stretch) and the last one (its tail). DeepConf's windows are 2,048 tokens; drafts
  here are 100–400 tokens, so the windows are short;
- `answer`: the token confidence over the draft's last non-empty line (fences excluded): the final-answer line of
  a prose draft, the closing `print(…)` of a program.

`ConfidenceWatch` is DeepConf's stop, token by token: the Scheduler's confidence stop (docs/scheduler.md) and the
replays of it (`deliberate bench confidence-stop`, `early-stop-bound`) run the same one.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

WINDOW_TOKENS = 16
# No draft is stopped on its first tokens: the opening of a draft (restating the question) says little.
STOP_MIN_TOKENS = 32
FENCE = "```"


@dataclass(frozen=True)
class TokenTrace:
    """The per-token series of one draft, in decoding order."""

    logprobs: tuple[float, ...]  # the sampled token's log-probability
    confidences: tuple[float, ...]  # token confidence: −mean log-probability of the top-k candidates
    ends: tuple[int, ...]  # character offset in the draft's text where the token's text ends

    def shifted(self, characters: int) -> TokenTrace:
        """The trace with its offsets moved by `characters` (text the draft has before the engine's continuation,
        such as a program's prefilled fence)."""
        return TokenTrace(self.logprobs, self.confidences, tuple(end + characters for end in self.ends))


@dataclass(frozen=True)
class ConfidenceSummary:
    tokens: int
    mean_logprob: float
    min_window: float
    last_window: float
    answer: float | None  # None when the draft has no line to read it from
    window_tokens: int = WINDOW_TOKENS


def token_confidence(top_logprobs: Sequence[float]) -> float:
    """DeepConf's token confidence from the log-probabilities of the top-k candidates (0 without any)."""
    finite = [value for value in top_logprobs if math.isfinite(value)]
    return -sum(finite) / len(finite) if finite else 0.0


def window_means(values: Sequence[float], window: int = WINDOW_TOKENS) -> list[float]:
    """Means over every run of `window` consecutive values; one mean of them all when there are fewer."""
    if not values:
        return []
    if len(values) <= window:
        return [sum(values) / len(values)]
    running = sum(values[:window])
    means = [running / window]
    for index in range(window, len(values)):
        running += values[index] - values[index - window]
        means.append(running / window)
    return means


def summarize(trace: TokenTrace, text: str, window: int = WINDOW_TOKENS) -> ConfidenceSummary | None:
    """The draft's confidence numbers, or None when the engine reported no token probabilities."""
    if not trace.confidences:
        return None
    windows = window_means(trace.confidences, window)
    return ConfidenceSummary(
        tokens=len(trace.confidences),
        mean_logprob=sum(trace.logprobs) / len(trace.logprobs),
        min_window=min(windows),
        last_window=windows[-1],
        answer=answer_confidence(trace, text),
        window_tokens=window,
    )


class ConfidenceWatch:
    """Whether a draft's token confidence, averaged over its last `window` tokens, has fallen below `floor`;
    judged from the `min_tokens`-th token on (and once a whole window is in)."""

    def __init__(self, floor: float, window: int = WINDOW_TOKENS, min_tokens: int = STOP_MIN_TOKENS):
        self.floor, self.window, self.min_tokens = floor, window, min_tokens
        self.recent: deque[float] = deque(maxlen=window)
        self.running = 0.0  # the sum of `recent`, kept as the replays always summed it (add, then drop the oldest)
        self.tokens = 0

    @property
    def mean(self) -> float:
        return self.running / self.window

    def add(self, confidence: float) -> bool:
        """One more token's confidence; True once the window is below the floor."""
        self.running += confidence
        if len(self.recent) == self.window:
            self.running -= self.recent[0]
        self.recent.append(confidence)
        self.tokens += 1
        return self.tokens >= max(self.min_tokens, self.window) and self.mean < self.floor


def confidence_stop_point(
    series: Sequence[float], floor: float, window: int = WINDOW_TOKENS, min_tokens: int = STOP_MIN_TOKENS
) -> int | None:
    """The number of tokens after which a draft with this confidence series stops, or None: it never does."""
    watch = ConfidenceWatch(floor, window, min_tokens)
    return next((index + 1 for index, value in enumerate(series) if watch.add(value)), None)


def parse_floors(floors: str) -> dict[str, float]:
    """`prose=6.4,program=6.4` → {"prose": 6.4, "program": 6.4}; ValueError saying the format otherwise."""
    parsed = {}
    for entry in filter(None, (part.strip() for part in floors.split(","))):
        kind, _, value = entry.partition("=")
        try:
            parsed[kind.strip()] = float(value)
        except ValueError:
            raise ValueError(f"confidence floor {entry!r} is not kind=number (e.g. prose=6.4,program=6.4)") from None
        if not kind.strip() or not math.isfinite(parsed[kind.strip()]):
            raise ValueError(f"confidence floor {entry!r} is not kind=number (e.g. prose=6.4,program=6.4)")
    return parsed


def answer_confidence(trace: TokenTrace, text: str) -> float | None:
    """Mean token confidence of the tokens that end inside the text's last non-empty line (fences excluded)."""
    span = last_line_span(text)
    if span is None:
        return None
    start, end = span
    inside = [c for c, token_end in zip(trace.confidences, trace.ends, strict=True) if start < token_end <= end + 1]
    return sum(inside) / len(inside) if inside else None


def last_line_span(text: str) -> tuple[int, int] | None:
    """(start, end) character offsets of the last line that holds more than whitespace and a code fence."""
    end = len(text)
    while end > 0:
        start = text.rfind("\n", 0, end) + 1
        line = text[start:end].strip()
        if line and line.strip("`").strip() not in ("", "python"):
            return start, end
        end = start - 1
    return None
