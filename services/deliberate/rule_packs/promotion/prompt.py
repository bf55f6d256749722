"""The promotion pack's decision prompt (`PromotionPack.decision_prompt`): how a decision
program computes a plan from the table and the policy in `ctx`. The pack defines no function for its programs; the
prompt replaces the exact engine's selection example, which promotion programs copied without fitting it
(recorded: `best_rows` over the products with no margin in its formulation)."""

from deliberate.decisions.prompts import DecisionPrompt

PROMOTION_HELP = (
    "At a discount of d %, a product's margin is (price * (1 - d / 100) - unit_cost) / (price * (1 - d / 100)); "
    "the plan's margin is the same over the revenue and cost of all its items. A product whose own margin is at "
    "least the plan's floor keeps the plan's margin there too. A percentage the message states must not exceed "
    "the largest discount of the plan."
)
# A made-up question (2 to 4 products, its own floors): read the table and the policy from ctx, the number of
# products from the question, compute each discount from the margin formula, print the JSON.
PROMOTION_EXAMPLE = """Example. Question: a promotion of 2 to 4 products from the table; quantity at most the \
stock; margin per product >= 20 % and of the whole plan >= 25 % at the discounted prices; each discount within its \
category's cap; a short message without the forbidden claims. The data: ctx["products"], a list of dicts; \
ctx["max_discount_percent"], a dict; ctx["min_margin_percent"] = 20; ctx["min_plan_margin_percent"] = 25; \
ctx["forbidden_claims"], a list of texts.
```python
import json

products = ctx["products"]  # a list of 6 dicts; each dict has the keys category, name, price, sku, stock, unit_cost
forbidden_claims = ctx["forbidden_claims"]  # a list of 3 strs
max_discount_percent = ctx["max_discount_percent"]  # keys: food, toys
min_margin_percent = ctx["min_margin_percent"]  # 20
min_plan_margin_percent = ctx["min_plan_margin_percent"]  # 25
most = 4  # the most products the question allows

# the higher of the two floors for every product: then the whole plan's margin is above both floors
floor = max(min_margin_percent, min_plan_margin_percent)
candidates = []
for p in products:
    # the largest discount that keeps the margin at the floor: price * (1 - d / 100) * (1 - floor / 100) >= unit_cost
    largest = 100 * (1 - p["unit_cost"] / (p["price"] * (1 - floor / 100)))
    cap = max_discount_percent.get(p["category"], 99)  # a category without a cap
    discount = int(min(largest, cap))
    if discount >= 1 and p["stock"] >= 1:
        profit = (p["price"] * (1 - discount / 100) - p["unit_cost"]) * p["stock"]
        candidates.append({"profit": profit, "sku": p["sku"], "discount_percent": discount, "quantity": p["stock"]})
candidates.sort(key=lambda c: c["profit"], reverse=True)  # the most gross profit first
items = [{"sku": c["sku"], "discount_percent": c["discount_percent"], "quantity": c["quantity"]} for c in candidates]
answer = {"items": items[:most], "message": "Selected favourites are on offer this week, while stocks last."}
print(json.dumps(answer))
```"""
PROMOTION_STRATEGIES = (
    "As the example does: each product at the largest whole discount that keeps its margin at the higher of the two "
    "floors and within its category's cap, quantity = its stock; the most profitable first, as many as the question "
    "allows.",
    "As the example does, then check each rule of the question in code on the chosen items (quantity, cap, margin "
    "per product, margin of the plan) and drop an item that breaks one before printing.",
)

DECISION_PROMPT = DecisionPrompt(PROMOTION_HELP, PROMOTION_EXAMPLE, PROMOTION_STRATEGIES)
