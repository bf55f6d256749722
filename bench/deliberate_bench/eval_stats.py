"""Pure pieces of `deliberate eval`: reading gold answers, comparing answers as numbers, voting, ranking
drafts, and the statistics (Wilson interval, paired bootstrap, percentiles). No I/O, no gRPC.
"""

from __future__ import annotations

import math
import random
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

from deliberate.core.stats import percentile, percentile_sorted  # noqa: F401  (percentile: re-exported)
from deliberate.verifier.parsing import iter_numbers

Z95 = 1.959963984540054  # the 97.5 % quantile of the standard normal

# --------------------------------------------------------------------------------------------------
# Answers as numbers
# --------------------------------------------------------------------------------------------------

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_FRAC = re.compile(r"\\[dt]?frac\s*\{\s*([^{}]*?)\s*\}\s*\{\s*([^{}]*?)\s*\}")
_TEXT = re.compile(r"\\(?:text|textbf|mathrm|mbox|operatorname)\s*\{([^{}]*)\}")
_LATEX_NOISE = re.compile(r"\\[,;:!]|\\left|\\right|\\quad|\\qquad|\\displaystyle|\\\(|\\\)|\\\[|\\\]")


def _boxed_content(text: str) -> str | None:
    """The content of the last `\\boxed{…}` (braces balanced), or None."""
    matches = list(_BOXED.finditer(text))
    if not matches:
        return None
    start = matches[-1].end()
    depth = 1
    for position in range(start, len(text)):
        if text[position] == "{":
            depth += 1
        elif text[position] == "}":
            depth -= 1
            if depth == 0:
                return text[start:position]
    return text[start:]


def delatex(text: str) -> str:
    """Plain text from the LaTeX a model writes around an answer: `\\boxed{72}` -> `72`,
    `\\frac{3}{4}` -> `3/4`, `\\$1{,}200` -> `$1,200`, `72 \\text{ clips}` -> `72  clips`."""
    boxed = _boxed_content(text)
    if boxed is not None:
        text = boxed
    text = _TEXT.sub(r" \1 ", text)
    text = _FRAC.sub(r"\1/\2", text)
    text = text.replace("{,}", ",").replace("\\$", "$").replace("\\%", "%").replace("\\cdot", "*")
    text = text.replace("\\times", "*")
    text = _LATEX_NOISE.sub(" ", text)
    return text.replace("$$", " ")


def answer_value(answer: str | None) -> Fraction | None:
    """The number an extracted answer states, exactly, or None when it states none.

    LaTeX is read (`\\boxed{}`, `\\frac{}{}`, `\\text{}`); `$`, thousands separators, `%` and units are
    dropped; in `48 + 24 = 72 clips` the part after the last `=` counts. `"$1,200.50"` -> 2401/2,
    `"72.0"` -> 72, `"\\frac{3}{4}"` -> 3/4.
    """
    if not answer:
        return None
    text = delatex(answer)
    if "=" in text:
        text = text.rsplit("=", 1)[1]
    for number in iter_numbers(text):
        return Fraction(number.value)
    return None


def parse_gold(answer: str) -> Fraction:
    """The gold number of a GSM8K `answer` field: what follows the last `####` (`#### 1,000` -> 1000)."""
    if "####" not in answer:
        raise ValueError("a GSM8K answer must end with '#### <number>'")
    value = answer_value(answer.rsplit("####", 1)[1].strip())
    if value is None:
        raise ValueError(f"no number after '####' in {answer[-60:]!r}")
    return value


def same_number(a: Fraction | None, b: Fraction | None, rel: float = 1e-6) -> bool:
    """Equal up to a relative tolerance of `rel` (so 0.333333 counts as 1/3 only if written that precisely)."""
    if a is None or b is None:
        return False
    return abs(a - b) <= Fraction(rel) * max(Fraction(1), abs(b))


def is_correct(answer: str | None, gold: str | Fraction) -> bool:
    gold_value = gold if isinstance(gold, Fraction) else answer_value(str(gold))
    return same_number(answer_value(answer), gold_value)


def vote_key(answer: str | None) -> str | None:
    """What majority voting counts: the exact number when there is one, else the stripped lowercase text."""
    if not answer or not answer.strip():
        return None
    value = answer_value(answer)
    if value is not None:
        return f"{value.numerator}/{value.denominator}"
    return " ".join(answer.lower().split())


def majority(answers: Sequence[str | None]) -> str | None:
    """Self-consistency: the most frequent answer (by `vote_key`); a tie goes to the answer given first.
    Drafts without an answer do not vote; None when none has one."""
    counts: dict[str, int] = {}
    first: dict[str, str] = {}
    for answer in answers:
        key = vote_key(answer)
        if key is None:
            continue
        counts[key] = counts.get(key, 0) + 1
        first.setdefault(key, answer)
    if not counts:
        return None
    best = max(counts.values())
    winner = next(key for key in first if counts[key] == best)  # dicts keep insertion order
    return first[winner]


# --------------------------------------------------------------------------------------------------
# Ranking drafts the way the Scheduler does, term by term (the selection ablation)
# --------------------------------------------------------------------------------------------------

TERMS = ("score", "stddev", "latency", "agreement")


@dataclass(frozen=True)
class DraftView:
    """What ranking needs from one draft."""

    index: int
    valid: bool
    score: float
    latency: float  # verification latency / verification timeout, in [0, 1] (ScoreComponents.latency)
    answer: str | None
    checked: bool = False  # a substantive check ran and passed (DraftVerdict.evidence is not empty)


@dataclass(frozen=True)
class RankWeights:
    alpha: float = 1.0
    beta: float = 0.3
    gamma: float = 0.02
    delta: float = 0.0  # weight of answer_share inside `final` (0: it only breaks ties, as in the seed)


def answer_shares(drafts: Sequence[DraftView]) -> dict[int, float]:
    """Share of valid drafts whose answer (by `vote_key`) equals this draft's; 0 for invalid or answerless drafts."""
    valid = [d for d in drafts if d.valid]
    keys = [vote_key(d.answer) for d in valid]
    shares = {}
    for d in drafts:
        key = vote_key(d.answer) if d.valid else None
        shares[d.index] = keys.count(key) / len(valid) if key is not None else 0.0
    return shares


def rank(
    drafts: Sequence[DraftView], terms: Sequence[str], weights: RankWeights, shares: dict[int, float] | None = None
) -> list[DraftView]:
    """Drafts best first under a selection rule built from `terms` (a prefix of TERMS):

    * ``score``: the Verifier's score (α·score);
    * ``stddev``: + β·(1 − stddev of the drafts' scores) — one value per request, so it never reorders
      drafts of one request; it is kept because the seed's ablation reports it;
    * ``latency``: − γ·verification latency;
    * ``agreement``: the share of valid drafts with the same answer — weighted by δ inside the sum when the
      Scheduler weighs it, and in any case the tie-breaker after the sum (as the Scheduler ranks).

    `shares` (by draft index) replaces the computed answer shares, e.g. with those the Scheduler reported.
    Only drafts that passed every hard rule compete, checked ones (with evidence) before unchecked ones, as
    the Scheduler ranks; when none passed, the best-scoring draft comes first whatever the terms (the
    Scheduler answers it as unverified). Remaining ties go to the earlier draft.
    """
    unknown = set(terms) - set(TERMS)
    if unknown:
        raise ValueError(f"unknown ranking terms: {sorted(unknown)}")
    if not drafts:
        return []
    pool = [d for d in drafts if d.valid]
    if not pool:
        return sorted(drafts, key=lambda d: (-d.score, d.index))
    scores = [d.score for d in drafts]
    agreement = 1.0 - (statistics.pstdev(scores) if len(scores) > 1 else 0.0)
    shares = answer_shares(drafts) if shares is None else shares

    def key(d: DraftView) -> tuple:
        total = weights.alpha * d.score if "score" in terms else 0.0
        if "stddev" in terms:
            total += weights.beta * agreement
        if "latency" in terms:
            total -= weights.gamma * d.latency
        share = shares[d.index] if "agreement" in terms else 0.0
        total += weights.delta * share
        return (not d.checked, -round(total, 9), -share, d.index)

    return sorted(pool, key=key)


def draft_views(drafts: Sequence[dict]) -> list[DraftView]:
    """Ranking views of the draft records of a runs file."""
    return [
        DraftView(
            index=d["index"],
            valid=d["valid"],
            score=d["score"],
            latency=d["components"].get("latency", 0.0),
            answer=d["answer"],
            checked=bool(d.get("evidence")),
        )
        for d in drafts
    ]


def infer_delta(components: Sequence[dict]) -> float:
    """The weight the Scheduler gives answer_share inside `final`, read back from its reported components:
    final − (α·score + β·agreement − γ·latency) = δ·answer_share. 0 when the Scheduler adds nothing."""
    for c in components:
        share = c.get("answer_share", 0.0)
        if share > 0:
            rest = c.get("alpha", 0) * c.get("score", 0) + c.get("beta", 0) * c.get("agreement", 0)
            rest -= c.get("gamma", 0) * c.get("latency", 0)
            residual = c.get("final", 0.0) - rest
            return residual / share if abs(residual) > 1e-9 else 0.0
    return 0.0


# --------------------------------------------------------------------------------------------------
# Statistics
# --------------------------------------------------------------------------------------------------


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion (95 % by default); (0, 1) when n = 0."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def paired_bootstrap(
    a: Sequence[bool], b: Sequence[bool], *, seed: int = 2026, resamples: int = 10_000, level: float = 0.95
) -> tuple[float, float, float]:
    """Mean of a − b over paired outcomes, with a percentile bootstrap interval that resamples problems
    (the pairs) with replacement: ``(difference, low, high)``."""
    if len(a) != len(b):
        raise ValueError("paired outcomes must have the same length")
    n = len(a)
    if n == 0:
        return 0.0, 0.0, 0.0
    diffs = [int(x) - int(y) for x, y in zip(a, b, strict=True)]
    rng = random.Random(seed)
    means = sorted(sum(rng.choices(diffs, k=n)) / n for _ in range(resamples))
    tail = (1 - level) / 2
    return sum(diffs) / n, percentile_sorted(means, tail), percentile_sorted(means, 1 - tail)
