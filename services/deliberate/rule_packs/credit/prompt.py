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
# A made-up question of another shape than any evaluated request (one offer, its rate and term given, a cap on the
# monthly payment, amounts in steps): it shows how to call score_offer and check a rule in code, not what to answer
# (an example with the evaluation's shape was copied as it stood and answered every request of it; issue 55).
SCORE_OFFER_EXAMPLE = """Example. Question: propose 1 loan offer at the annual rate 0.069 over 60 months: the largest \
amount, in steps of 1,000, that the risk model approves and whose monthly payment is at most 30 % of the \
applicant's monthly income; "disclosure" carries the given sentence. The data: ctx["applicant"], a dict; \
ctx["disclosure"], a text.
```python
import json

applicant = ctx["applicant"]  # keys: annual_income, monthly_debt_payments, credit_score, collateral_value
disclosure = ctx["disclosure"]
rate, term = 0.069, 60  # the rate and the term the question gives
most_payment = 0.30 * applicant["annual_income"] / 12  # the question's cap on the monthly payment


def monthly_payment(amount, annual_rate, term_months):
    r = annual_rate / 12
    return amount * r / (1 - (1 + r) ** -term_months)


# from the largest amount the payment cap allows down, each try 10 % smaller, in steps of 1,000: the first one
# the risk model approves keeps every rule
offers = []
amount = int(most_payment / monthly_payment(1, rate, term) / 1000) * 1000
while amount >= 1000:
    if monthly_payment(amount, rate, term) <= most_payment and score_offer(amount, rate, term)["approved"]:
        offers.append({"amount": amount, "annual_rate": rate, "term_months": term})
        break
    amount = int(amount * 0.9 / 1000) * 1000
answer = {"offers": offers, "disclosure": disclosure}
print(json.dumps(answer))
```"""
SCORE_OFFER_STRATEGIES = (
    "As the example does: search each offer's amount from high to low with score_offer and check every rule of the "
    "question in code; give the answer as many offers as it asks for, each different (another term or rate).",
    "As many offers as the question asks for, each a different annual_rate (such as 0.059, 0.079, 0.099); for "
    "each rate the largest amount score_offer approves that keeps the question's rules, trying high to low.",
    "As many offers as the question asks for, each a different term; for each, start from a small amount "
    "score_offer approves and raise it step by step while it stays approved and keeps the question's rules.",
)

DECISION_PROMPT = DecisionPrompt(SCORE_OFFER_HELP, SCORE_OFFER_EXAMPLE, SCORE_OFFER_STRATEGIES)
