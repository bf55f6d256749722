"""The reference plan of each business instance, computed without a model: the best the evaluation could ask of an
answer (the ad case's exact optimum is the rule pack's own)."""

from __future__ import annotations

from fractions import Fraction
from itertools import combinations

from deliberate.risk.model import Offer
from deliberate_bench.eval.business_instances import CREDIT_RATES, CREDIT_TERMS, PLAIN_MESSAGE, largest_safe_amount
from deliberate_client.examples import promotion


def credit_reference(applicant: dict, offers: int) -> list[Offer]:
    """Distinct offers of the largest total amount on the grid: the largest safe amount of each of the best terms."""
    rate = CREDIT_RATES[0]
    best = sorted((Offer(largest_safe_amount(applicant, rate, term), rate, term) for term in CREDIT_TERMS),
                  key=lambda offer: -offer.amount)  # fmt: skip
    return [offer for offer in best[:offers] if offer.amount > 0]


def promotion_reference(products: list[dict], policy: dict) -> dict | None:
    """The plan of the largest gross profit, searched exactly over which products, at full price: a discount only
    lowers a product's profit and margin (the policy has no demand model), so the best plan gives none. Per subset
    of 3–5 products the quantities are a knapsack on the plan-margin slack, filled greedily by profit per unit of
    slack (exact up to the last unit). None when no plan keeps the floors."""
    floor = Fraction(policy["min_margin_percent"]) / 100
    plan_floor = Fraction(policy["min_plan_margin_percent"]) / 100
    eligible = [p for p in products if p["stock"] >= 1 and margin_at_full_price(p) >= floor]
    best, best_profit = None, Fraction(-1)
    for size in range(promotion.MIN_ITEMS, promotion.MAX_ITEMS + 1):
        for subset in combinations(eligible, size):
            quantities = plan_quantities(subset, plan_floor)
            if quantities is None:
                continue
            profit = sum(q * (price(p) - cost(p)) for p, q in zip(subset, quantities, strict=True))
            if profit > best_profit:
                best_profit = profit
                best = [{"sku": p["sku"], "discount_percent": 0, "quantity": q}
                        for p, q in zip(subset, quantities, strict=True)]  # fmt: skip
    return None if best is None else {"items": best, "message": PLAIN_MESSAGE}


def price(product: dict) -> Fraction:
    return Fraction(str(product["price"]))


def cost(product: dict) -> Fraction:
    return Fraction(str(product["unit_cost"]))


def margin_at_full_price(product: dict) -> Fraction:
    return (price(product) - cost(product)) / price(product)


def plan_quantities(subset: tuple[dict, ...], plan_floor: Fraction) -> list[int] | None:
    """Quantities (≥ 1, ≤ stock) of most profit whose plan margin keeps `plan_floor`; None when even one unit each
    misses it. A product above the floor adds slack Σ q·(price − cost − floor·price) ≥ 0; one below uses it."""
    slack_per_unit = [price(p) - cost(p) - plan_floor * price(p) for p in subset]
    quantities = [p["stock"] if s >= 0 else 1 for p, s in zip(subset, slack_per_unit, strict=True)]
    slack = sum(q * s for q, s in zip(quantities, slack_per_unit, strict=True))
    if slack < 0:
        return None
    thin = sorted((i for i, s in enumerate(slack_per_unit) if s < 0),
                  key=lambda i: -(price(subset[i]) - cost(subset[i])) / -slack_per_unit[i])  # fmt: skip
    for i in thin:
        more = min(subset[i]["stock"] - 1, int(slack // -slack_per_unit[i]))
        quantities[i] += more
        slack += more * slack_per_unit[i]
    return quantities
