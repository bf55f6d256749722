"""Credit offers: draft 3 loan offers (amount, yearly rate, term) for one applicant. The Verifier's `credit` rule
pack scores each with the risk-model service — probability of default below 0.05, loss given default below 0.4 —
and requires the regulator's disclosure sentence, verbatim, in the answer (docs/business-cases.md)."""

from __future__ import annotations

import json

OFFERS = 3

APPLICANT = {"annual_income": 60000, "monthly_debt_payments": 500, "credit_score": 690, "collateral_value": 0}

DISCLOSURE = (
    "Credit is subject to status and affordability; the rates shown are fixed for the term and your home or other "
    "assets are not at risk."
)

OUTPUT_SCHEMA = {
    "type": "object",
    "properties": {
        "offers": {
            "type": "array",
            "minItems": OFFERS,
            "maxItems": OFFERS,
            "items": {
                "type": "object",
                "properties": {
                    "amount": {"type": "number", "exclusiveMinimum": 0},
                    "annual_rate": {"type": "number", "minimum": 0, "maximum": 1},
                    "term_months": {"type": "integer", "minimum": 1, "maximum": 480},
                },
                "required": ["amount", "annual_rate", "term_months"],
            },
        },
        "disclosure": {"type": "string"},
    },
    "required": ["offers", "disclosure"],
}

# The request's declared constraints, in the protobuf JSON mapping of deliberate.common.v1.Constraint: the pack
# reads the applicant and the disclosure from the context.
CONSTRAINTS = [{"rulePack": "credit"}]


def context() -> dict:
    return {"applicant": dict(APPLICANT), "disclosure": DISCLOSURE}


def prompt() -> str:
    return (
        f"You are a bank's lending officer. Propose {OFFERS} different personal loan offers for this applicant: "
        f"{json.dumps(APPLICANT)} (amounts in EUR, income per year, debt payments per month). Each offer has an "
        "amount, a yearly interest rate as a fraction (0.089 for 8.9 %) and a term in months. The bank accepts "
        "only offers with a probability of default below 5 % and a loss given default below 40 %: keep the "
        "amounts well under half the yearly income, rates under 12 % and terms at most 60 months. Copy this "
        f'disclosure sentence verbatim into "disclosure": "{DISCLOSURE}"\n'
        'Answer with JSON like {"offers": [{"amount": 8000, "annual_rate": 0.079, "term_months": 36}, ...], '
        '"disclosure": "..."}.'
    )
