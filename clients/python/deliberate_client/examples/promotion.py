"""Promotion plan: choose discounts and quantities for a week's promotion from a product table, within stock,
above a gross-margin floor per product and for the whole plan, under each category's maximum discount, with a
short customer message that makes no forbidden claim.

The table travels in the request's context (`products`), the policy in the `promotion` rule pack's params; the
Verifier recomputes every margin from the table and never trusts figures written in a draft.
"""

from __future__ import annotations

FIELDS = ("sku", "name", "category", "stock", "unit_cost", "price")
# Units in stock; unit cost and regular price in one currency, two decimals.
PRODUCTS = [
    dict(zip(FIELDS, row, strict=True))
    for row in [
        ("TEA-100", "Green tea, 100 bags", "grocery", 240, 2.10, 4.50),
        ("COF-1KG", "Coffee beans, 1 kg", "grocery", 60, 9.80, 16.00),
        ("SYR-25", "Vanilla syrup, 25 cl", "grocery", 90, 2.90, 6.50),
        ("MUG-12", "Ceramic mug", "home", 150, 3.20, 8.00),
        ("PRS-08", "French press, 8 cups", "home", 80, 7.40, 19.00),
        ("CUP-35", "Travel cup, 35 cl", "home", 200, 4.10, 12.00),
        ("KET-17", "Electric kettle, 1.7 l", "appliances", 35, 18.50, 34.00),
        ("GRD-01", "Burr coffee grinder", "appliances", 12, 41.00, 69.00),
    ]
]

# The policy the plan must follow (the `promotion` pack's params; docs/business-cases.md#promotion-plans).
POLICY = {
    "min_margin_percent": 20,  # every promoted product keeps at least this gross margin at its discounted price
    "min_plan_margin_percent": 30,  # and the plan as a whole, over all promoted units
    "max_discount_percent": {"grocery": 25, "home": 40, "appliances": 15},
    "forbidden_claims": ["lowest price ever", "best price guaranteed", "cheapest anywhere", "risk-free"],
}
MIN_ITEMS, MAX_ITEMS = 3, 5  # products per plan
MAX_MESSAGE_CHARS = 160  # a chat message; short enough for a small model to close its JSON


def product_table(products: list[dict] | None = None) -> str:
    """The table as compact prompt lines: `sku | name | category | stock | unit cost | price`."""
    return "\n".join(
        f"{p['sku']} | {p['name']} | {p['category']} | {p['stock']} | {p['unit_cost']:.2f} | {p['price']:.2f}"
        for p in products or PRODUCTS
    )


def prompt(products: list[dict] | None = None, policy: dict | None = None) -> str:
    policy = policy or POLICY
    caps = ", ".join(f"{category} {cap}%" for category, cap in policy["max_discount_percent"].items())
    claims = ", ".join(f'"{claim}"' for claim in policy["forbidden_claims"])
    return (
        f"Plan this week's promotion: choose {MIN_ITEMS} to {MAX_ITEMS} products, a discount in percent and a "
        "quantity for each, and write a short customer message (one or two sentences). Rules: the quantity must "
        f"not exceed the stock; each product must keep a gross margin of at least {policy['min_margin_percent']}% "
        f"at its discounted price, and the whole plan at least {policy['min_plan_margin_percent']}%; maximum discount "
        f"per category: {caps}; the message must not claim {claims}, and must not advertise a larger discount "
        "than the plan gives. "
        'Answer with JSON like {"items": [{"sku": "TEA-100", "discount_percent": 10, "quantity": 50}], '
        '"message": "…"}.\n'
        f"Products, one per line (sku | name | category | stock | unit cost | price):\n{product_table(products)}"
    )


def output_schema(products: list[dict] | None = None) -> dict:
    products = products or PRODUCTS
    item = {
        "type": "object",
        "properties": {
            "sku": {"enum": [p["sku"] for p in products]},
            "discount_percent": {"type": "number", "minimum": 0, "exclusiveMaximum": 100},
            "quantity": {"type": "integer", "minimum": 1},
        },
        "required": ["sku", "discount_percent", "quantity"],
        "additionalProperties": False,  # keeps a constrained decoder from wandering into keys of its own
    }
    return {
        "type": "object",
        "properties": {
            "items": {"type": "array", "items": item, "minItems": MIN_ITEMS, "maxItems": MAX_ITEMS},
            "message": {"type": "string", "minLength": 1, "maxLength": MAX_MESSAGE_CHARS},
        },
        "required": ["items", "message"],
        "additionalProperties": False,
    }


def constraints(policy: dict | None = None) -> list[dict]:
    """The request's declared constraints (the protobuf JSON mapping of deliberate.common.v1.Constraint)."""
    return [{"rulePack": "promotion", "params": policy or POLICY}]


def context(products: list[dict] | None = None) -> dict:
    return {"products": products or PRODUCTS}
