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
    "bank's limits. A smaller amount or a lower rate lowers both. Call it at most 200 times. An offer's monthly "
    "payment is amount * r / (1 - (1 + r) ** -term_months), where r = annual_rate / 12."
)
# A made-up question of another shape than any evaluated request (one offer, its rate and term given): it shows
# how to call score_offer, as a function a program can call again, not what to answer (an example with the
# evaluation's shape was copied as it stood and answered every request of it; an example with a made-up payment cap
# had its cap copied into every program, whose offers then fell to a quarter of the old ones: issue 55).
SCORE_OFFER_EXAMPLE = """Example. Question: propose 1 loan offer at the annual rate 0.069 over 60 months, as large as \
the risk model approves (amounts rounded to 1,000); "disclosure" carries the given sentence. The data: \
ctx["applicant"], a dict; ctx["disclosure"], a text.
```python
import json

applicant = ctx["applicant"]  # keys: annual_income, monthly_debt_payments, credit_score, collateral_value
disclosure = ctx["disclosure"]


# the first amount the risk model approves at this rate and term, from twice the yearly income down; 0 when none is
def largest_approved(rate, term):
    amount = int(2 * applicant["annual_income"] / 1000) * 1000
    while amount >= 1000:
        if score_offer(amount, rate, term)["approved"]:
            return amount
        amount = int(amount * 0.9 / 1000) * 1000  # each try 10 % smaller
    return 0


offers = []
amount = largest_approved(0.069, 60)  # the question's rate and term
if amount > 0:
    offers.append({"amount": amount, "annual_rate": 0.069, "term_months": 60})
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
