"""The best plan of each varied instance (`varied_instances`), computed by the evaluation's own formulation — a
`scipy.optimize.milp` model of its rules (ads, credit) or an exhaustive search (promotion) written here, never a call
of the services' solver or a pack's optimum — or None when no plan satisfies the rules (the instance is infeasible
and its answers must end `UNVERIFIED`). Read from `meta["rules"]`, not from the CEL the requests carry, so a rule
stated wrongly in one place shows up as a disagreement between this and the judge."""

from __future__ import annotations

from fractions import Fraction
from itertools import combinations

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp

from deliberate.risk.model import Offer
from deliberate_bench.eval import business_instances as bi
from deliberate_bench.eval import business_references as references
from deliberate_bench.eval import varied_instances as vi
from deliberate_client.examples import promotion

TIME_LIMIT_S = 20.0  # each milp; the largest varied model solves in well under a second


def reference(instance: bi.Instance) -> dict | None:
    """The instance's best plan as the answer JSON, or None when it is infeasible."""
    return REFERENCES[instance.case](instance)


def is_varied(instance: bi.Instance) -> bool:
    """An instance of the varied split: its rules are its own (`meta["rules"]`), not only its pack's."""
    return "rules" in instance.meta


SOLVED: dict[str, dict | None] = {}  # instance id → its reference, in this process


def cached_reference(instance: bi.Instance) -> dict | None:
    """`reference`, solved once per instance in a process (every row of an instance is judged against it)."""
    if instance.id not in SOLVED:
        SOLVED[instance.id] = reference(instance)
    return SOLVED[instance.id]


def solved(
    objective: list[float], rows: list[tuple[list[float], float, float]], upper: list[float]
) -> list[int] | None:
    """The 0/1 vector minimizing `objective` within `rows` (coefficients, lower, upper) and the variables' upper
    bounds; None when none exists."""
    constraints = [LinearConstraint(np.array([c for c, _, _ in rows]), [lo for _, lo, _ in rows],
                                    [hi for _, _, hi in rows])] if rows else []  # fmt: skip
    bounds = Bounds(np.zeros(len(objective)), np.array(upper))
    result = milp(np.array(objective), constraints=constraints, integrality=np.ones(len(objective)), bounds=bounds,
                  options={"time_limit": TIME_LIMIT_S})  # fmt: skip
    if result.status != 0 or result.x is None:  # 2: infeasible; anything else unsolved is not a reference either
        return None
    return [round(value) for value in result.x]


def ad_reference(instance: bi.Instance) -> dict | None:
    catalog, meta = instance.context["catalog"], instance.meta
    n = len(catalog)
    rules = {rule["kind"]: rule for rule in meta["rules"]}
    column = lambda field: [float(ad[field]) for ad in catalog]  # noqa: E731
    ones = [1.0] * n
    rows = [(column("cost"), -np.inf, float(meta["budget"]))]
    upper = [1.0] * n
    if meta["picks"] is not None:
        rows.append((ones, meta["picks"], meta["picks"]))
    for rule in meta["rules"]:
        kind = rule["kind"]
        if kind == "count_range":
            rows.append((ones, rule["low"], rule["high"]))
        elif kind == "as_many_as_fit":
            rows.append((ones, 1, np.inf))
        elif kind == "most_per_category":
            for category in {ad["category"] for ad in catalog}:
                rows.append(([1.0 if ad["category"] == category else 0.0 for ad in catalog], -np.inf, rule["k"]))
        elif kind == "at_least_one_of":
            rows.append(([1.0 if ad["category"] == rule["category"] else 0.0 for ad in catalog], 1, np.inf))
        elif kind == "include":
            rows += [([1.0 if ad["id"] == i else 0.0 for ad in catalog], 1, 1) for i in rule["ids"]]
        elif kind == "exclude_categories":
            upper = [0.0 if ad["category"] in rule["categories"] else u for ad, u in zip(catalog, upper, strict=True)]
        elif kind == "exclude_ids":
            upper = [0.0 if ad["id"] in rule["ids"] else u for ad, u in zip(catalog, upper, strict=True)]
        elif kind == "impressions_limit":
            rows.append((column("impressions"), -np.inf, rule["limit"]))
        elif kind == "cost_cap":
            upper = [0.0 if ad["cost"] > rule["cap"] else u for ad, u in zip(catalog, upper, strict=True)]
        elif kind == "ctr_floor_min_cost":
            rows.append((column("ctr"), rule["floor"], np.inf))
    objective = column("cost") if "ctr_floor_min_cost" in rules else [-ctr for ctr in column("ctr")]
    chosen = solved(objective, rows, upper)
    return None if chosen is None else {"selected_ids": [ad["id"] for ad, x in zip(catalog, chosen, strict=True) if x]}


def credit_reference(instance: bi.Instance) -> dict | None:
    """The offers of the largest total amount: one 0/1 variable per (term, amount) of the stated grid at the lowest
    stated rate (a lower rate never lowers what the risk model approves), each amount at most the largest the model
    approves at that term (PD and LGD grow with the amount) and within the payment cap."""
    applicant, offers = instance.context["applicant"], instance.meta["offers"]
    rules = {rule["kind"]: rule for rule in instance.meta["rules"]}
    step = next(rule["step"] for rule in instance.meta["rules"] if "step" in rule)
    terms = rules["term_set"]["terms"] if "term_set" in rules else list(bi.CREDIT_TERMS)
    rate = vi.CREDIT_MIN_RATE
    cap = min((rule["most"] for rule in instance.meta["rules"] if rule["kind"] == "payment_cap"), default=np.inf)
    choices = [(term, amount) for term in terms for amount in range(vi.CREDIT_MIN_AMOUNT, largest(applicant, term,
               step) + 1, step) if payment(amount, rate, term) <= cap]  # fmt: skip
    if len(choices) < offers:
        return None
    amounts = [float(amount) for _, amount in choices]
    rows = [([1.0] * len(choices), offers, offers)]
    if "total_exposure" in rules:
        rows.append((amounts, -np.inf, rules["total_exposure"]["most"]))
    if "min_gap" in rules:  # within any window narrower than the gap, at most one offer
        gap = rules["min_gap"]["gap"]
        for low in sorted(set(amounts)):
            rows.append(([1.0 if low <= a < low + gap else 0.0 for a in amounts], -np.inf, 1))
    chosen = solved([-a for a in amounts], rows, [1.0] * len(choices))
    if chosen is None:
        return None
    picked = [{"amount": amount, "annual_rate": rate, "term_months": term}
              for (term, amount), x in zip(choices, chosen, strict=True) if x]  # fmt: skip
    return {"offers": picked, "disclosure": instance.context["disclosure"]}


def largest(applicant: dict, term: int, step: int) -> int:
    """The largest amount on the step grid the risk model approves at the lowest rate and this term (0: none)."""
    best, amount = 0, vi.CREDIT_MIN_AMOUNT
    while amount <= 4 * applicant["annual_income"] and bi.offer_passes(applicant, Offer(amount, vi.CREDIT_MIN_RATE,
                                                                                          term)):  # fmt: skip
        best, amount = amount, amount + step
    return best


def payment(amount: float, annual_rate: float, months: int) -> float:
    """The monthly payment of an annuity loan, as CEL's `monthly_payment` computes it."""
    monthly = annual_rate / 12
    return amount / months if monthly == 0 else amount * monthly / (1 - (1 + monthly) ** -months)


def promotion_reference(instance: bi.Instance) -> dict | None:
    """The full-price plan of the largest gross profit among those that keep every rule: every subset of eligible
    products searched (a discount only lowers profit and margin, so the best plan gives none — which also keeps
    the discount rules), quantities as `business_references.plan_quantities` fills them."""
    products, policy = instance.context["products"], instance.meta["policy"]
    rules = instance.meta["rules"]
    floor = Fraction(policy["min_margin_percent"]) / 100
    plan_floor = Fraction(policy["min_plan_margin_percent"]) / 100
    eligible = [p for p in products if p["stock"] >= 1 and references.margin_at_full_price(p) >= floor]
    required = {rule["sku"] for rule in rules if rule["kind"] == "required"}
    least = max([promotion.MIN_ITEMS, *(rule["least"] for rule in rules if rule["kind"] == "min_products")])
    most_per = min((rule["k"] for rule in rules if rule["kind"] == "most_per_category"), default=promotion.MAX_ITEMS)
    best, best_profit = None, Fraction(-1)
    for size in range(least, promotion.MAX_ITEMS + 1):
        for subset in combinations(eligible, size):
            skus = {p["sku"] for p in subset}
            per_category = [sum(p["category"] == c for p in subset) for c in {p["category"] for p in subset}]
            if not required <= skus or max(per_category) > most_per:
                continue
            quantities = references.plan_quantities(subset, plan_floor)
            if quantities is None:
                continue
            profit = sum(
                q * (references.price(p) - references.cost(p)) for p, q in zip(subset, quantities, strict=True)
            )
            if profit > best_profit:
                best_profit = profit
                best = [{"sku": p["sku"], "discount_percent": 0, "quantity": q}
                        for p, q in zip(subset, quantities, strict=True)]  # fmt: skip
    return None if best is None else {"items": best, "message": bi.PLAIN_MESSAGE}


REFERENCES = {"ads": ad_reference, "credit": credit_reference, "promotion": promotion_reference}
