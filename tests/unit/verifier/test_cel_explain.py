"""A false CEL constraint says what it saw (verifier.cel_explain), evaluated by the same CEL library as the check."""

from __future__ import annotations

import cel
import pytest

from deliberate.verifier.cel_explain import explain, split_top_level

VARIABLES = {
    "plan": {"selected_ids": [1, 2, 17, 42, 5], "note": "a && b"},
    "ctx": {"excluded": [17, 42, 99], "max": 3, "budget": 5000},
}


def evaluate(source: str):
    context = cel.Context()
    for name, value in VARIABLES.items():
        context.add_variable(name, value)
    return cel.compile(source).execute(context)


@pytest.mark.parametrize(
    ("expression", "said"),
    [
        ("size(plan.selected_ids) <= ctx.max", "size(plan.selected_ids) = 5, ctx.max = 3"),
        ("size(plan.selected_ids) >= 6", "size(plan.selected_ids) = 5"),  # a literal side is not repeated
        ("plan.selected_ids.all(i, !(i in ctx.excluded))", "`!(i in ctx.excluded)` fails for 17, 42"),
        ("plan.selected_ids.exists(i, i == 7)", "no element of plan.selected_ids passes `i == 7`"),
        (
            "(size(plan.selected_ids) <= 5) && plan.selected_ids.all(i, i < 10) && ctx.budget > 1",
            "`i < 10` fails for 17, 42",  # only the false conjunct
        ),
        ("plan.note == 'x && y'", 'plan.note = "a && b"'),  # a separator inside quotes is text
        ("plan.selected_ids[0] == 2 || ctx.max == 4", ""),  # alternatives: nothing to single out
        ("size(plan.selected_ids) > 9 && plan.missing == 1", "size(plan.selected_ids) = 5"),  # a raising part: skipped
    ],
)
def test_the_explanation_names_the_values_the_false_part_saw(expression, said):
    assert evaluate(expression) is not True
    assert explain(expression, evaluate) == said


def test_separators_inside_brackets_and_two_character_relations_stay_whole():
    assert split_top_level("a.all(x, x > 1 && x < 3) && b >= 2", "&&") == ["a.all(x, x > 1 && x < 3)", "b >= 2"]
    assert split_top_level("b >= 2", ">=") == ["b", "2"]
    assert split_top_level("b >= 2", ">") == ["b >= 2"]
