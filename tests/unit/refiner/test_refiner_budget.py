"""Token budgets: the score table, its config syntax, and the deadline cap with its floor."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deliberate.refiner.budget import Budget, BudgetTable, token_budget


def test_default_table():
    table = BudgetTable()
    scores = (1.0, 0.95, 0.9, 0.89, 0.8, 0.79, 0.0, -1.0)
    assert [table.tokens_for(s) for s in scores] == [512, 512, 512, 384, 384, 256, 256, 256]


def test_rows_are_sorted_whatever_order_they_come_in():
    table = BudgetTable(rows=((0.5, 100), (0.9, 300), (0.7, 200)), default=50)
    assert table.rows == ((0.9, 300), (0.7, 200), (0.5, 100))
    assert [table.tokens_for(s) for s in (0.95, 0.8, 0.6, 0.4)] == [300, 200, 100, 50]
    assert BudgetTable(rows=(), default=64).tokens_for(0.99) == 64


@given(st.floats(allow_nan=False))
def test_the_budget_never_falls_as_the_score_rises(score):
    table = BudgetTable()
    assert table.tokens_for(score) <= table.tokens_for(score + 0.05)


@pytest.mark.parametrize(
    "rows, default",
    [(((0.9, 0),), 256), (((math.nan, 10),), 256), (((0.9, 10), (0.9, 20)), 256), ((), 0)],
)
def test_bad_tables_are_refused(rows, default):
    with pytest.raises(ValueError):
        BudgetTable(rows=rows, default=default)


def test_parse():
    assert BudgetTable.parse("0.9:512,0.8:384,default:256") == BudgetTable()
    assert BudgetTable.parse(" 0.8 : 384 , 0.9:512 ") == BudgetTable()
    assert BudgetTable.parse("default:100") == BudgetTable(rows=(), default=100)
    assert BudgetTable.parse("DEFAULT:100, 0.5:200").tokens_for(0.6) == 200


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "budget entry '': expected 'threshold:tokens'"),
        ("0.9:512,,default:256", "budget entry '': expected"),
        ("0.9", "budget entry '0.9': expected"),
        ("0.9:", "budget entry '0.9:': expected"),
        ("high:512", "threshold 'high' is not a number"),
        ("0.9:many", "tokens 'many' is not a whole number"),
        ("0.9:1.5", "tokens '1.5' is not a whole number"),
        ("0.9:0", "budget entry '0.9:0': tokens must be at least 1"),
        ("default:-3", "budget entry 'default:-3': tokens must be at least 1"),
        ("inf:10", "threshold must be finite"),
        ("0.9:10,0.90:20", "budget entry '0.90:20': threshold 0.90 given twice"),
        ("default:1,default:2", "budget entry 'default:2': default given twice"),
    ],
)
def test_parse_errors_name_the_bad_part(text, message):
    with pytest.raises(ValueError) as error:
        BudgetTable.parse(text)
    assert message in str(error.value)


def test_without_a_deadline_or_speed_the_table_decides():
    table = BudgetTable()
    assert token_budget(0.92, table, None, 24.0) == Budget(512, "score 0.92 → 512 tokens")
    assert token_budget(0.92, table, 3.1, None).tokens == 512
    assert token_budget(0.1, table, None, None).tokens == 256


def test_the_deadline_caps_the_budget():
    budget = token_budget(0.92, BudgetTable(), 3.1, 24.0)
    assert budget.tokens == 62  # floor((3.1 - 0.5) * 24)
    assert budget.reason == "score 0.92 → 512 tokens; deadline leaves 3.1 s at 24 tok/s → 62 tokens"


def test_a_generous_deadline_leaves_the_table_value():
    budget = token_budget(0.85, BudgetTable(), 60.0, 40.0)
    assert budget.tokens == 384
    assert budget.reason == "score 0.85 → 384 tokens; deadline leaves 60 s at 40 tok/s, which fits"
    assert token_budget(0.85, BudgetTable(), math.inf, 40.0).tokens == 384


def test_a_late_request_still_gets_the_floor():
    budget = token_budget(0.92, BudgetTable(), 0.6, 24.0)
    assert budget.tokens == 16
    assert budget.reason.endswith("→ 2 tokens, raised to the floor of 16")
    assert token_budget(0.92, BudgetTable(), -5.0, 24.0).reason.endswith("→ 0 tokens, raised to the floor of 16")
    assert token_budget(0.92, BudgetTable(), -math.inf, 24.0).tokens == 16
    assert token_budget(0.92, BudgetTable(), 10.0, 0.0).tokens == 16
    assert token_budget(0.92, BudgetTable(), 1.0, 24.0, reserve_s=1.0, floor=4).tokens == 4


def test_the_floor_never_lifts_above_the_table():
    budget = token_budget(0.5, BudgetTable(rows=(), default=8), 0.0, 24.0)
    assert budget.tokens == 8
    assert budget.reason.endswith("raised to the table's 8")


def test_no_number_from_deadline_and_speed_leaves_the_table_value():
    assert token_budget(0.92, BudgetTable(), math.inf, 0.0).tokens == 512


def test_a_negative_floor_is_refused():
    with pytest.raises(ValueError):
        token_budget(0.9, BudgetTable(), 1.0, 10.0, floor=-1)


@given(
    st.floats(-1, 2),
    st.one_of(st.none(), st.floats(-10, 1e6)),
    st.one_of(st.none(), st.floats(0, 1e4)),
    st.floats(0, 5),
    st.integers(0, 600),
)
def test_the_budget_stays_between_floor_and_table(score, remaining_s, tokens_per_second, reserve_s, floor):
    table = BudgetTable()
    wanted = table.tokens_for(score)
    budget = token_budget(score, table, remaining_s, tokens_per_second, reserve_s, floor)
    assert min(floor, wanted) <= budget.tokens <= wanted
    assert budget.reason.startswith(f"score {score:.2f} → {wanted} tokens")
    if remaining_s is not None and tokens_per_second is not None:
        fits = (remaining_s - reserve_s) * tokens_per_second
        assert budget.tokens == min(wanted, max(floor, math.floor(fits)))
