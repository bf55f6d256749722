"""`core.solver.best_rows`, the exact selection engine: checked against brute force on random tables, and clear
errors for calls that are not a selection problem."""

from __future__ import annotations

import random
from itertools import combinations

import pytest

from deliberate.core.solver import NoSelection, SelectionError, best_rows


def brute_force(rows, maximize, count, at_most, one_per):
    best = None
    sizes = [count] if count is not None else range(len(rows) + 1)
    for size in sizes:
        for chosen in combinations(range(len(rows)), size):
            if any(sum(rows[i][f] for i in chosen) > limit for f, limit in at_most.items()):
                continue
            if one_per and len({rows[i][one_per] for i in chosen}) < len(chosen):
                continue
            total = sum(rows[i][maximize] for i in chosen)
            best = total if best is None else max(best, total)
    return best


@pytest.mark.parametrize("seed", range(40))
def test_best_rows_finds_the_brute_force_optimum(seed):
    rng = random.Random(seed)
    rows = [
        {
            "value": round(rng.uniform(0, 5), 3),
            "cost": rng.randint(1, 9),
            "weight": rng.randint(1, 9),
            "group": rng.choice("abc"),
        }
        for _ in range(rng.randint(3, 10))
    ]
    count = rng.choice([None, 1, 2, 3])
    at_most = {"cost": rng.randint(3, 20), **({"weight": rng.randint(3, 20)} if rng.random() < 0.5 else {})}
    one_per = rng.choice([None, "group"])
    expected = brute_force(rows, "value", count, at_most, one_per)
    if expected is None:
        with pytest.raises(NoSelection):
            best_rows(rows, "value", count, at_most, one_per)
        return
    chosen = best_rows(rows, "value", count, at_most, one_per)
    assert chosen == sorted(set(chosen))
    assert sum(rows[i]["value"] for i in chosen) == pytest.approx(expected)
    assert all(sum(rows[i][f] for i in chosen) <= limit for f, limit in at_most.items())


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: best_rows([{"a": 1}], "b"), "maximize: rows[0] has no key 'b' (it has a)"),
        (lambda: best_rows([{"a": "x"}], "a"), "rows[0]['a'] is 'x', not a number"),
        (lambda: best_rows([{"a": 1}], "a", count=1.5), "count must be a whole number of rows"),
        (lambda: best_rows([{"a": 1}], "a", at_most={"a": "many"}), "at_most['a'] is 'many', not a number"),
        (lambda: best_rows([{"a": 1}], "a", one_per="kind"), "one_per: no row has the key 'kind'"),
        (lambda: best_rows([3], "a"), "rows[0] is a int, not a dict"),
    ],
)
def test_a_call_that_is_not_a_selection_problem_says_which_argument_is_wrong(call, message):
    with pytest.raises(SelectionError, match=None) as raised:
        call()
    assert message in str(raised.value)
