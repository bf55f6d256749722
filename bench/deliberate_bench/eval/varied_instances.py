"""The varied split of `make eval-business-varied`: business requests whose rules are drawn from a family much wider
than the rule packs' worked examples — at most k ads of a category, a contracted ad, a banned category, as many ads as
fit, a payment cap, a discount budget … — each stated in words in the prompt (in one of several wordings) **and** as
the request's own CEL constraint; the pack's params carry only what the pack knows (the ad pack the budget, the
credit pack the applicant, the promotion pack its policy).

Each instance mixes one to three rules (`Rule`: its kind, the sentence, the CEL expression, the figures the
evaluation's own formulation reads in `meta["rules"]`). About one in eight is made infeasible on purpose — a rule that
contradicts another (an ad that must be in, of a category that must stay out) — and must end `UNVERIFIED`. Every
instance comes from its own seeded `random.Random`; a quarter is kept apart for tuning, as in `business_instances`.
The optimum is computed apart from any service code (`varied_references`). Pure: no services.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

from deliberate_bench.eval import business_instances as bi
from deliberate_client.examples import promotion

SEED = 2027  # the varied split's instances; changing it is a new set
SCORED = {"ads": 30, "credit": 15, "promotion": 15}
INFEASIBLE_SHARE = 8  # about one instance in 8 gets a rule that contradicts another
# Every varied credit request states these, so the reference's grid is the answer's whole space.
CREDIT_MIN_AMOUNT, CREDIT_BASE_STEP = bi.CREDIT_MIN_AMOUNT, bi.CREDIT_AMOUNT_STEP
CREDIT_MIN_RATE, CREDIT_MAX_RATE = bi.CREDIT_RATES[0], bi.CREDIT_RATES[-1]


@dataclass(frozen=True)
class Rule:
    """One rule of a request: what kind, how the prompt says it, the CEL the Verifier checks, and the figures the
    evaluation's own formulation reads (`model`)."""

    kind: str
    wording: str
    cel: str
    model: dict

    def constraint(self, index: int) -> dict:
        return {"id": f"{self.kind}_{index}", "celExpression": self.cel, "failureMessage": self.wording}


def instances(case: str, split: str = "scored", seed: int = SEED) -> list[bi.Instance]:
    """The case's varied instances of one split, in id order."""
    total = SCORED[case] * bi.TUNING_SHARE // (bi.TUNING_SHARE - 1)
    tuning = set(random.Random(f"varied:{case}:split:{seed}").sample(range(total), total // bi.TUNING_SHARE))
    wanted = [i for i in range(total) if (i in tuning) == (split == "tuning")]
    make = GENERATORS[case]
    return [make(random.Random(f"varied:{case}:{seed}:{i}"), f"{case}-varied-{i:03d}", split) for i in wanted]


def assembled(case: str, instance_id: str, split: str, prompt: str, schema: dict, rules: list[Rule],
              base: list[dict], context: dict, meta: dict) -> bi.Instance:  # fmt: skip
    """The instance: the rules in the prompt as a list and in the request as CEL constraints after the base ones."""
    stated = "\n".join(f"- {rule.wording}" for rule in rules)
    return bi.Instance(
        case=case,
        id=instance_id,
        split=split,
        prompt=prompt.replace("{rules}", stated),
        output_schema=schema,
        constraints=[*base, *(rule.constraint(k) for k, rule in enumerate(rules))],
        context=context,
        meta={**meta, "rules": [{"kind": rule.kind, **rule.model} for rule in rules]},
    )


def infeasible(rng: random.Random) -> bool:
    return rng.randrange(INFEASIBLE_SHARE) == 0


# --------------------------------------------------------------------------------------------------
# Ad selection
# --------------------------------------------------------------------------------------------------

AD_RULE_KINDS = ("most_per_category", "at_least_one_of", "include", "exclude_categories", "exclude_ids",
                 "impressions_limit", "cost_cap", "ctr_floor_min_cost", "count_range", "as_many_as_fit")  # fmt: skip
COUNT_KINDS = ("count_range", "as_many_as_fit")  # rules on the plan's size, stated in place of "exactly k"
SELECTED = "ctx.catalog.filter(a, a.id in plan.selected_ids)"


def ad_instance(rng: random.Random, instance_id: str, split: str) -> bi.Instance:
    names = bi.AD_CATEGORY_SETS[rng.choice(sorted(bi.AD_CATEGORY_SETS))]
    categories = rng.sample(names, rng.randint(4, len(names)))
    ids = rng.sample(range(*bi.AD_ID_RANGES[rng.choice(sorted(bi.AD_ID_RANGES))]), rng.randint(25, 60))
    low = rng.choice((200, 300, 400))
    catalog = [{"id": ad_id, "cost": rng.randrange(low, low * 4, 5), "ctr": round(rng.uniform(0.002, 0.06), 4),
                "impressions": rng.randrange(2_000, 50_000, 500),
                "category": categories[k] if k < len(categories) else rng.choice(categories)}
               for k, ad_id in enumerate(ids)]  # fmt: skip
    picks = rng.randint(3, 6)
    budget = bi.round_up(picks * sum(ad["cost"] for ad in catalog) / len(catalog) * rng.uniform(0.8, 1.2), 50)
    kinds = rng.sample(AD_RULE_KINDS, rng.randint(1, 3))
    count = "range" if "count_range" in kinds else "none" if "as_many_as_fit" in kinds else "exact"
    rules = [ad_rule(rng, kind, catalog, categories, picks, budget) for kind in kinds if kind not in COUNT_KINDS]
    if count == "range":
        rules.append(count_range_rule(rng, picks))
    elif count == "none":
        rules.append(Rule("as_many_as_fit", "choose as many ads as the budget allows; no fixed number",
                          "size(plan.selected_ids) >= 1", {}))  # fmt: skip
    if infeasible(rng):  # in place of the drawn rules: two that no plan keeps together
        count, rules = "exact", contradiction(rng, catalog)
    minimize = any(rule.kind == "ctr_floor_min_cost" for rule in rules)
    objective = "minimize the total cost" if minimize else "maximize the total predicted CTR"
    count_text = f"exactly {picks} ads" if count == "exact" else "the number of ads the rules below allow"
    prompt = rng.choice(AD_WORDINGS).format(objective=objective, count=count_text, budget=budget,
                                            table=ad_table(catalog), rules="{rules}")  # fmt: skip
    base = [{"id": "pool_check", "celExpression": "plan.selected_ids.all(i, i in ctx.pool)",
             "failureMessage": "every selected id must be in ctx.pool"},
            {"rulePack": "ad_selection", "params": {"budget": budget, "one_per_category": False,
                                                    **({"picks": picks} if count == "exact" else {})}}]  # fmt: skip
    return assembled("ads", instance_id, split, prompt, ad_schema(picks if count == "exact" else None), rules, base,
                     {"catalog": catalog, "pool": [ad["id"] for ad in catalog], "budget": budget,
                      "categories": sorted(set(categories))},
                     {"size": len(catalog), "picks": picks if count == "exact" else None, "budget": budget,
                      "objective": "min_cost" if minimize else "max_ctr"})  # fmt: skip


AD_WORDINGS = (
    "Choose {count} from the ad catalog below to {objective}. The total cost must stay within the budget of "
    '{budget}. Further rules:\n{rules}\nAnswer with JSON: {{"selected_ids": [...]}}.\n\nCatalog (id | cost | '
    "predicted CTR | impressions | category):\n{table}",
    "Campaign brief. Budget {budget}. Goal: {objective}, picking {count}. The advertiser also insists that:\n"
    '{rules}\nReply with JSON only, as {{"selected_ids": [<ad ids>]}}.\n\n{table}',
    "TASK: ad selection\nOBJECTIVE: {objective}\nSIZE: {count}\nBUDGET: total cost <= {budget}\nRULES:\n{rules}\n"
    'OUTPUT: {{"selected_ids": [...]}}\nCATALOG:\n{table}',
)


def ad_table(catalog: list[dict]) -> str:
    return "\n".join(f"{a['id']} | {a['cost']} | {a['ctr']} | {a['impressions']} | {a['category']}" for a in catalog)


def ad_schema(picks: int | None) -> dict:
    ids = {"type": "array", "items": {"type": "integer"}, "minItems": picks or 1, "uniqueItems": True}
    if picks:
        ids["maxItems"] = picks
    return {"type": "object", "properties": {"selected_ids": ids}, "required": ["selected_ids"]}


def ad_rule(rng: random.Random, kind: str, catalog: list[dict], categories: list[str], picks: int,
            budget: int) -> Rule:  # fmt: skip
    if kind == "most_per_category":
        k = rng.choice((2, 3))
        wording = rng.choice((f"at most {k} ads of any one category", f"no category may have more than {k} ads"))
        cel = (
            f"ctx.categories.all(c, ctx.catalog.filter(a, a.category == c && a.id in plan.selected_ids).size() <= {k})"
        )
        return Rule(kind, wording, cel, {"k": k})
    if kind == "at_least_one_of":
        category = rng.choice(categories)
        wording = rng.choice((f"at least one ad of the category {category}", f"the plan must include a {category} ad"))
        return Rule(kind, wording, f"{SELECTED}.exists(a, a.category == '{category}')", {"category": category})
    if kind == "include":
        affordable = [a for a in catalog if a["cost"] <= budget / max(picks, 2)]
        chosen = sorted(a["id"] for a in rng.sample(affordable, min(len(affordable), rng.randint(1, 2))))
        wording = rng.choice((f"the contracted ads {chosen} must be selected", f"include ads {chosen} (already sold)"))
        return Rule(kind, wording, f"{chosen}.all(i, i in plan.selected_ids)", {"ids": chosen})
    if kind == "exclude_categories":
        banned = sorted(rng.sample(categories, rng.randint(1, 2)))
        wording = rng.choice((f"no ads of the categories {banned}", f"the categories {banned} are banned"))
        return Rule(kind, wording, f"{SELECTED}.all(a, !(a.category in {json.dumps(banned)}))", {"categories": banned})
    if kind == "exclude_ids":
        banned = sorted(a["id"] for a in rng.sample(catalog, rng.randint(2, 4)))
        wording = rng.choice((f"never select the ads {banned}", f"the ads {banned} are withdrawn"))
        return Rule(kind, wording, f"plan.selected_ids.all(i, !(i in {banned}))", {"ids": banned})
    if kind == "impressions_limit":
        limit = bi.round_up(picks * sum(a["impressions"] for a in catalog) / len(catalog) * rng.uniform(0.6, 0.9), 1000)
        wording = rng.choice(
            (f"total impressions at most {limit}", f"the ads' impressions may add up to {limit} at most")
        )
        return Rule(kind, wording, f"sum({SELECTED}.map(a, a.impressions)) <= {limit}.0", {"limit": limit})
    if kind == "cost_cap":
        cap = sorted(a["cost"] for a in catalog)[len(catalog) * rng.choice((2, 3)) // 4]
        wording = rng.choice((f"no single ad may cost more than {cap}", f"each selected ad costs at most {cap}"))
        return Rule(kind, wording, f"{SELECTED}.all(a, a.cost <= {cap}.0)", {"cap": cap})
    # ctr_floor_min_cost: the objective turns to cost; the CTR becomes a floor the plan must reach
    ranked = sorted((a["ctr"] for a in catalog), reverse=True)
    floor = round(sum(ranked[picks : 2 * picks]) * rng.uniform(0.8, 1.0), 3)
    wording = rng.choice((f"the total predicted CTR must reach at least {floor}", f"a CTR floor of {floor} in total"))
    return Rule(kind, wording, f"sum({SELECTED}.map(a, a.ctr)) >= {floor}", {"floor": floor})


def count_range_rule(rng: random.Random, picks: int) -> Rule:
    low, high = max(2, picks - rng.randint(1, 2)), picks + rng.randint(0, 2)
    wording = rng.choice((f"between {low} and {high} ads", f"at least {low} and at most {high} ads"))
    cel = f"size(plan.selected_ids) >= {low} && size(plan.selected_ids) <= {high}"
    return Rule("count_range", wording, cel, {"low": low, "high": high})


def contradiction(rng: random.Random, catalog: list[dict]) -> list[Rule]:
    """Two rules no plan satisfies together: an ad that must be in, of a category that must stay out."""
    ad = rng.choice(catalog)
    category = ad["category"]
    return [
        Rule("include", f"the contracted ad {ad['id']} must be selected", f"{ad['id']} in plan.selected_ids",
             {"ids": [ad["id"]]}),
        Rule("exclude_categories", f"no ads of the category {category}",
             f"{SELECTED}.all(a, a.category != '{category}')", {"categories": [category]}),
    ]  # fmt: skip


# --------------------------------------------------------------------------------------------------
# Credit offers
# --------------------------------------------------------------------------------------------------

CREDIT_RULE_KINDS = ("payment_cap", "amount_step", "term_set", "min_gap", "total_exposure")
CREDIT_BASE = [
    {"id": "amount_floor", "celExpression": f"plan.offers.all(o, double(o.amount) >= {CREDIT_MIN_AMOUNT}.0)",
     "failureMessage": f"every amount is at least {CREDIT_MIN_AMOUNT}"},
    {"id": "rate_range", "celExpression": f"plan.offers.all(o, o.annual_rate >= {CREDIT_MIN_RATE} && "
                                          f"o.annual_rate <= {CREDIT_MAX_RATE})",
     "failureMessage": f"every annual rate is between {CREDIT_MIN_RATE} and {CREDIT_MAX_RATE}"},
]  # fmt: skip


def credit_instance(rng: random.Random, instance_id: str, split: str) -> bi.Instance:
    applicant = bi.feasible_applicant(rng)
    offers = rng.choice((2, 3))
    kinds = rng.sample(CREDIT_RULE_KINDS, rng.randint(1, 3))
    if "amount_step" not in kinds:  # every request states a step: the reference searches that grid
        kinds.append("base_step")
    rules = [credit_rule(rng, kind, applicant, offers) for kind in kinds]
    if infeasible(rng):  # in place of the drawn rules: a payment cap below the smallest loan's payment
        rules = [
            credit_rule(rng, "base_step", applicant, offers),
            payment_cap_rule(10, "the monthly payment of each offer may not exceed 10"),
        ]
    disclosure = rng.choice(bi.DISCLOSURES)
    prompt = rng.choice(CREDIT_WORDINGS).format(offers=offers, applicant=json.dumps(applicant), rules="{rules}",
                                                disclosure=disclosure, low=CREDIT_MIN_AMOUNT,
                                                rates=f"{CREDIT_MIN_RATE} to {CREDIT_MAX_RATE}")  # fmt: skip
    return assembled("credit", instance_id, split, prompt, bi.credit_schema(offers), rules,
                     [*CREDIT_BASE, {"rulePack": "credit"}], {"applicant": applicant, "disclosure": disclosure},
                     {"offers": offers})  # fmt: skip


CREDIT_WORDINGS = (
    "Propose {offers} different personal loan offers for this applicant: {applicant} (income per year, debt payments "
    "per month), each as large as the bank's risk model approves (probability of default under 0.05, loss given "
    "default under 0.4). Every amount is at least {low}; every annual rate (a fraction) is within {rates}. The "
    'bank\'s rules for this campaign:\n{rules}\nThe "disclosure" must contain, word for word: {disclosure}\n'
    'Answer with JSON: {{"offers": [{{"amount": ..., "annual_rate": ..., "term_months": ...}}], '
    '"disclosure": "..."}}.',
    "Lending desk. Applicant {applicant}. Offers wanted: {offers}, different from each other, the largest amounts "
    "the risk limits allow (PD < 0.05, LGD < 0.4). Amounts from {low}; rates from {rates}. Also:\n{rules}\n"
    'Disclosure, verbatim: {disclosure}\nOutput JSON with "offers" (amount, annual_rate, term_months) and '
    '"disclosure".',
)


def credit_rule(rng: random.Random, kind: str, applicant: dict, offers: int) -> Rule:
    if kind == "payment_cap":
        share = rng.choice((0.10, 0.15, 0.20))
        most = round(share * applicant["annual_income"] / 12)
        return payment_cap_rule(most, rng.choice((f"the monthly payment of each offer is at most {most}",
                                                  f"no offer's monthly instalment above {most} ({share:.0%} of "
                                                  "monthly income)")))  # fmt: skip
    if kind in ("amount_step", "base_step"):
        step = rng.choice((500, 1000)) if kind == "amount_step" else CREDIT_BASE_STEP
        wording = f"amounts in whole multiples of {step}"
        cel = f"plan.offers.all(o, double(o.amount) / {step}.0 == double(int(double(o.amount) / {step}.0)))"
        return Rule(kind, wording, cel, {"step": step})
    if kind == "term_set":
        terms = sorted(rng.sample(bi.CREDIT_TERMS, rng.randint(2, 4)))
        wording = rng.choice((f"terms only of {terms} months", f"the term (months) is one of {terms}"))
        return Rule(kind, wording, f"plan.offers.all(o, o.term_months in {terms})", {"terms": terms})
    if kind == "min_gap":
        gap = rng.choice((1000, 2500, 5000))
        wording = rng.choice((f"any two offers differ in amount by at least {gap}", f"amounts at least {gap} apart"))
        cel = (f"plan.offers.all(a, plan.offers.all(b, a == b || double(a.amount) - double(b.amount) >= {gap}.0 || "
               f"double(b.amount) - double(a.amount) >= {gap}.0))")  # fmt: skip
        return Rule(kind, wording, cel, {"gap": gap})
    safe = bi.largest_safe_offer(applicant).amount
    most = bi.round_up(max(offers * CREDIT_MIN_AMOUNT, safe * offers * rng.uniform(0.4, 0.8)), 500)
    wording = rng.choice((f"the offers' amounts add up to at most {most}", f"a total exposure cap of {most}"))
    return Rule("total_exposure", wording, f"sum(plan.offers.map(o, double(o.amount))) <= {most}.0", {"most": most})


def payment_cap_rule(most: int, wording: str) -> Rule:
    cel = f"plan.offers.all(o, monthly_payment(double(o.amount), o.annual_rate, o.term_months) <= {most}.0)"
    return Rule("payment_cap", wording, cel, {"most": most})


# --------------------------------------------------------------------------------------------------
# Promotion plans
# --------------------------------------------------------------------------------------------------

PROMOTION_RULE_KINDS = ("no_discount_category", "discount_budget", "most_per_category", "min_products", "required")


def promotion_instance(rng: random.Random, instance_id: str, split: str) -> bi.Instance:
    seed_instance = bi.promotion_instance(rng, instance_id, split)  # the table and policy, as the scored split's
    products = seed_instance.context["products"]
    kinds = rng.sample(PROMOTION_RULE_KINDS, rng.randint(1, 3))
    rules = [promotion_rule(rng, kind, products) for kind in kinds]
    if infeasible(rng):  # in place of the drawn rules: a product that must be in, with a margin under the floor
        product = min(products, key=bi_margin)
        product["unit_cost"] = round(product["price"] * 0.97, 2)
        rules = [required_rule(product)]
    prompt = (
        f"{seed_instance.prompt}\n\nThis week's extra rules:\n{{rules}}"
        if rng.random() < 0.5
        else f"Extra rules first:\n{{rules}}\n\n{seed_instance.prompt}"
    )
    policy = next(c for c in seed_instance.constraints if "rulePack" in c)
    return assembled("promotion", instance_id, split, prompt, seed_instance.output_schema, rules,
                     seed_instance.constraints, {**promotion.context(products),
                                                 "categories": sorted({p["category"] for p in products})},
                     {"policy": policy["params"], "products": len(products)})  # fmt: skip


def bi_margin(product: dict) -> float:
    return (product["price"] - product["unit_cost"]) / product["price"]


ITEM_PRODUCT = "ctx.products.filter(p, p.sku == i.sku)"


def promotion_rule(rng: random.Random, kind: str, products: list[dict]) -> Rule:
    categories = sorted({p["category"] for p in products})
    if kind == "no_discount_category":
        category = rng.choice(categories)
        wording = rng.choice((f"no discount on {category} products", f"{category} stays at full price"))
        cel = f"plan.items.all(i, {ITEM_PRODUCT}.all(p, p.category != '{category}' || i.discount_percent == 0))"
        return Rule(kind, wording, cel, {"category": category})
    if kind == "discount_budget":
        budget = rng.choice((50, 100, 200, 400))
        wording = rng.choice((f"the discounts may cost at most {budget} in total (price x discount x quantity)",
                              f"a discount budget of {budget}"))  # fmt: skip
        cel = (f"sum(plan.items.map(i, double(i.quantity) * double(i.discount_percent) / 100.0 * "
               f"{ITEM_PRODUCT}[0].price)) <= {budget}.0")  # fmt: skip
        return Rule(kind, wording, cel, {"budget": budget})
    if kind == "most_per_category":
        k = rng.choice((1, 2))
        wording = rng.choice((f"at most {k} products per category", f"no more than {k} products of one category"))
        cel = f"ctx.categories.all(c, plan.items.filter(i, {ITEM_PRODUCT}.exists(p, p.category == c)).size() <= {k})"
        return Rule(kind, wording, cel, {"k": k})
    if kind == "min_products":
        least = rng.choice((4, 5))
        wording = rng.choice((f"at least {least} products", f"a plan of {least} products or more"))
        return Rule(kind, wording, f"size(plan.items) >= {least}", {"least": least})
    healthy = [p for p in products if bi_margin(p) > 0.5] or products
    return required_rule(rng.choice(healthy))


def required_rule(product: dict) -> Rule:
    sku = product["sku"]
    wording = f"the plan must include {sku} ({product['name']})"
    return Rule("required", wording, f"plan.items.exists(i, i.sku == '{sku}')", {"sku": sku})


GENERATORS = {"ads": ad_instance, "credit": credit_instance, "promotion": promotion_instance}


def rule_kinds(instance: bi.Instance) -> list[str]:
    return sorted({rule["kind"] for rule in instance.meta["rules"]} - {"base_step"})
