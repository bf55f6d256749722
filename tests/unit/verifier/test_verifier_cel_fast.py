"""cel_fast against the CEL library: wherever the fast path gives a result it is the library's, on generated
expressions and values; the ad-selection constraints take the fast path; verdicts through the rules are the
library's."""

from __future__ import annotations

import json
import random

import cel
import pytest

from deliberate.verifier.cel_cost import answer_sizes, largest_list, longest_string
from deliberate.verifier.cel_fast import compile_fast, evaluate, plain
from deliberate.verifier.constraints import ConstraintSpec, compile_rules
from deliberate.verifier.rules import verify
from deliberate_client.examples import ads

SCALARS = [0, 1, 5, -3, 2**62, 2**63 - 1, 2**63, 2**70, 1.0, 2.5, float("nan"), "", "a", "b", "é", True, False, None]


def random_value(rng: random.Random, depth: int = 0) -> object:
    roll = rng.random()
    if depth > 3 or roll < 0.45:
        return rng.choice(SCALARS)
    if roll < 0.75:
        kind = rng.choice([int, str, "mixed"])
        pool = {int: [0, 1, 5, -3, 7], str: ["a", "b", "c"], "mixed": SCALARS}[kind]
        length = rng.randrange(5)
        return [rng.choice(pool) if rng.random() < 0.8 else random_value(rng, depth + 1) for _ in range(length)]
    keys = ["x", "ids", "n", "s", "m"]
    return {rng.choice(keys): random_value(rng, depth + 1) for _ in range(rng.randrange(4))}


def random_expression(rng: random.Random, depth: int = 0) -> str:
    atoms = [
        "plan.ids", "plan.n", "plan.s", "plan.x", "plan.m.n", "ctx.pool", "ctx.budget", "ctx.names", "text",
        "1", "5", "0", "'a'", '"b"', "true", "false", "null", "[1, 5, 7]", "['a', 'b']", "size(text)",
        "answer.ids", "nope", "plan",
    ]  # fmt: skip
    if depth > 2 or rng.random() < 0.3:
        atom = rng.choice(atoms)
        return f"size({atom})" if rng.random() < 0.15 else f"{atom}.size()" if rng.random() < 0.1 else atom
    form = rng.randrange(7)
    a, b = random_expression(rng, depth + 1), random_expression(rng, depth + 1)
    if form == 0:
        return f"{a} {rng.choice(['==', '!=', '<', '<=', '>', '>='])} {b}"
    if form == 1:
        return f"{a} in {b}"
    if form == 2:
        return f"({a}) {rng.choice(['&&', '||'])} ({b})"
    if form == 3:
        return f"!({a})"
    if form == 4:
        body = rng.choice(["i in ctx.pool", "i > 0", "i == 'a'", "size(i) > 0", "i", f"i in {b}"])
        return f"{a}.{rng.choice(['all', 'exists'])}(i, {body})"
    if form == 5:
        return f"{a} + {b}"  # outside the subset
    return f"({a})"


def typed_bool(rng: random.Random, depth: int = 0, loop: str = "") -> str:
    """A mostly well-typed bool expression (`loop`: the name a comprehension bound to an int)."""
    ints = ["plan.n", "size(plan.ids)", "plan.ids.size()", "size(text)", "plan.m.n", "1", "5", "0", "ctx.budget"]
    ints += [loop] if loop else []
    strings = ["plan.s", "'a'", "text", "'é'"]
    lists = ["plan.ids", "ctx.pool", "[1, 5]", "[]"]
    form = rng.randrange(4 if depth > 2 else 9)
    if form == 0:
        return f"{rng.choice(ints)} {rng.choice(['==', '!=', '<', '<=', '>', '>='])} {rng.choice(ints)}"
    if form == 1:
        return f"{rng.choice(strings)} {rng.choice(['==', '!=', '<', '>='])} {rng.choice(strings)}"
    if form == 2:
        return f"{rng.choice(ints)} in {rng.choice(lists)}"
    if form == 3:
        return rng.choice(["plan.x", "true", "false", "'a' in ctx.names", "plan.s in ctx.names"])
    if form == 4:
        return f"!({typed_bool(rng, depth + 1, loop)})"
    if form in (5, 6):
        return f"({typed_bool(rng, depth + 1, loop)}) {rng.choice(['&&', '||'])} ({typed_bool(rng, depth + 1, loop)})"
    name = rng.choice(["i", "j"])
    return f"{rng.choice(lists)}.{rng.choice(['all', 'exists'])}({name}, {typed_bool(rng, depth + 1, name)})"


def library(expression: str, variables: dict) -> tuple[str, object]:
    context = cel.Context()
    for name, value in variables.items():
        context.add_variable(name, value)
    try:
        return "value", cel.compile(expression).execute(context)
    except Exception as error:
        return "error", type(error).__name__


def test_fast_results_are_the_librarys_on_generated_expressions_and_values():
    rng = random.Random(13)
    decided = compared = 0
    for _ in range(6000):
        expression = random_expression(rng) if rng.random() < 0.4 else typed_bool(rng)
        try:
            cel.compile(expression)
        except ValueError:
            continue  # only expressions the library compiled reach the fast path
        typed = {
            "ids": [rng.choice([0, 1, 5, 7, 9]) for _ in range(rng.randrange(5))],
            "n": rng.choice([0, 1, 5, -3]),
            "s": rng.choice(["a", "b", ""]),
            "x": rng.choice([True, False]),
            "m": {"n": rng.choice([1, 5])},
        }
        plan = {key: typed[key] if rng.random() < 0.8 else random_value(rng) for key in typed if rng.random() < 0.9}
        ctx = {"pool": [1, 5, 7, 9], "budget": rng.choice([5, 5.5, -1]), "names": ["a", "b"]}
        variables = {"ctx": ctx, "text": rng.choice(["", "abc", "é"]), "plan": plan, "answer": plan}
        evaluator = compile_fast(expression)
        if evaluator is None or not plain(plan):
            continue
        compared += 1
        fast = evaluate(evaluator, variables)
        if fast is None:
            continue
        decided += 1
        assert library(expression, variables) == ("value", fast), expression
    assert compared > 3000 and decided > 1500, (compared, decided)  # the generator reaches both paths


@pytest.mark.parametrize(
    "expression",
    [
        "x + 1 > 2",
        "plan.ids.map(i, i * 2).size() == 2",
        "has(plan.ids)",
        "plan.ids[0] == 1",
        "1.5 > 1",
        "plan.ids.exists_one(i, i == 1)",
        "r'a' == 'a'",
        "5u == 5u",
    ],
)
def test_expressions_outside_the_subset_are_left_to_the_library(expression):
    assert compile_fast(expression) is None


@pytest.mark.parametrize(
    ("value", "is_plain"),
    [
        ({"ids": [1, 2], "s": "x", "f": 0.5, "n": None, "b": True}, True),
        ({"ids": [2**63]}, False),  # the library reads it as a double
        ({"ids": [-(2**63) - 1]}, False),
        ({1: "non-string key"}, False),
        ({"t": (1, 2)}, False),
    ],
)
def test_only_plain_json_is_evaluated_fast(value, is_plain):
    assert plain(value) is is_plain


def test_the_ad_selection_constraints_take_the_fast_path():
    variables = {"ctx": ads.context(), "text": "", "plan": {"selected_ids": [1, 2, 3, 4, 5]}}
    variables["answer"] = variables["plan"]
    for constraint in ads.CONSTRAINTS:
        if "celExpression" in constraint:
            assert evaluate(compile_fast(constraint["celExpression"]), variables) is True
    variables["plan"] = {"selected_ids": [1, 2, 3, 4, 999]}
    assert evaluate(compile_fast("plan.selected_ids.all(i, i in ctx.pool)"), variables) is False


def test_verdicts_with_cel_errors_keep_the_librarys_messages():
    specs = [
        ConstraintSpec(0, "cel_expression", "plan.missing == 1", "missing"),
        ConstraintSpec(1, "cel_expression", "plan.selected_ids.all(i, i in ctx.pool)", "pool"),
    ]
    rules = compile_rules("", specs, ads.context())
    draft = json.dumps({"selected_ids": [1, 2]})
    verdict = verify(draft, rules.rules, "stop", rules.output_schema, ads.context())
    failed = next(o for o in verdict.outcomes if o.rule_id == "missing")
    assert not failed.passed
    assert failed.message.startswith("missing failed: ") and "missing" in failed.message[len("missing failed: ") :]
    assert [o.rule_id for o in verdict.outcomes][-1] == "missing"  # hard: fast-fail before "pool"
    big = json.dumps({"selected_ids": [2**64]})
    verdict = verify(big, rules.rules, "stop", rules.output_schema, ads.context())
    assert not verdict.valid


def test_one_walk_finds_what_the_three_bounded_walks_find():
    rng = random.Random(5)
    values = [random_value(rng) for _ in range(2000)]
    values += [list(range(20_000)), {"a": ["s" * i for i in range(6_000)]}, [[["x"] * 5_000] * 3], {"k": [2**64]}]
    for value in values:
        for budget in (10_000, 50, 5):
            expected = (largest_list(value, budget), longest_string(value, budget), plain(value, budget))
            assert answer_sizes(value, budget) == expected, (value, budget)
