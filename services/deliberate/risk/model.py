"""The deterministic credit-risk model: a logistic probability of default (PD) and a loss given default (LGD)
from the applicant and the offer. docs/business-cases.md gives the formula with worked figures.

    payment = amount · r / (1 − (1 + r)^−n)        r = annual_rate / 12, n = term_months (amount / n when r = 0)
    DTI     = (monthly_debt_payments + payment) / (annual_income / 12)
    LTI     = amount / annual_income
    z       = −5.0 + 3.0·DTI + 0.9·(700 − credit_score)/100 + 0.8·LTI + 0.1·term_months/12 + 6.0·annual_rate
    PD      = 1 / (1 + e^−z)
    LGD     = (0.25 + 0.25·min(LTI, 1)) · (1 − 0.8·min(collateral_value / amount, 1))

Every coefficient is a constant below; changing one means a new MODEL_VERSION.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MODEL_VERSION = "logistic-pd-lgd-1"

INTERCEPT = -5.0
DTI_WEIGHT = 3.0
SCORE_PIVOT = 700  # a score below it raises PD, above it lowers it
SCORE_WEIGHT_PER_100 = 0.9
LTI_WEIGHT = 0.8
TERM_WEIGHT_PER_YEAR = 0.1
RATE_WEIGHT = 6.0  # a higher rate selects riskier borrowers and raises the payment burden

UNSECURED_LGD_FLOOR = 0.25
UNSECURED_LGD_SLOPE = 0.25  # per unit of loan-to-income, up to LTI = 1
COLLATERAL_RECOVERY = 0.8  # share of the collateral's value recovered on default


@dataclass(frozen=True)
class Applicant:
    annual_income: float
    monthly_debt_payments: float
    credit_score: int
    collateral_value: float = 0.0


@dataclass(frozen=True)
class Offer:
    amount: float
    annual_rate: float
    term_months: int


@dataclass(frozen=True)
class Score:
    probability_of_default: float
    loss_given_default: float
    monthly_payment: float
    debt_to_income: float
    model_version: str = MODEL_VERSION


class InvalidInput(ValueError):
    """An input out of the model's range; `field` names it as in the proto (`offer.amount`)."""

    def __init__(self, field: str, problem: str):
        super().__init__(f"{field}: {problem}")
        self.field = field


def validate(applicant: Applicant, offer: Offer) -> None:
    """Raises InvalidInput for the first input out of range."""
    checks = [
        ("applicant.annual_income", applicant.annual_income > 0, "must be > 0"),
        ("applicant.monthly_debt_payments", applicant.monthly_debt_payments >= 0, "must be >= 0"),
        ("applicant.credit_score", 300 <= applicant.credit_score <= 850, "must be 300 to 850"),
        ("applicant.collateral_value", applicant.collateral_value >= 0, "must be >= 0"),
        ("offer.amount", offer.amount > 0, "must be > 0"),
        ("offer.annual_rate", 0 <= offer.annual_rate <= 1, "must be a fraction from 0 to 1 (0.089 for 8.9 %)"),
        ("offer.term_months", 1 <= offer.term_months <= 480, "must be 1 to 480"),
    ]
    values = [*vars(applicant).values(), *vars(offer).values()]
    if not all(math.isfinite(v) for v in values):
        raise InvalidInput("request", "every number must be finite")
    for field, ok, problem in checks:
        if not ok:
            raise InvalidInput(field, problem)


def monthly_payment(offer: Offer) -> float:
    """The annuity payment that repays `amount` over `term_months` at `annual_rate` compounded monthly."""
    r, n = offer.annual_rate / 12, offer.term_months
    if r == 0:
        return offer.amount / n
    return offer.amount * r / (1 - (1 + r) ** -n)


def score(applicant: Applicant, offer: Offer) -> Score:
    validate(applicant, offer)
    payment = monthly_payment(offer)
    debt_to_income = (applicant.monthly_debt_payments + payment) / (applicant.annual_income / 12)
    loan_to_income = offer.amount / applicant.annual_income
    z = (
        INTERCEPT
        + DTI_WEIGHT * debt_to_income
        + SCORE_WEIGHT_PER_100 * (SCORE_PIVOT - applicant.credit_score) / 100
        + LTI_WEIGHT * loan_to_income
        + TERM_WEIGHT_PER_YEAR * offer.term_months / 12
        + RATE_WEIGHT * offer.annual_rate
    )
    probability_of_default = 1 / (1 + math.exp(-z)) if z > -700 else 0.0  # exp(700) overflows
    unsecured = UNSECURED_LGD_FLOOR + UNSECURED_LGD_SLOPE * min(loan_to_income, 1.0)
    covered = min(applicant.collateral_value / offer.amount, 1.0)
    loss_given_default = unsecured * (1 - COLLATERAL_RECOVERY * covered)
    return Score(probability_of_default, loss_given_default, payment, debt_to_income)
