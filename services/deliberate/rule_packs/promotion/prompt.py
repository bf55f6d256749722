"""The promotion pack's decision prompt (`PromotionPack.decision_prompt`): how a decision
program computes a plan from the table and the policy in `ctx`, with the pack's margin arithmetic as a function it
calls, `largest_discount` (`PromotionPack.largest_discount`), as the credit pack gives `score_offer`. The prompt
replaces the exact engine's selection example, which promotion programs copied without fitting it (recorded:
`best_rows` over the products with no margin in its formulation)."""

from deliberate.decisions.prompts import DecisionPrompt

LARGEST_DISCOUNT = "largest_discount"
PROMOTION_HELP = (
    "`largest_discount(sku, min_margin_percent=None)` is already defined: it returns the largest whole discount, "
    "in percent, at which that product keeps at least min_margin_percent of margin, no more than its category's "
    "cap in ctx; by default min_margin_percent is the higher of ctx's margin floors, so items at such discounts "
    "keep both floors. It returns None when even the full price misses that margin. At a discount of d %, a "
    "product's margin is (price * (1 - d / 100) - unit_cost) / (price * (1 - d / 100)); the plan's is the same "
    "over the revenue and cost of all its items. A percentage the message states must not exceed the largest "
    "discount of the plan."
)
# A made-up question of another shape than any evaluated request (a clearance: one discount for all, at most one
# product per category, half the stock, one margin floor): it shows how to call largest_discount, not what to
# answer (an example with the evaluation's shape answered every request of it; issue 55).
PROMOTION_EXAMPLE = """Example. Question: a clearance of at most 3 products from the table, all at the same 15 % \
discount, at most one product per category, the quantity of each half its stock; every product keeps a margin of at \
least ctx["min_margin_percent"] % at the discounted price; the products with the most stock first; a short message \
without the forbidden claims. The data: ctx["products"], a list of dicts; ctx["min_margin_percent"] = 20; \
ctx["forbidden_claims"], a list of texts.
```python
import json

products = ctx["products"]  # a list of 6 dicts; each dict has the keys category, name, price, sku, stock, unit_cost
forbidden_claims = ctx["forbidden_claims"]  # a list of 3 strs
discount = 15  # the question's one discount
most = 3  # the most products the question allows

items, categories = [], set()
for p in sorted(products, key=lambda p: p["stock"], reverse=True):  # the most stock first
    if len(items) == most or p["category"] in categories or p["stock"] < 2:
        continue  # the count reached, one per category already, too little stock to halve
    allowed = largest_discount(p["sku"])  # the most its margin floor and its category's cap allow, or None
    if allowed is not None and allowed >= discount:
        items.append({"sku": p["sku"], "discount_percent": discount, "quantity": p["stock"] // 2})
        categories.add(p["category"])
answer = {"items": items, "message": "A few favourites are reduced this week, while stocks last."}
print(json.dumps(answer))
```"""
PROMOTION_STRATEGIES = (
    "As the example does: ask largest_discount which discounts each product's floors and cap allow, keep only the "
    "products and discounts that meet every rule of the question, then take the most profitable.",
    "Give each product the discount largest_discount returns (skip a None), then choose products in order of gross "
    "profit while the plan keeps every rule of the question.",
    "Build the plan with largest_discount, then check each rule of the question in code on the chosen items "
    "(quantity, count, category, margin of the plan) and drop an item that breaks one before printing.",
)

DECISION_PROMPT = DecisionPrompt(PROMOTION_HELP, PROMOTION_EXAMPLE, PROMOTION_STRATEGIES)
