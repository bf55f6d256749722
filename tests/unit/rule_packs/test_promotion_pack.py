"""The promotion pack on the worked example's product table: stock, margins, discount caps and the customer
message's compliance terms, each failure naming the sku and the figures; abstentions where the request gives
no policy to check."""

from __future__ import annotations

import json
import time

import pytest

from deliberate.core.requests import InvalidArgument
from deliberate.decisions.packs import Quality
from deliberate.rule_packs.promotion.pack import PromotionPack, PromotionParams, PromotionPlan
from deliberate.rule_packs.promotion.prompt import PROMOTION_EXAMPLE
from deliberate.verifier.constraints import ConstraintSpec, compile_rules
from deliberate.verifier.hostile_programs import as_decision_draft
from deliberate.verifier.rules import verify
from deliberate_client.examples import promotion

from .worked_examples import example_program

# Within every term of the example's policy: margins 37.8 %, 35.1 %, 30.1 % (plan 33.5 %), caps 25/40/15 %.
GOOD_ITEMS = [
    {"sku": "TEA-100", "discount_percent": 25, "quantity": 100},
    {"sku": "PRS-08", "discount_percent": 40, "quantity": 30},
    {"sku": "GRD-01", "discount_percent": 15, "quantity": 10},
]
GOOD_MESSAGE = "This week: up to 40% off French presses, plus deals on green tea and our burr grinder."


def plan(items=GOOD_ITEMS, message=GOOD_MESSAGE, **changed) -> list[dict]:
    """`items` with the fields of `changed` (sku → {field: value}) replaced."""
    return {"items": [{**item, **changed.get(item["sku"], {})} for item in items], "message": message}


def check(answer: dict, policy: dict | None = None, soft: bool = False, schema: bool = True):
    """The verdict on `answer` under the example's output schema (unless not `schema`), its product table and
    `policy` (default: the example's)."""
    spec = ConstraintSpec(0, "rule_pack", "promotion", soft=soft, params=promotion.POLICY if policy is None else policy)
    context = promotion.context()
    rule_set = compile_rules(json.dumps(promotion.output_schema()) if schema else "", [spec], context)
    return verify(json.dumps(answer), rule_set.rules, "stop", rule_set.output_schema, context)


def messages(verdict) -> dict[str, str]:
    return {o.rule_id: o.message for o in verdict.outcomes}


def test_a_plan_within_every_term_passes_with_its_true_figures():
    verdict = check(plan())
    assert verdict.valid, messages(verdict)
    assert [o.rule_id for o in verdict.outcomes] == [
        "complete", "json_parse", "json_schema", "promotion", "sku_check", "stock_check", "discount_cap_check",
        "margin_check", "plan_margin_check", "claims_check", "advertised_discount_check", "plan_total",
    ]  # fmt: skip
    found = messages(verdict)
    assert found["stock_check"] == "stock_check passed: 3 products within stock (140 units)"
    assert found["margin_check"] == "margin_check passed: every margin >= 20% (lowest GRD-01 30.1%)"
    # revenue 100·3.375 + 30·11.40 + 10·58.65 = 1266.00; cost 100·2.10 + 30·7.40 + 10·41.00 = 842.00
    assert (
        found["plan_margin_check"]
        == "plan_margin_check passed: plan margin 33.5% >= 30% (revenue 1266.00, cost 842.00)"
    )
    assert found["advertised_discount_check"] == (
        "advertised_discount_check passed: advertised 40% <= the largest discount, PRS-08 40%"
    )
    assert (
        found["plan_total"] == "plan_total passed: 3 products, 140 units, revenue 1266.00, gross profit 424.00 (33.5%)"
    )
    assert set(verdict.evidence) >= {"stock_check", "margin_check", "claims_check"}


def test_a_quantity_above_stock_fails_naming_the_sku_both_figures_and_the_excess():
    verdict = check(plan(**{"GRD-01": {"quantity": 13}}))
    assert not verdict.valid
    assert messages(verdict)["stock_check"] == (
        'stock_check failed: GRD-01: quantity 13 is 1 over the stock 12, so use {"sku": "GRD-01", "discount_percent": '
        '15, "quantity": 12}'
    )
    assert verdict.outcomes[-1].rule_id == "stock_check", "fast-fail: nothing runs after the first hard failure"


def test_a_product_out_of_stock_is_to_be_left_out():
    products = [{**p, "stock": 0} if p["sku"] == "GRD-01" else p for p in promotion.PRODUCTS]
    verdict = check(plan(**{"GRD-01": {"quantity": 2}}), {**promotion.POLICY, "products": products})
    assert messages(verdict)["stock_check"] == (
        "stock_check failed: GRD-01: quantity 2 is 2 over the stock 0, so leave GRD-01 out: it is out of stock"
    )


def test_a_margin_under_the_floor_fails_with_the_gap_the_figures_and_the_discount_that_meets_it():
    items = [*GOOD_ITEMS, {"sku": "COF-1KG", "discount_percent": 25, "quantity": 20}]
    verdict = check(plan(items))
    assert not verdict.valid
    # 16.00 − 25 % = 12.00; (12.00 − 9.80) / 12.00 = 18.3 %. The floor needs 9.80 / 0.8 = 12.25: 23.4375 % off,
    # rounded down so that the discount offered meets it.
    assert messages(verdict)["margin_check"] == (
        "margin_check failed: COF-1KG: margin 18.3% is 1.7 points under the floor 20% (price 16.00 −25% = 12.00, "
        'unit cost 9.80), so use {"sku": "COF-1KG", "discount_percent": 23.43, "quantity": 20}'
    )


def test_a_margin_no_discount_can_meet_says_so():
    # undiscounted, (16.00 − 9.80) / 16.00 = 38.75 %
    items = [{"sku": "COF-1KG", "discount_percent": 5, "quantity": 10}]
    verdict = check(plan(items, "Coffee week."), {"min_margin_percent": 40}, schema=False)
    assert messages(verdict)["margin_check"] == (
        "margin_check failed: COF-1KG: margin 35.5% is 4.5 points under the floor 40% (price 16.00 −5% = 15.20, "
        "unit cost 9.80), so leave COF-1KG out: no discount meets the floor (undiscounted, its margin is 38.8%)"
    )


def test_a_margin_just_under_the_floor_does_not_read_as_the_floor():
    # 23.45 % off: 12.248, (12.248 − 9.80) / 12.248 = 19.987 %, 0.013 points under the floor
    items = [{"sku": "COF-1KG", "discount_percent": 23.45, "quantity": 10}]
    verdict = check(plan(items, "Coffee week."), {"min_margin_percent": 20}, schema=False)
    assert "COF-1KG: margin 19.99% is less than 0.1 points under the floor 20%" in messages(verdict)["margin_check"]


def test_a_margin_exactly_at_the_floor_passes():
    # COF-1KG at 23.4375 % off: 16.00 → 12.25, (12.25 − 9.80) / 12.25 = 20 % exactly; floats would say 19.999…
    items = [*GOOD_ITEMS, {"sku": "COF-1KG", "discount_percent": 23.4375, "quantity": 10}]
    verdict = check(plan(items))
    assert messages(verdict)["margin_check"] == "margin_check passed: every margin >= 20% (lowest COF-1KG 20%)"


def test_the_plan_margin_is_revenue_weighted_over_every_promoted_unit():
    # Margins 30.1 %, 36.0 % and 60.0 % average 42.0 %, but the revenue is mostly grinders and kettles.
    items = [
        {"sku": "GRD-01", "discount_percent": 15, "quantity": 12},
        {"sku": "KET-17", "discount_percent": 15, "quantity": 35},
        {"sku": "MUG-12", "discount_percent": 0, "quantity": 1},
    ]
    verdict = check(plan(items, "Kitchen week."))
    # revenue 12·58.65 + 35·28.90 + 8.00 = 1723.30; cost 12·41 + 35·18.50 + 3.20 = 1142.70; 33.7 % ≥ 30 %
    assert verdict.valid, messages(verdict)
    stricter = {**promotion.POLICY, "min_plan_margin_percent": 35}
    verdict = check(plan(items, "Kitchen week."), stricter)
    assert messages(verdict)["plan_margin_check"] == (
        "plan_margin_check failed: plan margin 33.7% is 1.3 points under the floor 35% (revenue 1723.30, cost 1142.70)"
    )


def test_a_discount_above_its_category_cap_fails_naming_sku_category_cap_and_excess():
    verdict = check(plan(**{"GRD-01": {"discount_percent": 20}}))
    assert messages(verdict)["discount_cap_check"] == (
        'discount_cap_check failed: GRD-01: discount 20% is 5 points over the appliances cap 15%, so use {"sku": '
        '"GRD-01", "discount_percent": 15, "quantity": 10}'
    )
    verdict = check(plan(**{"GRD-01": {"discount_percent": 16}}))
    assert messages(verdict)["discount_cap_check"].startswith(
        "discount_cap_check failed: GRD-01: discount 16% is 1 point over the appliances cap 15%, so use"
    )


def test_every_offending_product_is_listed_up_to_five():
    items = [
        {"sku": sku, "discount_percent": 0, "quantity": 1000}
        for sku in ("TEA-100", "COF-1KG", "SYR-25", "MUG-12", "PRS-08", "CUP-35", "KET-17")
    ]
    verdict = check(plan(items), {}, schema=False)  # seven products: more than the schema allows
    assert messages(verdict)["stock_check"] == (
        "stock_check failed: "
        + "; ".join(
            f'{sku}: quantity 1000 is {1000 - stock} over the stock {stock}, so use {{"sku": "{sku}", '
            f'"discount_percent": 0, "quantity": {stock}}}'
            for sku, stock in (("TEA-100", 240), ("COF-1KG", 60), ("SYR-25", 90), ("MUG-12", 150), ("PRS-08", 80))
        )
        + " (+2 more)"
    )


def test_the_quality_of_a_plan_is_its_gross_margin_in_currency_without_a_bound():
    pack = PromotionPack(PromotionParams.model_validate({**promotion.context(), **promotion.POLICY}))
    quality = pack.quality(PromotionPlan.model_validate(plan()))
    # revenue 1266.00 − cost 842.00, as plan_total reports it
    assert quality == Quality("gross margin", 424.0)
    assert quality.ratio is None and quality.describe() == "gross margin 424 (no bound computed)"


@pytest.mark.parametrize(
    "message",
    [
        "The LOWEST price ever on green tea!",
        "Lowest-price   ever: French presses.",
        "Our burr grinder, the lowest\u00a0price EVER.",
    ],
)
def test_a_forbidden_claim_fails_whatever_its_case_and_punctuation(message):
    verdict = check(plan(message=message))
    assert not verdict.valid
    assert (
        messages(verdict)["claims_check"]
        == "claims_check failed: the message makes forbidden claims: 'lowest price ever'"
    )


def test_a_claim_is_matched_as_whole_words():
    verdict = check(plan(message="Flowest price everywhere is not a claim we make; no risk-freedom either."))
    assert messages(verdict)["claims_check"] == "claims_check passed: none of 4 forbidden claims in the message"


def test_a_message_advertising_more_than_the_plan_gives_fails():
    verdict = check(plan(message="Save 50 percent on coffee gear this week!"))
    assert messages(verdict)["advertised_discount_check"] == (
        "advertised_discount_check failed: the message advertises 50% but the largest discount is PRS-08 40%"
    )


def test_checks_without_their_policy_abstain_and_are_no_evidence():
    verdict = check(plan(message="Coffee week."), {})
    assert verdict.valid
    found = messages(verdict)
    assert found["discount_cap_check"] == (
        "discount_cap_check abstained: no maximum discount given for the plan's categories"
    )
    assert found["margin_check"] == "margin_check abstained: no min_margin_percent given"
    assert found["plan_margin_check"] == "plan_margin_check abstained: no min_plan_margin_percent given"
    assert found["claims_check"] == "claims_check abstained: no forbidden_claims given"
    assert found["advertised_discount_check"] == "advertised_discount_check abstained: the message states no percentage"
    assert verdict.evidence == ["sku_check", "stock_check"], "stock is always checkable: the table gives it"


def test_a_cap_for_other_categories_only_abstains():
    verdict = check(plan(), {"max_discount_percent": {"toys": 10}})
    assert messages(verdict)["discount_cap_check"] == (
        "discount_cap_check abstained: no maximum discount given for the plan's categories"
    )


def test_an_unknown_sku_fails_and_a_soft_pack_checks_the_rest():
    items = [*GOOD_ITEMS, {"sku": "TOY-99", "discount_percent": 5, "quantity": 1}]
    hard = check(plan(items))  # the output schema's enum refuses it first
    assert messages(hard)["json_schema"].startswith("json_schema failed at $.items[3].sku")
    verdict = check(plan(items, "Tea time."), soft=True, schema=False)
    found = messages(verdict)
    assert found["sku_check"] == "sku_check failed: skus not in the product table: TOY-99"
    assert found["stock_check"] == "stock_check passed: 3 products within stock (140 units)"


def test_a_plan_listing_a_sku_twice_does_not_match_the_pack():
    verdict = check(plan([*GOOD_ITEMS, GOOD_ITEMS[0]]))
    assert not verdict.valid
    assert (
        messages(verdict)["promotion"]
        == "promotion failed: items: Value error, skus listed more than once: ['TEA-100']"
    )


@pytest.mark.parametrize(
    ("params", "detail"),
    [
        ({"products": []}, "products: List should have at least 1 item"),
        ({"products": [{"sku": "A", "category": "x", "stock": -1, "unit_cost": 1, "price": 2}]}, "products.0.stock"),
        ({"min_margin_percent": "high"}, "min_margin_percent"),
        ({"forbidden_claims": ["!!!"]}, "claims without a letter or digit"),
    ],
)
def test_a_policy_that_does_not_validate_is_refused_naming_the_field(params, detail):
    spec = ConstraintSpec(2, "rule_pack", "promotion", params=params)
    with pytest.raises(InvalidArgument) as refused:
        compile_rules("", [spec], promotion.context())
    assert refused.value.field == "constraints[2].params"
    assert detail in str(refused.value)


def test_a_request_without_a_product_table_is_refused():
    spec = ConstraintSpec(0, "rule_pack", "promotion", params=promotion.POLICY)
    with pytest.raises(InvalidArgument, match=r"constraints\[0\]\.params: products: Field required"):
        compile_rules("", [spec], {})


def test_a_verification_is_fast():
    """About 1 ms of CPU per draft, all rules included; the bound catches a pathological slowdown (CPU time:
    other processes on the machine do not count)."""
    answer = json.dumps(plan())
    spec = ConstraintSpec(0, "rule_pack", "promotion", params=promotion.POLICY)
    rules = compile_rules("", [spec], promotion.context()).rules
    started = time.process_time()
    for _ in range(200):
        assert verify(answer, rules).valid
    per_draft = (time.process_time() - started) / 200
    assert per_draft < 0.020, f"{per_draft * 1000:.2f} ms of CPU per draft"


def run_example(policy: dict):
    spec = ConstraintSpec(0, "rule_pack", "promotion", params=policy)
    context = promotion.context()
    rule_set = compile_rules(json.dumps(promotion.output_schema()), [spec], context)
    draft = as_decision_draft(example_program(PROMOTION_EXAMPLE))
    verdict = verify(draft, rule_set.rules_for("program"), "stop", rule_set.output_schema, context, "program")
    return verdict, context


def test_the_decision_prompt_s_example_program_answers_its_own_question():
    """The example the Drafter shows promotion programs answers its own made-up question: at most 3 products, one
    per category, all at 15 %, half the stock of each, the most stock first, each margin at least the floor; run as
    a decision program, the pack's per-product checks pass it."""
    verdict, context = run_example(promotion.POLICY)
    passed = {o.rule_id for o in verdict.outcomes if o.passed}
    assert {"program", "margin_check", "stock_check", "claims_check"} <= passed
    items = json.loads(verdict.extracted_answer)["items"]
    by_sku = {p["sku"]: p for p in context["products"]}
    assert 1 <= len(items) <= 3 and {item["discount_percent"] for item in items} == {15}
    assert len({by_sku[item["sku"]]["category"] for item in items}) == len(items)
    assert all(item["quantity"] == by_sku[item["sku"]]["stock"] // 2 for item in items)
    stocks = [by_sku[item["sku"]]["stock"] for item in items]
    assert stocks == sorted(stocks, reverse=True)


def test_the_decision_prompt_s_example_is_not_an_answer_to_the_pack_s_rules():
    """Issue 55: the example answers another question than the requests it is shown for (one 15 % discount for
    every product): a policy whose caps are all under 15 % leaves it nothing to promote, and its empty plan fails."""
    capped = {**promotion.POLICY, "max_discount_percent": {"grocery": 10, "home": 10, "appliances": 10}}
    verdict, _ = run_example(capped)
    assert not verdict.valid
    assert json.loads(verdict.extracted_answer)["items"] == []


def pack(products: list[dict] = promotion.PRODUCTS) -> PromotionPack:
    return PromotionPack(PromotionParams.model_validate({"products": products, **promotion.POLICY}))


@pytest.mark.parametrize(
    ("sku", "floor", "expected"),
    [
        ("TEA-100", None, 25),  # 33.3 % keeps the plan's 30 % floor; the grocery cap is 25 %
        ("MUG-12", None, 40),  # 42.9 %, capped at 40 %
        ("MUG-12", 50, 20),  # a floor of its own: 3.20 / (1 - 0.5) = 6.40 of an 8.00 price, 20 % off
        ("GRD-01", None, 15),  # 15.1 % keeps 30 %: its whole part
        ("GRD-01", 50, None),  # 40.6 % at full price: no discount keeps 50 %
    ],
)
def test_largest_discount_is_the_most_a_product_s_floors_and_cap_allow(sku, floor, expected):
    assert pack().largest_discount(sku, floor) == expected


def test_largest_discount_stays_a_discount_an_item_may_have():
    """A product that costs nothing keeps any margin at any price: its discount is still under 100 %, as an item's
    must be, where no cap bounds it."""
    free = [{**promotion.PRODUCTS[0], "category": "samples", "unit_cost": 0}]
    assert pack(free).largest_discount(free[0]["sku"]) == 99


def test_an_item_at_the_largest_discount_passes_the_pack_and_one_point_more_does_not():
    """The function is the pack's own arithmetic: every product at its largest discount passes the margin, cap and
    plan checks; one point more fails one of them."""
    promotable = [p for p in promotion.PRODUCTS if pack().largest_discount(p["sku"]) is not None]
    assert promotable
    for product in promotable:
        largest = pack().largest_discount(product["sku"])
        item = {"sku": product["sku"], "discount_percent": largest, "quantity": 1}
        assert check(plan([item], message="Deals this week."), schema=False).valid, product["sku"]
        over = {**item, "discount_percent": largest + 1}
        assert not check(plan([over], message="Deals this week."), schema=False).valid, product["sku"]


@pytest.mark.parametrize(
    ("arguments", "error"),
    [(("NOPE-1",), KeyError), ((7,), KeyError), (("TEA-100", "20"), TypeError), (("TEA-100", 100), ValueError)],
)
def test_largest_discount_refuses_what_it_cannot_answer_naming_the_argument(arguments, error):
    with pytest.raises(error, match="largest_discount"):
        pack().largest_discount(*arguments)
