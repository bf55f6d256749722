"""Selection solved exactly: the rows of a table with the best total of one field, within the rules a business states.

`best_rows(rows, maximize, count, at_most, one_per, *, minimize, at_least, most_per, least_of, include, exclude)` is
a 0-1 integer program solved with HiGHS (`scipy.optimize.milp`), x[i] = 1 when row i is chosen:

- the objective: maximize Σ row[maximize]·x, or minimize Σ row[minimize]·x, or — neither given — as many rows as fit;
- `count`: Σ x = count, or a range `[low, high]` (either end None: open);
- `at_most` / `at_least`: Σ row[field]·x ≤ / ≥ limit for each field → limit (a budget; a floor on a total);
- `one_per` (a field): at most one row per value; `most_per` ({field: k}): at most k rows per value of the field;
- `least_of` ({field: {value: k}}): at least k rows whose field is that value;
- `include` / `exclude` ({field: [values]}): rows whose field holds one of the values must be / may not be chosen.

It is the ad pack's optimum, and the exact engine a decision program may call (`best_rows` in the Verifier's
sandbox): the model writes the formulation from the request's words, the solver computes, and the rule pack checks
the printed plan as it checks any other.

HiGHS stops at a relative gap of 1e-4 unless told otherwise; the gap is 0 here, so the optimum is exact. A few
milliseconds for 100-120 rows (3-17 ms measured); `time_limit_s` bounds a hostile caller.

HiGHS 1.12 (scipy 1.17) may print `HighsMipSolverData::transformNewIntegerFeasibleSolution tmpSolver.run();` to
stdout during a solve: a leftover debug line (ERGO-Code/HiGHS#2783), not an error; the optimum is unaffected.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# HiGHS's absolute gap tolerance (1e-6) is in the objective's unit: scaled by this (a CTR of 0.0536 → 536) it lies
# far below any difference between two plans' totals of values as tables write them.
OBJECTIVE_SCALE = 10_000
# scipy's milp status codes (OptimizeResult.status)
OPTIMAL, INFEASIBLE = 0, 2


class SelectionError(ValueError):
    """The call cannot be solved as asked; the message names the argument and what is wrong with it."""


class NoSelection(SelectionError):
    """No choice of rows satisfies the limits."""


@dataclass(frozen=True)
class Problem:
    """A call of `best_rows` as linear rows over x: the objective, the constraints and each row's bounds."""

    objective: list[float]  # minimized (a maximized field enters negated)
    constraints: list[tuple[list[float], float, float]]  # (coefficients, lower, upper)
    lower: list[float]  # per row: 1 when it must be chosen
    upper: list[float]  # per row: 0 when it may not be


def best_rows(
    rows: Sequence[Mapping],
    maximize: str | None = None,
    count: int | Sequence[int | None] | None = None,
    at_most: Mapping[str, float] | None = None,
    one_per: str | None = None,
    time_limit_s: float = 1.0,
    *,
    minimize: str | None = None,
    at_least: Mapping[str, float] | None = None,
    most_per: Mapping[str, int] | None = None,
    least_of: Mapping[str, Mapping[object, int]] | None = None,
    include: Mapping[str, Sequence] | None = None,
    exclude: Mapping[str, Sequence] | None = None,
) -> list[int]:
    """The positions (in `rows`, ascending) of the best choice of rows within the rules (the module's docstring).
    Raises NoSelection when no choice satisfies them, SelectionError for a call that is not a selection problem."""
    if maximize is not None and minimize is not None:
        raise SelectionError("maximize and minimize: give one field to optimize, not both")
    for position, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise SelectionError(f"rows[{position}] is a {type(row).__name__}, not a dict")
    low, high = count_range(count)
    sums = [
        (column(rows, f, "at_most"), -math.inf, number(v, f"at_most[{f!r}]")) for f, v in mapping(at_most, "at_most")
    ]
    sums += [
        (column(rows, f, "at_least"), number(v, f"at_least[{f!r}]"), math.inf) for f, v in mapping(at_least, "at_least")
    ]
    per_value = {**({one_per: 1} if one_per is not None else {}), **dict(mapping(most_per, "most_per"))}
    argument = {field: "one_per" if field == one_per and field not in (most_per or {}) else "most_per"
                for field in per_value}  # fmt: skip
    included = mapping(include, "include")
    if not rows:
        if low > 0 or any(lower > 0 or upper < 0 for _, lower, upper in sums) or included:
            raise NoSelection("no rows to choose from")
        return []
    problem = Problem(
        objective=objective(rows, maximize, minimize),
        constraints=[
            *sums,
            *([([1.0] * len(rows), float(low), float(high))] if (low, high) != (0, math.inf) else []),
            *group_limits(rows, per_value, argument),
            *group_floors(rows, mapping(least_of, "least_of")),
        ],
        lower=fixed(rows, included, "include", 1.0, 0.0),
        upper=fixed(rows, mapping(exclude, "exclude"), "exclude", 0.0, 1.0),
    )
    if any(lower > upper for lower, upper in zip(problem.lower, problem.upper, strict=True)):
        raise NoSelection("a row is both in include and in exclude")
    chosen = solve(problem, time_limit_s)
    for coefficients, lower, upper in sums:  # HiGHS's feasibility tolerance is not the rule's
        total = sum(coefficients[i] for i in chosen)
        if total > upper or total < lower:
            raise NoSelection("no choice of rows fits the limits exactly")
    return chosen


def mapping(value: object, argument: str) -> list[tuple]:
    """A dict argument's items; SelectionError naming the argument for anything else."""
    if value is None:
        return []
    if not isinstance(value, Mapping):
        raise SelectionError(f"{argument} must be a dict of field -> value, not {value!r}")
    return list(value.items())


def count_range(count: object) -> tuple[int, float]:
    """`count` as (low, high): exact for a whole number, a range for [low, high], (0, inf) for None."""
    if count is None:
        return 0, math.inf
    if isinstance(count, list | tuple) and len(count) == 2:
        low, high = (whole(end, "count") if end is not None else None for end in count)
        if low is not None and high is not None and low > high:
            raise SelectionError(f"count: the range {list(count)!r} is empty")
        return (low or 0), (math.inf if high is None else high)
    exact = whole(count, "count")
    return exact, exact


def whole(value: object, argument: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise SelectionError(f"{argument} must be a whole number of rows (or [low, high]), not {value!r}")
    return value


def objective(rows: Sequence[Mapping], maximize: str | None, minimize: str | None) -> list[float]:
    if maximize is not None:
        return [-v * OBJECTIVE_SCALE for v in column(rows, maximize, "maximize")]
    if minimize is not None:
        return [v * OBJECTIVE_SCALE for v in column(rows, minimize, "minimize")]
    return [-1.0] * len(rows)  # as many rows as fit


def group_limits(rows: Sequence[Mapping], per_value: Mapping[str, object], argument: Mapping[str, str]) -> list:
    """At most k rows per value of each field (`one_per`: k = 1)."""
    found = []
    for field, k in per_value.items():
        name = argument[field]
        limit = whole(k, f"{name}[{field!r}]") if name == "most_per" else 1
        values = [row.get(field) for row in rows]
        if all(value is None for value in values):
            raise SelectionError(f"{name}: no row has the key {field!r}")
        for value in sorted({v for v in values if v is not None}, key=repr):
            found.append(([float(v == value) for v in values], -math.inf, float(limit)))
    return found


def group_floors(rows: Sequence[Mapping], least_of: list[tuple]) -> list:
    """At least k rows whose field is the value."""
    found = []
    for field, wanted in least_of:
        if not isinstance(wanted, Mapping):
            raise SelectionError(f"least_of[{field!r}] must map a value to a count, e.g. {{'Sports': 1}}")
        for value, k in wanted.items():
            found.append(([float(row.get(field) == value) for row in rows], float(whole(k, "least_of")), math.inf))
    return found


def fixed(rows: Sequence[Mapping], chosen_by: list[tuple], argument: str, hit: float, miss: float) -> list[float]:
    """Per row, `hit` where its field holds one of the listed values (include: must be chosen; exclude: may not)."""
    bounds = [miss] * len(rows)
    for field, values in chosen_by:
        if not isinstance(values, list | tuple | set):
            raise SelectionError(f"{argument}[{field!r}] must be a list of values, not {values!r}")
        matched = {v for v in values if any(row.get(field) == v for row in rows)}
        if argument == "include" and (absent := [v for v in values if v not in matched]):
            raise NoSelection(f"include: no row has {field} = {absent[0]!r}")
        for i, row in enumerate(rows):
            if row.get(field) in values:
                bounds[i] = hit
    return bounds


def solve(problem: Problem, time_limit_s: float) -> list[int]:
    import numpy as np  # imported on first use: scipy costs ~0.2 s to import, and only a solve needs it
    from scipy.optimize import Bounds, LinearConstraint, milp

    constraints = []
    if problem.constraints:
        matrix = np.vstack([np.array(coefficients, dtype=float) for coefficients, _, _ in problem.constraints])
        lower = [lower for _, lower, _ in problem.constraints]
        upper = [upper for _, _, upper in problem.constraints]
        constraints = [LinearConstraint(matrix, lower, upper)]
    result = milp(
        c=np.array(problem.objective, dtype=float),  # milp minimizes
        constraints=constraints,
        integrality=np.ones(len(problem.objective)),
        bounds=Bounds(problem.lower, problem.upper),
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
