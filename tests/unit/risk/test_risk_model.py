"""The risk model's documented figures and input checks, and the circuit breaker's states."""

from __future__ import annotations

import pytest

from deliberate.risk.client import CircuitBreaker, RiskUnavailable
from deliberate.risk.model import MODEL_VERSION, Applicant, InvalidInput, Offer, score

APPLICANT = Applicant(annual_income=60000, monthly_debt_payments=500, credit_score=690)


def test_the_worked_examples_of_the_docs():
    modest = score(APPLICANT, Offer(10000, 0.099, 36))
    assert (round(modest.monthly_payment, 2), round(modest.debt_to_income, 4)) == (322.20, 0.1644)
    assert (round(modest.probability_of_default, 4), round(modest.loss_given_default, 4)) == (0.0326, 0.2917)
    risky = score(APPLICANT, Offer(40000, 0.14, 60))
    assert (round(risky.probability_of_default, 4), round(risky.loss_given_default, 4)) == (0.1017, 0.4167)
    assert modest.model_version == MODEL_VERSION


def test_collateral_lowers_lgd_and_a_better_score_lowers_pd():
    offer = Offer(40000, 0.14, 60)
    secured = score(Applicant(60000, 500, 690, collateral_value=40000), offer)
    assert round(secured.loss_given_default, 4) == round(0.4167 * 0.2, 4)
    better = score(Applicant(60000, 500, 800), offer)
    assert better.probability_of_default < score(APPLICANT, offer).probability_of_default


def test_a_zero_rate_repays_the_amount_in_equal_parts():
    assert score(APPLICANT, Offer(12000, 0.0, 24)).monthly_payment == 500


@pytest.mark.parametrize(
    ("applicant", "offer", "field"),
    [
        (Applicant(0, 0, 700), Offer(1000, 0.1, 12), "applicant.annual_income"),
        (Applicant(50000, 0, 900), Offer(1000, 0.1, 12), "applicant.credit_score"),
        (APPLICANT, Offer(-5, 0.1, 12), "offer.amount"),
        (APPLICANT, Offer(1000, 8.9, 12), "offer.annual_rate"),
        (APPLICANT, Offer(1000, 0.1, 0), "offer.term_months"),
        (APPLICANT, Offer(float("nan"), 0.1, 12), "request"),
    ],
)
def test_inputs_out_of_range_name_the_field(applicant, offer, field):
    with pytest.raises(InvalidInput) as raised:
        score(applicant, offer)
    assert raised.value.field == field


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_breaker_opens_after_failures_in_a_row_and_closes_after_a_good_trial():
    clock = Clock()
    breaker = CircuitBreaker(failures_to_open=2, reset_after_s=5.0, clock=clock)
    breaker.failed("UNAVAILABLE")
    breaker.succeeded()  # a success in between: the count starts over
    breaker.failed("UNAVAILABLE")
    assert breaker.admit() is False and not breaker.is_open
    breaker.failed("DEADLINE_EXCEEDED")
    with pytest.raises(RiskUnavailable, match=r"open after 2 failed calls in a row \(last: DEADLINE_EXCEEDED\)"):
        breaker.admit()
    clock.now = 5.0
    assert breaker.admit() is True, "half-open: one trial"
    with pytest.raises(RiskUnavailable):
        breaker.admit()  # while the trial runs, nothing else
    breaker.failed("UNAVAILABLE")  # a failed trial opens it again at once
    with pytest.raises(RiskUnavailable, match="next try in 5.0 s"):
        breaker.admit()
    clock.now = 10.0
    assert breaker.admit() is True
    breaker.succeeded()
    assert breaker.admit() is False and not breaker.is_open
