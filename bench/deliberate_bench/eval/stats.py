"""The statistics of `deliberate bench eval` and its replay: Wilson interval, paired bootstrap, percentiles. Pure.
Answers are compared, voted and ranked by the selection package (deliberate.selection), not here.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from deliberate.core.stats import percentile, percentile_sorted  # noqa: F401  (percentile: re-exported)

Z95 = 1.959963984540054  # the 97.5 % quantile of the standard normal

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
