"""Selection solved exactly: the rows of a table with the highest total of one field, within sums and counts.

`best_rows(rows, maximize, count, at_most, one_per)` is a 0-1 integer program solved with HiGHS
(`scipy.optimize.milp`): maximize Σ row[maximize]·x subject to Σ row[field]·x ≤ limit for each `at_most` entry,
Σ x = count (when given) and Σ x ≤ 1 over each value of `one_per`. It is the ad pack's optimum, and the exact engine
a decision program may call (`best_rows` in the Verifier's sandbox): the model writes the formulation from the
request's words, the solver computes, and the rule pack checks the printed plan as it checks any other.

HiGHS stops at a relative gap of 1e-4 unless told otherwise; the gap is 0 here, so the optimum is exact. A few
milliseconds for 100-120 rows (3-17 ms measured); `time_limit_s` bounds a hostile caller.

HiGHS 1.12 (scipy 1.17) may print `HighsMipSolverData::transformNewIntegerFeasibleSolution tmpSolver.run();` to
stdout during a solve: a leftover debug line (ERGO-Code/HiGHS#2783), not an error; the optimum is unaffected.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

# HiGHS's absolute gap tolerance (1e-6) is in the objective's unit: scaled by this (a CTR of 0.0536 → 536) it lies
# far below any difference between two plans' totals of values as tables write them.
OBJECTIVE_SCALE = 10_000
# scipy's milp status codes (OptimizeResult.status)
OPTIMAL, INFEASIBLE = 0, 2


class SelectionError(ValueError):
    """The call cannot be solved as asked; the message names the argument and what is wrong with it."""


class NoSelection(SelectionError):
    """No choice of rows satisfies the limits."""


def best_rows(
    rows: Sequence[Mapping],
    maximize: str,
    count: int | None = None,
    at_most: Mapping[str, float] | None = None,
    one_per: str | None = None,
    time_limit_s: float = 1.0,
) -> list[int]:
    """The positions (in `rows`, ascending) of the rows of highest total `maximize` within the limits. Raises
    NoSelection when no choice satisfies them, SelectionError for a call that is not a selection problem."""
    at_most = dict(at_most or {})
    values = column(rows, maximize, "maximize")
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 0):
        raise SelectionError(f"count must be a whole number of rows, not {count!r}")
    limits = {
        field: (column(rows, field, "at_most"), number(limit, f"at_most[{field!r}]"))
        for field, limit in at_most.items()
    }
    groups = [row.get(one_per) for row in rows] if one_per is not None else None
    if one_per is not None and all(group is None for group in groups):
        raise SelectionError(f"one_per: no row has the key {one_per!r}")
    if not rows:
        if count not in (None, 0) or any(limit < 0 for _, limit in limits.values()):
            raise NoSelection("no rows to choose from")
        return []
    chosen = solve(values, count, list(limits.values()), groups, time_limit_s)
    for column_values, limit in limits.values():  # HiGHS's feasibility tolerance is not the rule's
        if sum(column_values[i] for i in chosen) > limit:
            raise NoSelection("no choice of rows fits the limits exactly")
    return chosen


def solve(values, count, limits, groups, time_limit_s) -> list[int]:
    import numpy as np  # imported on first use: scipy costs ~0.2 s to import, and only a solve needs it
    from scipy.optimize import Bounds, LinearConstraint, milp

    size = len(values)
    matrix, lower, upper = [], [], []
    for column_values, limit in limits:
        matrix.append(np.array(column_values, dtype=float))
        lower.append(-np.inf)
        upper.append(limit)
    if count is not None:
        matrix.append(np.ones(size))
        lower.append(count)
        upper.append(count)
    if groups is not None:
        for group in sorted({g for g in groups if g is not None}, key=repr):
            matrix.append(np.array([float(g == group) for g in groups]))
            lower.append(-np.inf)
            upper.append(1)
    constraints = [LinearConstraint(np.vstack(matrix), lower, upper)] if matrix else []
    result = milp(
        c=-np.array(values, dtype=float) * OBJECTIVE_SCALE,  # milp minimizes
        constraints=constraints,
        integrality=np.ones(size),
        bounds=Bounds(0, 1),
        options={"mip_rel_gap": 0, "time_limit": time_limit_s},
    )
    if result.status == INFEASIBLE:
        raise NoSelection("no choice of rows satisfies the count and the limits")
    if result.status != OPTIMAL:
        raise SelectionError(f"the solver stopped without an optimum: {result.message}")
    return [i for i, x in enumerate(result.x) if x > 0.5]


def column(rows: Sequence[Mapping], field: str, argument: str) -> list[float]:
    if not isinstance(field, str):
        raise SelectionError(f"{argument}: a field name is a text, not {field!r}")
    values = []
    for position, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise SelectionError(f"rows[{position}] is a {type(row).__name__}, not a dict")
        if field not in row:
            raise SelectionError(
                f"{argument}: rows[{position}] has no key {field!r} (it has {', '.join(map(str, row))})"
            )
        values.append(number(row[field], f"rows[{position}][{field!r}]"))
    return values


def number(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise SelectionError(f"{where} is {value!r}, not a number")
    return float(value)
