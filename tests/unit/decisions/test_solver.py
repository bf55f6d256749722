"""`decisions.solver.best_rows`, the exact selection engine: checked against brute force on random tables, and clear
errors for calls that are not a selection problem."""

from __future__ import annotations

import random
from itertools import combinations

import pytest

from deliberate.decisions.solver import NoSelection, SelectionError, best_rows


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


def brute_force_rules(rows, objective, rules):
    """The best total by exhaustive search under every rule kind (None when nothing fits): the check written apart
    from the solver's formulation."""
    sense, field = objective
    low, high = rules["count"]
    best = None
    for size in range(low, min(high, len(rows)) + 1):
        for chosen in combinations(range(len(rows)), size):
            picked = [rows[i] for i in chosen]
            if any(sum(r[f] for r in picked) > v for f, v in rules["at_most"].items()):
                continue
            if any(sum(r[f] for r in picked) < v for f, v in rules["at_least"].items()):
                continue
            if any(sum(r[f] == g for r in picked) > k for f, k in rules["most_per"].items() for g in "abc"):
                continue
            if any(
                sum(r[f] == g for r in picked) < k for f, want in rules["least_of"].items() for g, k in want.items()
            ):
                continue
            ids = {r["id"] for r in picked}
            if not set(rules["include"]) <= ids or ids & set(rules["exclude"]):
                continue
            total = len(picked) if field is None else sum(r[field] for r in picked)
            if best is None or (total < best if sense == "minimize" else total > best):
                best = total
    return best


@pytest.mark.parametrize("seed", range(60))
def test_every_rule_kind_a_business_states_matches_exhaustive_search(seed):
    rng = random.Random(1000 + seed)
    rows = [
        {"id": 100 + i, "value": round(rng.uniform(0, 5), 3), "cost": rng.randint(1, 9), "group": rng.choice("abc")}
        for i in range(rng.randint(4, 9))
    ]
    ids = [r["id"] for r in rows]
    objective = rng.choice([("maximize", "value"), ("minimize", "cost"), ("maximize", None)])
    low = rng.choice([0, 1, 2])
    count = rng.choice([None, low, [low, low + rng.randint(0, 3)], [None, 3], [2, None]])
    rules = {
        "at_most": {"cost": rng.randint(5, 25)} if rng.random() < 0.7 else {},
        "at_least": {"value": round(rng.uniform(1, 8), 2)} if rng.random() < 0.5 else {},
        "most_per": {"group": rng.choice([1, 2])} if rng.random() < 0.5 else {},
        "least_of": {"group": {rng.choice("abc"): 1}} if rng.random() < 0.4 else {},
        "include": rng.sample(ids, 1) if rng.random() < 0.3 else [],
        "exclude": rng.sample(ids, 2) if rng.random() < 0.3 else [],
    }
    if count is None:
        rules["count"] = (0, len(rows))
    elif isinstance(count, int):
        rules["count"] = (count, count)
    else:
        rules["count"] = (count[0] or 0, len(rows) if count[1] is None else count[1])
    sense, field = objective
    call = dict(
        count=count,
        at_most=rules["at_most"],
        at_least=rules["at_least"],
        most_per=rules["most_per"],
        least_of=rules["least_of"],
        include={"id": rules["include"]},
        exclude={"id": rules["exclude"]},
        **({sense: field} if field else {}),
    )
    expected = brute_force_rules(rows, objective, rules)
    if expected is None:
        with pytest.raises(NoSelection):
            best_rows(rows, **call)
        return
    chosen = best_rows(rows, **call)
    total = len(chosen) if field is None else sum(rows[i][field] for i in chosen)
    assert total == pytest.approx(expected)
    assert brute_force_rules([rows[i] for i in chosen], ("maximize", None), {**rules, "count": (0, 99)}) == len(chosen)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: best_rows([{"a": 1}], "a", minimize="a"), "give one field to optimize, not both"),
        (lambda: best_rows([{"a": 1}], "a", count=[3, 1]), "count: the range [3, 1] is empty"),
        (lambda: best_rows([{"a": 1}], "a", at_least=[1]), "at_least must be a dict of field -> value"),
        (lambda: best_rows([{"a": 1}], "a", most_per={"kind": 2}), "most_per: no row has the key 'kind'"),
        (lambda: best_rows([{"a": 1}], "a", least_of={"a": 1}), "least_of['a'] must map a value to a count"),
        (lambda: best_rows([{"a": 1}], "a", include={"a": 1}), "include['a'] must be a list of values"),
    ],
)
def test_a_rule_stated_wrongly_says_which_argument_is_wrong(call, message):
    with pytest.raises(SelectionError) as raised:
        call()
    assert message in str(raised.value)


def test_a_row_that_must_be_in_but_is_absent_or_also_excluded_has_no_selection():
    rows = [{"id": 1, "v": 1.0}, {"id": 2, "v": 2.0}]
    with pytest.raises(NoSelection, match="include: no row has id = 7"):
        best_rows(rows, "v", include={"id": [7]})
    with pytest.raises(NoSelection, match="both in include and in exclude"):
        best_rows(rows, "v", include={"id": [1]}, exclude={"id": [1]})
