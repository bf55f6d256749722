"""The instances of `make eval-business`: request data for the three business cases of docs/business-cases.md (ad
selection, credit offers, promotion plans), generated deterministically, each instance from its own seeded
`random.Random`, so an instance never changes when another is added or left out.

Every case holds a fixed quarter of its instances apart for tuning (`split == "tuning"`); the scored ones are the
rest, and generating them reads nothing of the tuning ones. Every instance is feasible: some plan passes every
constraint of its request (the ad catalog's cheapest plan fits the budget; some offer of a rate × term × amount
grid passes the risk model; a plan of products at full price keeps every margin floor). Pure: no services.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass, field

from deliberate.risk.model import Applicant, Offer, score
from deliberate_client.examples import credit, promotion

SEED = 2026  # the instances of the committed evaluation; changing it is a new set of instances
TUNING_SHARE = 4  # one instance in 4 is kept for tuning
SCORED = {"ads": 60, "credit": 42, "promotion": 30}
CASES = tuple(SCORED)


@dataclass(frozen=True)
class Instance:
    """One request of a business case, in the form `build_request` takes (constraints in the protobuf JSON mapping
    of deliberate.common.v1.Constraint), with what shaped it in `meta` (sizes, template, …)."""

    case: str
    id: str
    split: str  # "tuning" or "scored"
    prompt: str
    output_schema: dict
    constraints: list[dict]
    context: dict
    meta: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def instances(case: str, split: str = "scored", seed: int = SEED) -> list[Instance]:
    """The case's instances of one split, in id order."""
    total = SCORED[case] * TUNING_SHARE // (TUNING_SHARE - 1)
    tuning = set(random.Random(f"{case}:split:{seed}").sample(range(total), total // TUNING_SHARE))
    wanted = [i for i in range(total) if (i in tuning) == (split == "tuning")]
    make = GENERATORS[case]
    return [make(random.Random(f"{case}:{seed}:{i}"), f"{case}-{i:03d}", split) for i in wanted]


# --------------------------------------------------------------------------------------------------
# Ad selection
# --------------------------------------------------------------------------------------------------

AD_CATEGORY_SETS = {
    "verticals": ("travel", "finance", "retail", "auto", "food", "tech", "health", "fashion", "games", "education"),
    "shop": ("shoes", "electronics", "groceries", "furniture", "toys", "beauty", "sports", "books", "garden", "pets"),
    "media": ("news", "podcasts", "streaming", "live-sports", "gaming", "kids", "documentary", "music", "comedy"),
    "b2b": ("saas", "logistics", "insurance", "consulting", "hardware", "payments", "hr-software", "security"),
    "regions": ("north", "south", "east", "west", "central", "coastal", "alpine"),
}
# Ranges the ads' ids are drawn from: 3-, 4- and 5-digit ids, never 1..n.
AD_ID_RANGES = {"3-digit": (100, 1000), "4-digit": (1000, 10_000), "5-digit": (10_000, 100_000)}
AD_TEMPLATES = ("objective_first", "campaign_manager", "spec_sheet")
AD_FORMATS = ("lines", "table", "csv")


def ad_instance(rng: random.Random, instance_id: str, split: str) -> Instance:
    picks = rng.randint(3, 7)
    one_per_category = rng.random() < 0.7
    name_set = rng.choice(sorted(AD_CATEGORY_SETS))
    names = AD_CATEGORY_SETS[name_set]
    categories = list(rng.sample(names, rng.randint(min(len(names), picks + 1), len(names))))
    size = rng.randint(30, 120)
    id_style = rng.choice(sorted(AD_ID_RANGES))
    ids = rng.sample(range(*AD_ID_RANGES[id_style]), size)
    low_cost = rng.choice((200, 300, 400, 600))
    high_cost = low_cost * rng.choice((3, 4, 5))
    top_ctr = rng.choice((0.04, 0.06, 0.09))
    catalog = [
        {
            "id": ad_id,
            "cost": rng.randrange(low_cost, high_cost + 1, 5),
            "ctr": round(rng.uniform(0.002, top_ctr), 4),
            # every category at least once, so the category rule always leaves enough of them to pick from
            "category": categories[k] if k < len(categories) else rng.choice(categories),
        }
        for k, ad_id in enumerate(ids)
    ]
    # Mostly binding (below the cost of the highest-CTR picks), never below the cheapest plan: always feasible.
    mean_cost = sum(ad["cost"] for ad in catalog) / size
    budget = round_up(
        max(picks * mean_cost * rng.uniform(0.6, 1.0), cheapest_plan_cost(catalog, picks, one_per_category)), 50
    )
    template, layout = rng.choice(AD_TEMPLATES), rng.choice(AD_FORMATS)
    return Instance(
        case="ads",
        id=instance_id,
        split=split,
        prompt=ad_prompt(template, layout, catalog, budget, picks, one_per_category),
        output_schema=ad_schema(picks),
        constraints=ad_constraints(budget, picks, one_per_category),
        context={"catalog": catalog, "pool": [ad["id"] for ad in catalog], "budget": budget},
        meta={
            "size": size,
            "picks": picks,
            "budget": budget,
            "one_per_category": one_per_category,
            "category_names": name_set,
            "categories": len({ad["category"] for ad in catalog}),
            "id_style": id_style,
            "template": template,
            "format": layout,
        },
    )


def round_up(value: float, step: int) -> int:
    return -(-int(value) // step) * step


def cheapest_plan_cost(catalog: list[dict], picks: int, one_per_category: bool) -> float:
    """The least a plan of `picks` ads can cost (with the category rule: the cheapest ad of `picks` categories);
    infinity when there are not enough ads (or categories). A budget at least this makes the instance feasible."""
    if one_per_category:
        cheapest: dict[str, int] = {}
        for ad in catalog:
            cheapest[ad["category"]] = min(cheapest.get(ad["category"], ad["cost"]), ad["cost"])
        costs = sorted(cheapest.values())
    else:
        costs = sorted(ad["cost"] for ad in catalog)
    return sum(costs[:picks]) if len(costs) >= picks else float("inf")


def ad_catalog_text(layout: str, catalog: list[dict]) -> tuple[str, str]:
    """(what the columns are, the catalog) in one of the prompt layouts."""
    if layout == "lines":  # the worked example's: CTR in per mille keeps lines short
        rows = [f"{ad['id']} {ad['cost']} {ad['ctr'] * 1000:.1f} {ad['category']}" for ad in catalog]
        return "one ad per line (id, cost, predicted CTR in per mille, category)", "\n".join(rows)
    if layout == "table":
        rows = [f"| {ad['id']} | {ad['cost']} | {ad['ctr'] * 100:.2f} % | {ad['category']} |" for ad in catalog]
        return "a table", "\n".join(["| id | cost | predicted CTR | category |", "|---|---|---|---|", *rows])
    rows = [f"{ad['id']},{ad['cost']},{ad['ctr']},{ad['category']}" for ad in catalog]
    return "CSV with the CTR as a fraction", "\n".join(["id,cost,ctr,category", *rows])


def ad_prompt(template: str, layout: str, catalog: list[dict], budget: int, picks: int, one_per_category: bool) -> str:
    described, table = ad_catalog_text(layout, catalog)
    sample = json.dumps({"selected_ids": [ad["id"] for ad in catalog[:picks]]})
    if template == "objective_first":  # the worked example's wording
        rule = (
            "never pick two ads of the same category (competitors)"
            if one_per_category
            else ("ads of the same category may be combined")
        )
        return (
            f"Select exactly {picks} ads that maximize the total predicted CTR. Rules: the total cost must be at most "
            f"{budget}; {rule}. Answer with JSON like {sample}.\nCatalog, {described}:\n{table}"
        )
    if template == "campaign_manager":
        rule = (
            " No two of them may belong to the same category, since those advertisers compete."
            if (one_per_category)
            else ""
        )
        return (
            f"You run an ad campaign with a budget of {budget}. From the catalog below ({described}), choose {picks} "
            f"different ads whose predicted click-through rates add up to as much as possible without the costs "
            f"exceeding the budget.{rule} Reply with JSON only, in the form {sample}.\n\n{table}"
        )
    rule = "\n- at most one ad per category" if one_per_category else ""
    return (
        f"TASK: ad selection\nOBJECTIVE: maximize the sum of predicted CTR\nCONSTRAINTS:\n- exactly {picks} ads\n"
        f"- total cost <= {budget}\n- only ids from the catalog{rule}\nOUTPUT: JSON, e.g. {sample}\n"
        f"CATALOG ({described}):\n{table}"
    )


def ad_schema(picks: int) -> dict:
    ids = {"type": "array", "items": {"type": "integer", "minimum": 1}, "minItems": picks, "maxItems": picks,
           "uniqueItems": True}  # fmt: skip
    return {"type": "object", "properties": {"selected_ids": ids}, "required": ["selected_ids"]}


def ad_constraints(budget: int, picks: int, one_per_category: bool) -> list[dict]:
    return [
        {"id": "size_check", "celExpression": f"size(plan.selected_ids) == {picks}",
         "failureMessage": f"exactly {picks} ads must be selected"},
        {"id": "pool_check", "celExpression": "plan.selected_ids.all(i, i in ctx.pool)",
         "failureMessage": "every selected id must be in ctx.pool"},
        {"rulePack": "ad_selection",
         "params": {"budget": budget, "picks": picks, "one_per_category": one_per_category}},
    ]  # fmt: skip


# --------------------------------------------------------------------------------------------------
# Credit offers
# --------------------------------------------------------------------------------------------------

# The pack's default limits (services/deliberate/rule_packs/credit): an offer passes strictly under both.
MAX_PROBABILITY_OF_DEFAULT = 0.05
MAX_LOSS_GIVEN_DEFAULT = 0.4
# The grid an applicant's feasibility (and the reference plan) is searched on.
CREDIT_RATES = tuple(round(0.049 + 0.01 * k, 3) for k in range(11))  # 4.9 % … 14.9 %
CREDIT_TERMS = (12, 24, 36, 48, 60, 72, 84)
CREDIT_AMOUNT_STEP = 250
CREDIT_MIN_AMOUNT = 1000
DISCLOSURES = (
    credit.DISCLOSURE,
    "Lending is subject to status. The rate is fixed for the whole term. Missed payments may affect your credit "
    "rating.",
    "This offer is not binding until approved; the fixed rate applies for the full term and early repayment is "
    "free of charge.",
)
CREDIT_TEMPLATES = ("example", "prose", "brief")


def credit_instance(rng: random.Random, instance_id: str, split: str) -> Instance:
    applicant = feasible_applicant(rng)
    offers = rng.choice((2, 3, 3, 3))
    disclosure = rng.choice(DISCLOSURES)
    template = rng.choice(CREDIT_TEMPLATES)
    return Instance(
        case="credit",
        id=instance_id,
        split=split,
        prompt=credit_prompt(template, applicant, offers, disclosure),
        output_schema=credit_schema(offers),
        constraints=[{"rulePack": "credit"}],
        context={"applicant": applicant, "disclosure": disclosure},
        meta={
            "offers": offers,
            "template": template,
            "disclosure": DISCLOSURES.index(disclosure),
            "largest_safe_amount": largest_safe_offer(applicant).amount,
        },  # fmt: skip
    )


def feasible_applicant(rng: random.Random) -> dict:
    """An applicant some offers of the grid pass for (PD and LGD under the limits); drawn again until one does."""
    while True:
        income = rng.randrange(22_000, 180_001, 1000)
        applicant = {
            "annual_income": income,
            "monthly_debt_payments": int(round(rng.uniform(0, 0.3) * income / 12, -1)),
            "credit_score": rng.randint(560, 820),
            "collateral_value": 0 if rng.random() < 0.6 else int(round(rng.uniform(0.2, 1.5) * income, -3)),
        }
        if largest_safe_offer(applicant).amount >= CREDIT_MIN_AMOUNT + 2 * CREDIT_AMOUNT_STEP:
            return applicant


def offer_passes(applicant: dict, offer: Offer) -> bool:
    result = score(Applicant(**applicant), offer)
    return (result.probability_of_default < MAX_PROBABILITY_OF_DEFAULT
            and result.loss_given_default < MAX_LOSS_GIVEN_DEFAULT)  # fmt: skip


def largest_safe_amount(applicant: dict, rate: float, term: int) -> float:
    """The largest grid amount that passes at this rate and term (0 when none does): PD and LGD both grow with the
    amount, so the passing amounts are the grid's lowest ones."""
    best, amount = 0.0, CREDIT_MIN_AMOUNT
    while amount <= 4 * applicant["annual_income"] and offer_passes(applicant, Offer(amount, rate, term)):
        best, amount = amount, amount + CREDIT_AMOUNT_STEP
    return best


def largest_safe_offer(applicant: dict) -> Offer:
    """The grid offer of the largest amount that passes (the lowest rate always allows the most)."""
    rate = CREDIT_RATES[0]
    return max((Offer(largest_safe_amount(applicant, rate, term), rate, term) for term in CREDIT_TERMS),
               key=lambda offer: offer.amount)  # fmt: skip


def credit_prompt(template: str, applicant: dict, offers: int, disclosure: str) -> str:
    if template == "example":  # the worked example's wording (clients/python/deliberate_client/examples/credit.py)
        return (
            credit.prompt()
            .replace(json.dumps(credit.APPLICANT), json.dumps(applicant))
            .replace(credit.DISCLOSURE, disclosure)
            .replace(f"Propose {credit.OFFERS} ", f"Propose {offers} ")
        )
    example = json.dumps({"offers": [{"amount": 5000, "annual_rate": 0.079, "term_months": 36}], "disclosure": "..."})
    if template == "prose":
        collateral = (f"collateral worth {applicant['collateral_value']:,.0f} EUR" if applicant["collateral_value"]
                      else "no collateral")  # fmt: skip
        return (
            f"An applicant earns {applicant['annual_income']:,} EUR a year, pays "
            f"{applicant['monthly_debt_payments']:,.0f} EUR a month on existing debts, has a credit score of "
            f"{applicant['credit_score']} and {collateral}. "
            f"As the bank's lending officer, draft {offers} different personal loan offers (amount in EUR, yearly "
            "interest rate as a fraction such as 0.065, term in months). Only offers whose probability of default "
            "stays under 5 % and whose loss given default stays under 40 % are approved. The answer's "
            f'"disclosure" must contain this sentence word for word: "{disclosure}"\n'
            f"Reply with JSON like {example}, with {offers} offers."
        )
    return (
        f"Loan offers: {offers}, each different.\nApplicant: {json.dumps(applicant)} (income per year, debt payments "
        "per month)\nLimits: probability of default < 0.05, loss given default < 0.4\nFields per offer: amount, "
        f'annual_rate (fraction), term_months\nDisclosure (verbatim in "disclosure"): {disclosure}\n'
        f"Output: JSON like {example}"
    )


def credit_schema(offers: int) -> dict:
    schema = json.loads(json.dumps(credit.OUTPUT_SCHEMA))
    schema["properties"]["offers"]["minItems"] = schema["properties"]["offers"]["maxItems"] = offers
    return schema


# --------------------------------------------------------------------------------------------------
# Promotion plans
# --------------------------------------------------------------------------------------------------

# category → (sku prefix, product names, price range)
PRODUCT_LINES = {
    "grocery": ("GRO", ("Green tea", "Coffee beans", "Vanilla syrup", "Oat biscuits", "Olive oil", "Honey jar",
                        "Dark chocolate", "Basmati rice"), (2.0, 25.0)),
    "home": ("HOM", ("Ceramic mug", "French press", "Travel cup", "Linen towel", "Scented candle", "Glass jar set",
                     "Cushion cover"), (5.0, 40.0)),
    "appliances": ("APL", ("Electric kettle", "Coffee grinder", "Toaster", "Hand blender", "Milk frother"),
                   (20.0, 120.0)),
    "stationery": ("STA", ("Notebook", "Fountain pen", "Desk planner", "Marker set", "Sticky notes"), (1.5, 30.0)),
    "garden": ("GAR", ("Plant pot", "Watering can", "Seed kit", "Pruning shears", "Garden gloves"), (3.0, 45.0)),
    "beauty": ("BEA", ("Hand cream", "Lip balm", "Shower gel", "Face mask", "Bath salts"), (2.5, 35.0)),
}  # fmt: skip
CLAIMS = ("lowest price ever", "best price guaranteed", "cheapest anywhere", "risk-free", "free forever",
          "unbeatable deal", "half price everything", "guaranteed savings")  # fmt: skip
PROMOTION_TEMPLATES = ("example", "merchandiser", "checklist")
# A plan message that states no percentage and no claim (the reference plan's).
PLAIN_MESSAGE = "Selected favourites are on offer this week, while stocks last."


def promotion_instance(rng: random.Random, instance_id: str, split: str) -> Instance:
    categories = rng.sample(sorted(PRODUCT_LINES), rng.randint(2, 4))
    floor = rng.choice((10, 15, 20, 25))
    plan_floor = floor + rng.choice((5, 10, 15))
    products = product_table(rng, categories, healthy_margin=plan_floor + 5)
    present = sorted({p["category"] for p in products})
    uncapped = present[-1] if len(present) > 2 and rng.random() < 0.3 else None  # a category without a cap
    policy = {
        "min_margin_percent": floor,
        "min_plan_margin_percent": plan_floor,
        "max_discount_percent": {c: rng.choice((10, 15, 20, 25, 30, 40, 50)) for c in present if c != uncapped},
        "forbidden_claims": rng.sample(CLAIMS, rng.randint(2, 5)),
    }
    template = rng.choice(PROMOTION_TEMPLATES)
    return Instance(
        case="promotion",
        id=instance_id,
        split=split,
        prompt=promotion_prompt(template, products, policy),
        output_schema=promotion.output_schema(products),
        constraints=promotion.constraints(policy),
        context=promotion.context(products),
        meta={
            "products": len(products),
            "categories": len(present),
            "uncapped": uncapped,
            "template": template,
            "min_margin_percent": floor,
            "min_plan_margin_percent": plan_floor,
        },  # fmt: skip
    )


def product_table(rng: random.Random, categories: list[str], healthy_margin: float) -> list[dict]:
    """5–10 products of the given categories; the first three drawn keep a full-price margin of `healthy_margin`
    or more (above both floors), so a plan of them at full price is feasible."""
    products, skus = [], set()
    for k in range(rng.randint(5, 10)):
        category = rng.choice(categories)
        prefix, names, (low, high) = PRODUCT_LINES[category]
        sku = f"{prefix}-{rng.randrange(10, 100)}"
        while sku in skus:
            sku = f"{prefix}-{rng.randrange(10, 100)}"
        skus.add(sku)
        price = round(rng.uniform(low, high), 2)
        margin = rng.uniform(healthy_margin, 65) if k < 3 else rng.uniform(8, 65)
        products.append({
            "sku": sku,
            "name": rng.choice(names),
            "category": category,
            "stock": rng.randint(5, 300),
            "unit_cost": round(price * (1 - margin / 100), 2),
            "price": price,
        })  # fmt: skip
    rng.shuffle(products)
    return products


def promotion_prompt(template: str, products: list[dict], policy: dict) -> str:
    if template == "example":  # the worked example's wording
        return promotion.prompt(products, policy)
    caps = ", ".join(f"{category} {cap}%" for category, cap in policy["max_discount_percent"].items()) or "none"
    claims = ", ".join(f'"{claim}"' for claim in policy["forbidden_claims"])
    sample = {"items": [{"sku": products[0]["sku"], "discount_percent": 10, "quantity": 20}], "message": "..."}
    table = promotion.product_table(products)
    if template == "merchandiser":
        return (
            f"You are the store's merchandiser. Build next week's promotion from the products below: pick "
            f"{promotion.MIN_ITEMS}-{promotion.MAX_ITEMS} of them, give each a discount (percent) and a quantity no "
            f"larger than its stock, and add a customer message of at most {promotion.MAX_MESSAGE_CHARS} characters. "
            f"Every promoted product must keep a gross margin of at least {policy['min_margin_percent']}% after its "
            f"discount, and all promoted units together at least {policy['min_plan_margin_percent']}%. Discount caps "
            f"by category: {caps}. Never write these claims: {claims}; never advertise more than the largest discount "
            f"you give. JSON only, like {json.dumps(sample)}.\n"
            f"sku | name | category | stock | unit cost | price\n{table}"
        )
    return (
        f"Promotion plan checklist:\n1. {promotion.MIN_ITEMS} to {promotion.MAX_ITEMS} products from the table\n"
        f"2. quantity <= stock\n3. margin per product >= {policy['min_margin_percent']}% at the discounted price\n"
        f"4. margin of the whole plan >= {policy['min_plan_margin_percent']}%\n5. discount caps: {caps}\n"
        f"6. message (<= {promotion.MAX_MESSAGE_CHARS} chars) without: {claims}\n"
        f"Answer: JSON {json.dumps(sample)}\nTable (sku | name | category | stock | unit cost | price):\n{table}"
    )


GENERATORS = {"ads": ad_instance, "credit": credit_instance, "promotion": promotion_instance}
