"""Percentiles, shared by `deliberate traces` (cli/trace_analysis.py) and the evaluation lab (deliberate-bench,
bench/deliberate_bench/eval/stats.py): one definition, numpy's default interpolation, no numpy."""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile_sorted(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default) on already sorted values; q in [0, 1]."""
    if not values:
        raise ValueError("no values")
    position = q * (len(values) - 1)
    low = math.floor(position)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (position - low)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-quantile (q in [0, 1]) of `values`, None when there are none."""
    return percentile_sorted(sorted(values), q) if values else None


def clamp(value: float, lower: float = 0.0, upper: float = 1.0) -> float:
    """`value` limited to [lower, upper] (by default a share, [0, 1])."""
    return min(upper, max(lower, value))
