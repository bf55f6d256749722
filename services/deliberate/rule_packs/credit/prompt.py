"""The credit pack's decision prompt (`CreditPack.decision_prompt`): the risk model as a
decision program's simulator, the seed's "call the built-in simulator to try it out". The program searches the
offers the model approves with `score_offer` (`CreditPack.score_offer`), and the risk check still scores the offers
it prints."""

from deliberate.decisions.prompts import DecisionPrompt

SCORE_OFFER = "score_offer"
SCORE_OFFER_HELP = (
    "`score_offer(amount, annual_rate, term_months)` is already defined: it asks the bank's risk model about one "
    'loan offer to this applicant and returns a dict {"probability_of_default": <float>, '
    '"loss_given_default": <float>, "approved": <bool>}; "approved" is True only when both are under the '
    "bank's limits. A smaller amount or a lower rate lowers both. Call it at most 200 times."
)
# A made-up question asking for 2 offers: the pattern a small model copies — read the applicant from ctx, the number
# of offers from the question (a list of terms written for the example's 2 was copied as it stood), search each
# offer's amount with score_offer, fill up with smaller amounts where too few terms are approved (a weak applicant's
# long terms never are), print the JSON.
SCORE_OFFER_EXAMPLE = """Example. Question: propose 2 different loan offers, each as large as the risk model \
approves; "disclosure" carries the given sentence. The data: ctx["applicant"], a dict; ctx["disclosure"], a text.
```python
import json

applicant = ctx["applicant"]  # keys: annual_income, monthly_debt_payments, credit_score, collateral_value
disclosure = ctx["disclosure"]
count = 2  # the number of offers the question asks for (the answer's list of offers holds exactly 2)

# each offer a different term; for each term the largest amount the risk model approves, trying high to low
offers = []
for term in [36, 60, 24, 48, 72, 12, 84]:
    if len(offers) == count:
        break
    amount = 2 * applicant["annual_income"]
    while amount >= 500:
        if score_offer(amount, 0.059, term)["approved"]:
            offers.append({"amount": amount, "annual_rate": 0.059, "term_months": term})
            break
        amount = int(amount * 0.8 / 100) * 100
# fewer terms approved than offers asked: a smaller amount of an approved offer is approved too
while offers and len(offers) < count:
    last = offers[-1]
    offers.append({"amount": int(last["amount"] * 0.8 / 100) * 100, "annual_rate": 0.059,
                   "term_months": last["term_months"]})
answer = {"offers": offers, "disclosure": disclosure}
print(json.dumps(answer))
```"""
SCORE_OFFER_STRATEGIES = (
    "As the example does: count is the number of offers the question asks for; each offer a different term, and "
    "for each term the largest amount score_offer approves, trying amounts from high to low.",
    "As many offers as the question asks for, each a different annual_rate (such as 0.059, 0.079, 0.099); for "
    "each rate the largest amount score_offer approves, trying amounts from high to low.",
    "As many offers as the question asks for, each a different term; for each, start from a small amount "
    "score_offer approves and raise it step by step while it stays approved.",
)

DECISION_PROMPT = DecisionPrompt(SCORE_OFFER_HELP, SCORE_OFFER_EXAMPLE, SCORE_OFFER_STRATEGIES)
