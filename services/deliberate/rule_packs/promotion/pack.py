"""The promotion pack: every figure recomputed from the request's product table, never taken from the draft.

A plan is `{"items": [{"sku", "discount_percent", "quantity"}, …], "message": "…"}`. The table (`products`)
and the policy (`min_margin_percent`, `min_plan_margin_percent`, `max_discount_percent` per category,
`forbidden_claims`) come from the request's context or the constraint's params. Gross margin is the share of
the discounted price left after the unit cost, `(price·(1 − d/100) − unit_cost) / (price·(1 − d/100))`, per
product; the plan's is the same over its whole promoted quantity (revenue-weighted). Arithmetic is exact
(fractions of the decimals as written), so a plan exactly at a floor or a cap passes.

Every failure names the product's sku, the figures, by how much the plan misses and the item as the check would
admit it (`GRD-01: discount 20% is 5 points over the appliances cap 15%, so use {"sku": "GRD-01",
"discount_percent": 15, "quantity": 12}`), or that the product cannot be promoted at all: the re-draft's feedback.
A check whose policy the request does not give abstains, saying so, rather than passing.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property

from pydantic import BaseModel, ConfigDict, Field, StrictInt, field_validator

from deliberate.decisions.packs import Abstained, CheckResult, Quality, RulePack, check

from .prompt import DECISION_PROMPT, LARGEST_DISCOUNT

MAX_REPORTED = 5  # failures listed per message; the rest are counted
LARGEST_WHOLE_DISCOUNT = 99  # an item's discount_percent is under 100 (a product that costs nothing allows any)
# A percentage the message advertises: "25%", "25 %", "25 percent", "12.5% off".
ADVERTISED_PERCENT = re.compile(r"(\d+(?:[.,]\d+)?)\s*(?:%|percent\b|per cent\b)", re.IGNORECASE)


class Product(BaseModel):
    model_config = ConfigDict(extra="ignore")
    sku: str = Field(min_length=1)
    name: str = ""
    category: str = Field(min_length=1)
    stock: StrictInt = Field(ge=0)
    unit_cost: float = Field(ge=0)
    price: float = Field(gt=0)


class PromotionItem(BaseModel):
    model_config = ConfigDict(extra="ignore")
    sku: str
    discount_percent: float = Field(ge=0, lt=100)
    quantity: StrictInt = Field(ge=1)


class PromotionPlan(BaseModel):
    model_config = ConfigDict(extra="ignore")
    items: list[PromotionItem] = Field(min_length=1)
    message: str = Field(min_length=1)

    @field_validator("items")
    @classmethod
    def each_sku_once(cls, items: list[PromotionItem]) -> list[PromotionItem]:
        skus = [item.sku for item in items]
        repeated = sorted({sku for sku in skus if skus.count(sku) > 1})
        if repeated:
            raise ValueError(f"skus listed more than once: {repeated}")
        return items


class PromotionParams(BaseModel):
    model_config = ConfigDict(extra="ignore")
    products: list[Product] = Field(min_length=1)
    min_margin_percent: float | None = Field(default=None, lt=100)  # floor for every promoted product
    min_plan_margin_percent: float | None = Field(default=None, lt=100)  # floor for the plan as a whole
    max_discount_percent: dict[str, float] = {}  # category → cap; a category not listed has none
    forbidden_claims: list[str] = []  # phrases the message must not contain (case, punctuation ignored)

    @field_validator("products")
    @classmethod
    def each_sku_once(cls, products: list[Product]) -> list[Product]:
        skus = [product.sku for product in products]
        repeated = sorted({sku for sku in skus if skus.count(sku) > 1})
        if repeated:
            raise ValueError(f"skus listed more than once: {repeated}")
        return products

    @field_validator("forbidden_claims")
    @classmethod
    def claims_have_words(cls, claims: list[str]) -> list[str]:
        empty = [claim for claim in claims if not normalized(claim).strip()]
        if empty:
            raise ValueError(f"claims without a letter or digit: {empty}")
        return claims


@dataclass(frozen=True)
class Line:
    """One promoted product with its figures, exact."""

    item: PromotionItem
    product: Product
    discount: Fraction
    unit_price: Fraction  # the discounted price
    revenue: Fraction
    cost: Fraction

    @classmethod
    def of(cls, item: PromotionItem, product: Product) -> Line:
        discount = exact(item.discount_percent)
        unit_price = exact(product.price) * (1 - discount / 100)
        cost = exact(product.unit_cost) * item.quantity
        return cls(item, product, discount, unit_price, unit_price * item.quantity, cost)

    @property
    def sku(self) -> str:
        return self.item.sku

    @property
    def margin_percent(self) -> Fraction:
        return margin_percent(self.revenue, self.cost)


# What a check says when a soft `sku_check` let through a plan none of whose skus is in the table.
NO_KNOWN_SKU = Abstained("no sku of the plan is in the product table")


class PromotionPack(RulePack):
    name = "promotion"
    answer_model = PromotionPlan
    params_model = PromotionParams
    # The policy is request data a decision program checks its plan against (ctx["max_discount_percent"], …).
    data_params = ("min_margin_percent", "min_plan_margin_percent", "max_discount_percent", "forbidden_claims")
    decision_prompt = DECISION_PROMPT  # the margin formula and a worked plan, in place of the exact engine's example

    @cached_property
    def products(self) -> dict[str, Product]:
        return {product.sku: product for product in self.params.products}

    def lines(self, plan: PromotionPlan) -> list[Line]:
        """The plan's items whose sku is in the table (`sku_check` reports the others)."""
        return [Line.of(item, self.products[item.sku]) for item in plan.items if item.sku in self.products]

    def quality(self, answer: PromotionPlan) -> Quality:
        """The plan's gross margin in currency, Σ quantity·(discounted price − unit cost); no bound computed."""
        revenue, cost, _ = totals(self.lines(answer))
        return Quality("gross margin", float(revenue - cost))

    def decision_functions(self) -> dict:
        return {LARGEST_DISCOUNT: self.largest_discount}

    def largest_discount(self, sku, min_margin_percent=None) -> int | None:
        """What `largest_discount` returns in a decision program: the largest whole discount, in percent, at which
        the product keeps at least `min_margin_percent` of margin (by default the higher of the request's two
        floors, so a plan of such items keeps both), no more than its category's cap; None when even its full
        price misses that margin. The pack's own arithmetic (`margin_check`), as a function, not a plan."""
        if not isinstance(sku, str) or sku not in self.products:
            raise KeyError(f"{LARGEST_DISCOUNT}: {sku!r} is not a sku of the product table")
        if min_margin_percent is None:
            floors = (self.params.min_margin_percent, self.params.min_plan_margin_percent)
            min_margin_percent = max((floor for floor in floors if floor is not None), default=0)
        if isinstance(min_margin_percent, bool) or not isinstance(min_margin_percent, int | float):
            raise TypeError(f"{LARGEST_DISCOUNT}: min_margin_percent must be a number, not {min_margin_percent!r}")
        if not min_margin_percent < 100:
            raise ValueError(f"{LARGEST_DISCOUNT}: min_margin_percent must be under 100, not {min_margin_percent}")
        product = self.products[sku]
        largest = largest_discount_exact(product, exact(min_margin_percent))
        if largest < 0:
            return None
        cap = self.params.max_discount_percent.get(product.category, LARGEST_WHOLE_DISCOUNT)
        return min(math.floor(largest), math.floor(exact(cap)), LARGEST_WHOLE_DISCOUNT)

    @check("sku_check")
    def skus_exist(self, plan: PromotionPlan) -> CheckResult:
        unknown = [item.sku for item in plan.items if item.sku not in self.products]
        if unknown:
            return False, f"skus not in the product table: {listed(unknown)}"
        return True, f"all {len(plan.items)} skus are in the product table"

    @check("stock_check")
    def within_stock(self, plan: PromotionPlan) -> CheckResult:
        lines = self.lines(plan)
        if not lines:
            return NO_KNOWN_SKU
        over = [
            f"{x.sku}: quantity {x.item.quantity} is {x.item.quantity - x.product.stock} over the stock"
            f" {x.product.stock}, so {stock_repair(x)}"
            for x in lines
            if x.item.quantity > x.product.stock
        ]
        if over:
            return False, listed(over)
        return True, f"{len(lines)} products within stock ({sum(x.item.quantity for x in lines)} units)"

    @check("discount_cap_check")
    def within_discount_caps(self, plan: PromotionPlan) -> CheckResult:
        caps = self.params.max_discount_percent
        capped = [x for x in self.lines(plan) if x.product.category in caps]
        if not capped:
            return Abstained("no maximum discount given for the plan's categories")
        over = []
        for x in capped:
            cap = exact(caps[x.product.category])
            if x.discount > cap:
                gap = points(x.discount - cap)
                over.append(
                    f"{x.sku}: discount {fmt(x.discount)}% is {gap} over the {x.product.category} cap {fmt(cap)}%,"
                    f" so {repaired(x, discount_percent=cap)}"
                )
        if over:
            return False, listed(over)
        return True, f"{len(capped)} discounts within their category's cap"

    @check("margin_check")
    def product_margins(self, plan: PromotionPlan) -> CheckResult:
        floor = self.params.min_margin_percent
        if floor is None:
            return Abstained("no min_margin_percent given")
        lines = self.lines(plan)
        if not lines:
            return NO_KNOWN_SKU
        under = [
            f"{x.sku}: margin {fmt_below(x.margin_percent, floor)}% is {points(exact(floor) - x.margin_percent)} under"
            f" the floor {fmt(floor)}% (price {money(x.product.price)} −{fmt(x.discount)}% = {money(x.unit_price)},"
            f" unit cost {money(x.product.unit_cost)}), so {margin_repair(x, exact(floor))}"
            for x in lines
            if x.margin_percent < exact(floor)
        ]
        if under:
            return False, listed(under)
        lowest = min(lines, key=lambda x: x.margin_percent)
        return True, f"every margin >= {fmt(floor)}% (lowest {lowest.sku} {fmt(lowest.margin_percent, 1)}%)"

    @check("plan_margin_check")
    def plan_margin(self, plan: PromotionPlan) -> CheckResult:
        floor = self.params.min_plan_margin_percent
        if floor is None:
            return Abstained("no min_plan_margin_percent given")
        lines = self.lines(plan)
        if not lines:
            return NO_KNOWN_SKU
        revenue, cost, margin = totals(lines)
        figures = f"revenue {money(revenue)}, cost {money(cost)}"
        if margin < exact(floor):
            gap = points(exact(floor) - margin)
            return False, f"plan margin {fmt_below(margin, floor)}% is {gap} under the floor {fmt(floor)}% ({figures})"
        return True, f"plan margin {fmt(margin, 1)}% >= {fmt(floor)}% ({figures})"

    @check("claims_check")
    def no_forbidden_claims(self, plan: PromotionPlan) -> CheckResult:
        claims = self.params.forbidden_claims
        if not claims:
            return Abstained("no forbidden_claims given")
        message = normalized(plan.message)
        made = [claim for claim in claims if normalized(claim) in message]
        if made:
            return False, f"the message makes forbidden claims: {listed([repr(c) for c in made])}"
        return True, f"none of {len(claims)} forbidden claims in the message"

    @check("advertised_discount_check")
    def message_discounts_are_offered(self, plan: PromotionPlan) -> CheckResult:
        """A percentage in the message must not exceed the largest discount the plan gives (no "50% off" on
        a plan whose best offer is 20 %)."""
        advertised = [exact(m.replace(",", ".")) for m in ADVERTISED_PERCENT.findall(plan.message)]
        if not advertised:
            return Abstained("the message states no percentage")
        lines = self.lines(plan)
        if not lines:
            return NO_KNOWN_SKU
        best = max(lines, key=lambda x: x.discount)
        claimed = max(advertised)
        largest = f"{best.sku} {fmt(best.discount)}%"
        if claimed > best.discount:
            return False, f"the message advertises {fmt(claimed)}% but the largest discount is {largest}"
        return True, f"advertised {fmt(claimed)}% <= the largest discount, {largest}"

    @check("plan_total", substantive=False)
    def report_totals(self, plan: PromotionPlan) -> CheckResult:
        """Always passes: records the plan's true totals so people and the Scheduler can compare plans."""
        lines = self.lines(plan)
        if not lines:
            return NO_KNOWN_SKU
        revenue, cost, margin = totals(lines)
        units = sum(x.item.quantity for x in lines)
        return True, (
            f"{len(lines)} products, {units} units, revenue {money(revenue)}, gross profit {money(revenue - cost)}"
            f" ({fmt(margin, 1)}%)"
        )


def exact(value: float | str | Fraction) -> Fraction:
    """The decimal as written (0.1 is 1/10, not the nearest binary float)."""
    return value if isinstance(value, Fraction) else Fraction(str(value))


def margin_percent(revenue: Fraction, cost: Fraction) -> Fraction:
    return (revenue - cost) / revenue * 100 if revenue else Fraction(0)


def totals(lines: list[Line]) -> tuple[Fraction, Fraction, Fraction]:
    revenue = sum((x.revenue for x in lines), Fraction(0))
    cost = sum((x.cost for x in lines), Fraction(0))
    return revenue, cost, margin_percent(revenue, cost)


def fmt(value: float | Fraction, decimals: int = 2) -> str:
    """A percentage as people write it: 25, 12.5, 18.3."""
    return f"{float(value):.{decimals}f}".rstrip("0").rstrip(".")


def fmt_below(value: Fraction, floor: float) -> str:
    """`value`, under `floor`, with the decimals (1 to 4) it takes not to read as the floor: 18.3, 19.99."""
    for decimals in range(1, 4):
        if fmt(value, decimals) != fmt(floor, decimals):
            return fmt(value, decimals)
    return fmt(value, 4)


def points(gap: Fraction) -> str:
    """A difference of percentages: 5 points, 1.7 points, 1 point; never "0 points" for a real gap."""
    if gap < Fraction(1, 20):
        return "less than 0.1 points"
    shown = fmt(gap, 1)
    return f"{shown} {'point' if shown == '1' else 'points'}"


def largest_discount_exact(product: Product, floor: Fraction) -> Fraction:
    """The discount, in percent, at which the product's margin is exactly `floor` (negative when its full price
    misses it): the discounted price must reach unit_cost / (1 − floor/100)."""
    lowest_price = exact(product.unit_cost) / (1 - floor / 100)
    return 100 * (1 - lowest_price / exact(product.price))


def margin_repair(line: Line, floor: Fraction) -> str:
    """The item at the largest discount, rounded down to 0.01 %, at which its product's margin meets `floor`, or why
    the product cannot be promoted."""
    largest = largest_discount_exact(line.product, floor)
    if largest < 0:
        undiscounted = margin_percent(exact(line.product.price), exact(line.product.unit_cost))
        return (
            f"leave {line.sku} out: no discount meets the floor (undiscounted, its margin is {fmt(undiscounted, 1)}%)"
        )
    return repaired(line, discount_percent=Fraction(math.floor(largest * 100), 100))


def stock_repair(line: Line) -> str:
    """The item at the whole stock, or, with none in stock, that the product cannot be promoted (a quantity is >= 1)."""
    if line.product.stock == 0:
        return f"leave {line.sku} out: it is out of stock"
    return repaired(line, quantity=line.product.stock)


def repaired(line: Line, **change: int | float | Fraction) -> str:
    """`use {"sku": "GRD-01", "discount_percent": 15, "quantity": 12}`: the item with one field changed to what the
    check admits, written as the answer writes an item so a re-draft can copy it into its place."""
    item = line.item.model_dump() | change
    item["discount_percent"] = number(item["discount_percent"])
    return f"use {json.dumps(item)}"


def number(value: float | Fraction) -> int | float:
    """25, not 25.0 or Fraction(25); 23.43 as written."""
    return int(value) if value == int(value) else float(value)


def money(value: float | Fraction) -> str:
    return f"{float(value):.2f}"


def listed(items: list[str]) -> str:
    more = f" (+{len(items) - MAX_REPORTED} more)" if len(items) > MAX_REPORTED else ""
    return "; ".join(items[:MAX_REPORTED]) + more


def normalized(text: str) -> str:
    """Lower case, accents and punctuation dropped, words single-spaced and padded, so that
    "Lowest-price EVER!" contains " lowest price ever "."""
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().lower()
    return f" {' '.join(re.findall(r'[a-z0-9]+', text))} "
