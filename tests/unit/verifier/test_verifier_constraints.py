"""Declared constraints: JSON Schema, CEL and rule packs compiled into one fast-fail rule list,
and the ad-selection worked example."""

from __future__ import annotations

import json

import pytest

from deliberate.core.requests import InvalidArgument
from deliberate.decisions.packs import REGISTRY, load_registry
from deliberate.verifier.cel_cost import CHARS_PER_STEP, ITEMS_PER_STEP, MAX_CEL_COST, cel_cost
from deliberate.verifier.constraints import ConstraintSpec, compile_rules
from deliberate.verifier.rules import verify
from deliberate_client.examples import ads

CATALOG = {ad.id: ad for ad in ads.load_catalog()}


def spec_from(index: int, raw: dict) -> ConstraintSpec:
    kind = next(k for k in ("jsonSchema", "celExpression", "rulePack") if k in raw)
    names = {"jsonSchema": "json_schema", "celExpression": "cel_expression", "rulePack": "rule_pack"}
    return ConstraintSpec(
        index=index,
        kind=names[kind],
        source=raw[kind],
        id=raw.get("id", ""),
        soft=raw.get("soft", False),
        params=raw.get("params", {}),
        failure_message=raw.get("failureMessage", ""),
    )


def ad_rules():
    specs = [spec_from(i, c) for i, c in enumerate(ads.CONSTRAINTS)]
    return compile_rules(json.dumps(ads.OUTPUT_SCHEMA), specs, ads.context())


def check_plan(ids: list[int]):
    rule_set = ad_rules()
    text = f'Here is my plan:\n```json\n{{"selected_ids": {json.dumps(ids)}}}\n```'
    return verify(text, rule_set.rules, "stop", rule_set.output_schema, ads.context())


def messages(verdict) -> dict[str, str]:
    return {o.rule_id: o.message for o in verdict.outcomes}


def feasible_plan() -> list[int]:
    """Cheapest ad of each of five categories: always within budget and conflict-free."""
    cheapest: dict[str, int] = {}
    for ad in sorted(CATALOG.values(), key=lambda a: a.cost):
        cheapest.setdefault(ad.category, ad.id)
    return list(cheapest.values())[:5]


def plan_costing(target: int) -> list[int] | None:
    """Five ads of distinct categories whose true total cost is exactly `target`."""
    from itertools import combinations

    by_cost = sorted(CATALOG.values(), key=lambda a: a.cost)
    for combo in combinations(by_cost[:40], 5):
        if sum(a.cost for a in combo) == target and len({a.category for a in combo}) == 5:
            return [a.id for a in combo]
    return None


def test_the_shipped_catalog_is_the_deterministic_one():
    assert [a.to_dict() for a in ads.load_catalog()] == [a.to_dict() for a in ads.generate_catalog()]
    assert len(CATALOG) == 100 and sorted(CATALOG) == list(range(1, 101))


def test_a_feasible_plan_passes_every_rule():
    verdict = check_plan(feasible_plan())
    assert verdict.valid, messages(verdict)
    assert verdict.score == 1.0
    ids = [o.rule_id for o in verdict.outcomes]
    assert ids[:3] == ["complete", "json_parse", "json_schema"], "cheapest rules first"
    assert ids.index("size_check") < ids.index("budget_check"), "CEL before rule packs"
    assert messages(verdict)["budget_check"].startswith("budget_check passed: total cost ")


def test_a_plan_costing_5023_is_rejected_with_the_true_sum():
    ids = plan_costing(5025) or plan_costing(5020)  # catalog costs are multiples of 5
    assert ids is not None
    total = sum(CATALOG[i].cost for i in ids)
    verdict = check_plan(ids)
    assert not verdict.valid
    assert messages(verdict)["budget_check"] == (
        f"budget_check failed: total cost {total:,} is {total - 5000:,} over the budget 5,000"
    )
    assert verdict.outcomes[-1].rule_id == "budget_check", "fast-fail: nothing runs after the first hard failure"


def test_budget_check_message_for_sum_5023_with_a_custom_catalog():
    catalog = [
        {"id": 1, "cost": 1000, "ctr": 0.01, "category": "a"},
        {"id": 2, "cost": 1000, "ctr": 0.01, "category": "b"},
        {"id": 3, "cost": 1000, "ctr": 0.01, "category": "c"},
        {"id": 4, "cost": 1000, "ctr": 0.01, "category": "d"},
        {"id": 5, "cost": 1023, "ctr": 0.01, "category": "e"},
    ]
    spec = ConstraintSpec(0, "rule_pack", "ad_selection", params={"catalog": catalog, "budget": 5000})
    rule_set = compile_rules("", [spec], {})
    verdict = verify('{"selected_ids": [1, 2, 3, 4, 5]}', rule_set.rules)
    assert messages(verdict)["budget_check"] == "budget_check failed: total cost 5,023 is 23 over the budget 5,000"


def test_two_ads_of_one_category_are_rejected_naming_both_ids():
    plan = feasible_plan()
    category = CATALOG[plan[0]].category
    rival = next(a.id for a in CATALOG.values() if a.category == category and a.id != plan[0])
    ids = [plan[0], rival, *plan[1:4]]
    if sum(CATALOG[i].cost for i in ids) > 5000:
        pytest.skip("catalog makes this pair too expensive")
    verdict = check_plan(ids)
    assert not verdict.valid
    first, second = (plan[0], rival)
    assert messages(verdict)["category_check"] == (
        f"category_check failed: ads {first} and {second} are both in category '{category}'"
    )


def test_cel_constraints_report_their_failure_message():
    verdict = check_plan([1, 2, 3, 4])
    assert not verdict.valid
    # the output schema (minItems 5) catches it first
    assert messages(verdict)["json_schema"] == "json_schema failed at $.selected_ids: [1, 2, 3, 4] is too short"
    rule_set = compile_rules("", [spec_from(0, ads.CONSTRAINTS[0])], {})
    verdict = verify('{"selected_ids": [1, 2]}', rule_set.rules)
    assert messages(verdict)["size_check"] == (
        "size_check failed: exactly 5 ads must be selected (size(plan.selected_ids) = 2)"
    )  # the static message, then the values the expression saw: what a re-draft can repair


def test_ids_outside_the_pool_fail_the_cel_pool_check():
    rule_set = compile_rules("", [spec_from(1, ads.CONSTRAINTS[1])], {"pool": [1, 2, 3]})
    verdict = verify('{"selected_ids": [1, 2, 99]}', rule_set.rules, context={"pool": [1, 2, 3]})
    assert messages(verdict)["pool_check"] == (
        "pool_check failed: every selected id must be in ctx.pool (`i in ctx.pool` fails for 99)"
    )


def test_cel_without_a_message_quotes_the_expression_and_errors_are_failed_rules():
    rule_set = compile_rules("", [ConstraintSpec(0, "cel_expression", "answer.total < 10")], {})
    assert messages(verify('{"total": 12}', rule_set.rules))["cel_0"] == (
        "cel_0 failed: `answer.total < 10` is false (answer.total = 12)"
    )
    missing = messages(verify('{"other": 1}', rule_set.rules))["cel_0"]
    assert missing.startswith("cel_0 failed: ") and "total" in missing
    non_bool = compile_rules("", [ConstraintSpec(0, "cel_expression", "answer.total", id="t")], {})
    assert messages(verify('{"total": 3}', non_bool.rules))["t"] == "t failed: expression returned 3, not a bool"


def test_a_total_is_a_constraint_of_the_request_through_cel_sum():
    """A budget, a floor on a total, a cap on a sum: `sum(list)` (verifier.cel_rules.FUNCTIONS), and what the total
    came to when it fails."""
    context = {"ctr_of": {"1": 0.05, "2": 0.04, "3": 0.01}, "floor": 0.1}
    floor = ConstraintSpec(0, "cel_expression", "sum(plan.selected_ids.map(i, ctx.ctr_of[string(i)])) >= ctx.floor",
                           id="ctr_floor", failure_message="the total CTR must reach the floor")  # fmt: skip
    rules = compile_rules("", [floor], context).rules
    assert verify('{"selected_ids": [1, 2, 3]}', rules, context=context).valid
    failed = messages(verify('{"selected_ids": [2, 3]}', rules, context=context))["ctr_floor"]
    assert failed.startswith("ctr_floor failed: the total CTR must reach the floor (sum(plan.selected_ids.map(")
    assert "= 0.05" in failed and "ctx.floor = 0.1" in failed
    empty = ConstraintSpec(0, "cel_expression", "sum([]) == 0", id="empty")
    assert messages(verify('{"selected_ids": [1]}', compile_rules("", [empty], {}).rules))["empty"] == "empty passed"
    texts = ConstraintSpec(0, "cel_expression", "sum(['a']) > 0", id="texts")
    said = messages(verify('{"selected_ids": [1]}', compile_rules("", [texts], {}).rules))["texts"]
    assert "sum() takes a list of numbers only" in said


def test_a_payment_cap_is_a_constraint_of_the_request_through_cel_monthly_payment():
    """An instalment cap that standard CEL (no powers) cannot state: `monthly_payment(amount, annual_rate, months)`;
    10,000 at 5.9 % over 36 months is 303.77 a month."""
    cap = ConstraintSpec(0, "cel_expression",
                         "plan.offers.all(o, monthly_payment(double(o.amount), o.annual_rate, o.term_months) <= 304.0)",
                         id="payment_cap", failure_message="the monthly payment is at most 304")  # fmt: skip
    rules = compile_rules("", [cap], {}).rules
    within = '{"offers": [{"amount": 10000, "annual_rate": 0.059, "term_months": 36}]}'
    assert verify(within, rules).valid
    over = '{"offers": [{"amount": 10000, "annual_rate": 0.059, "term_months": 24}]}'
    assert messages(verify(over, rules))["payment_cap"].startswith("payment_cap failed: the monthly payment is at most")
    free = ConstraintSpec(0, "cel_expression", "monthly_payment(1200.0, 0.0, 12) == 100.0", id="free")
    assert messages(verify('{"a": 1}', compile_rules("", [free], {}).rules))["free"] == "free passed"
    wrong = ConstraintSpec(0, "cel_expression", "monthly_payment(1200.0, 0.05, 0) > 0.0", id="wrong")
    assert "months must be positive" in messages(verify('{"a": 1}', compile_rules("", [wrong], {}).rules))["wrong"]


def test_a_sum_counts_as_a_loop_in_the_cost_estimate():
    assert cel_cost("sum(plan.ids.map(i, i)) > 0", 1000) > cel_cost("size(plan.ids) > 0", 1000) + 1000 * 999


def test_soft_constraints_lower_the_score_without_invalidating():
    soft = ConstraintSpec(0, "cel_expression", "answer.total < 10", id="cheap", soft=True)
    verdict = verify('{"total": 12}', compile_rules("", [soft], {}).rules)
    assert verdict.valid and 0 < verdict.score < 1


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (ConstraintSpec(2, "cel_expression", "size(plan.selected_ids) =="), "constraints[2].cel_expression"),
        (ConstraintSpec(1, "json_schema", '{"type": "nope"}'), "constraints[1].json_schema"),
        (ConstraintSpec(0, "rule_pack", "no_such_pack"), "constraints[0].rule_pack"),
        (ConstraintSpec(0, "rule_pack", "ad_selection", params={"budget": "lots"}), "constraints[0].params"),
    ],
)
def test_constraints_that_do_not_compile_name_their_field(spec, field):
    with pytest.raises(InvalidArgument) as raised:
        compile_rules("", [spec], {})
    assert raised.value.field == field
    assert str(raised.value).startswith(f"{field}: ")


def test_cel_compiler_message_is_passed_on():
    with pytest.raises(InvalidArgument, match="Syntax error"):
        compile_rules("", [ConstraintSpec(0, "cel_expression", "1 +")], {})


def test_cel_cost_estimate_grows_with_nesting_and_refuses_quadratic_blowups():
    flat = cel_cost("size(plan.ids) == 5", 100)
    nested = cel_cost("plan.ids.all(i, i in ctx.pool)", 100)
    assert flat < nested
    assert cel_cost("ctx.a.all(x, ctx.b.all(y, ctx.c.exists(z, z == x + y)))", 1000) > MAX_CEL_COST
    spec = ConstraintSpec(0, "cel_expression", "ctx.a.all(x, ctx.a.all(y, ctx.a.exists(z, z == x + y)))", id="blowup")
    context = {"a": list(range(2000))}
    verdict = verify("Final answer: 1", compile_rules("", [spec], context).rules, context=context)
    assert verdict.outcomes[-1].message.startswith("blowup failed: estimated cost ")


def test_cel_cost_counts_what_a_chain_of_concatenations_copies():
    chain = "size(" + " + ".join(["text"] * 290) + ") > 0"
    short, long = {"text": 100 // CHARS_PER_STEP}, {"text": 1_000_000 // CHARS_PER_STEP}
    assert cel_cost(chain, 0, short) < MAX_CEL_COST  # a short draft: cheap
    assert cel_cost(chain, 0, long) > MAX_CEL_COST  # the same over a 1 MB draft: refused
    assert cel_cost("size(text + text) > 0", 0, long) < MAX_CEL_COST
    spec = ConstraintSpec(0, "cel_expression", chain, id="copies")
    verdict = verify("Final answer: 1 " + "x" * 999_000, compile_rules("", [spec], {}).rules)
    assert verdict.outcomes[-1].message.startswith("copies failed: estimated cost ")


def test_cel_cost_counts_what_each_read_of_a_variable_in_a_loop_copies():
    reads_draft = "ctx.l.all(x, ctx.l.all(y, size(text) > 0))"
    items = {"ctx": 900 // ITEMS_PER_STEP}
    assert cel_cost(reads_draft, 900, items | {"text": 100 // CHARS_PER_STEP}) < MAX_CEL_COST
    assert cel_cost(reads_draft, 900, items | {"text": 1_000_000 // CHARS_PER_STEP}) > MAX_CEL_COST  # ran 133 s
    read_once = {"ctx": 5000 // ITEMS_PER_STEP, "text": 1_000_000 // CHARS_PER_STEP}
    assert cel_cost("ctx.l.all(x, x > 0)", 5000, read_once) < MAX_CEL_COST  # the list is read once


def test_constraints_that_read_only_the_text_keep_free_text_rules():
    text_only = compile_rules("", [ConstraintSpec(0, "cel_expression", "size(text) >= 20", id="long")], {})
    assert text_only.rule_ids == ["complete", "final_answer", "numeric_answer", "long", "explicit_final_line"]
    structured = compile_rules("", [ConstraintSpec(0, "cel_expression", "size(plan.ids) == 5", id="five")], {})
    assert structured.rule_ids == ["complete", "json_parse", "five"]


def test_registry_has_the_built_in_packs():
    load_registry()
    assert {"ad_selection", "arithmetic"} <= set(REGISTRY)


def test_same_draft_and_constraints_give_the_same_results():
    first = [(o.rule_id, o.passed, o.message) for o in check_plan(feasible_plan()).outcomes]
    second = [(o.rule_id, o.passed, o.message) for o in check_plan(feasible_plan()).outcomes]
    assert first == second
