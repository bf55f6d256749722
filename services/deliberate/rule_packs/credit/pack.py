"""The credit pack: every offer a draft proposes is scored by the risk-model service, never by figures the draft
writes, and fails at PD >= max_probability_of_default or LGD >= max_loss_given_default (0.05 and 0.4 unless the
constraint's params say otherwise). When the service cannot score an offer — down, slow, or the circuit breaker
open — the offer fails with the reason: nothing is approved unchecked (docs/business-cases.md).

The applicant and the disclosure sentence come from the request's context (or the constraint's params). Each
breach states the figure, the limit and how far over it is (`probability of default 0.1017 is 0.0517 over the
limit 0.05`): the re-draft's feedback.
"""

from __future__ import annotations

import re
from functools import cached_property

from pydantic import BaseModel, ConfigDict, Field, StrictInt

from deliberate.decisions.packs import CheckResult, Quality, RulePack, check
from deliberate.risk.client import RiskClient, RiskRejected, RiskUnavailable
from deliberate.risk.model import Applicant, Offer, Score

from .prompt import DECISION_PROMPT, SCORE_OFFER

MAX_PROBABILITY_OF_DEFAULT = 0.05
MAX_LOSS_GIVEN_DEFAULT = 0.4


class CreditOffer(BaseModel):
    model_config = ConfigDict(extra="ignore")
    amount: float = Field(gt=0)
    annual_rate: float = Field(ge=0, le=1, description="a fraction: 0.089 for 8.9 %")
    term_months: StrictInt = Field(ge=1, le=480)

    def describe(self) -> str:
        return f"{self.amount:g} at {self.annual_rate * 100:.2f} % for {self.term_months} months"

    @property
    def terms(self) -> tuple[float, float, int]:
        return self.amount, self.annual_rate, self.term_months


class CreditOffers(BaseModel):
    model_config = ConfigDict(extra="ignore")
    offers: list[CreditOffer] = Field(min_length=1)
    disclosure: str = ""


class ApplicantProfile(BaseModel):
    model_config = ConfigDict(extra="ignore")
    annual_income: float = Field(gt=0)
    monthly_debt_payments: float = Field(0.0, ge=0)
    credit_score: StrictInt = Field(ge=300, le=850)
    collateral_value: float = Field(0.0, ge=0)


class CreditParams(BaseModel):
    model_config = ConfigDict(extra="ignore")
    applicant: ApplicantProfile
    disclosure: str = Field(min_length=1, description="the sentence the final answer must carry, verbatim")
    max_probability_of_default: float = Field(MAX_PROBABILITY_OF_DEFAULT, gt=0, le=1)
    max_loss_given_default: float = Field(MAX_LOSS_GIVEN_DEFAULT, gt=0, le=1)


class CreditPack(RulePack):
    name = "credit"
    answer_model = CreditOffers
    params_model = CreditParams
    requires = ("risk",)  # the risk-model service's client: no offer is approved unchecked
    data_params = ("applicant", "disclosure")  # what a decision program reads in ctx, wherever the request put it
    decision_prompt = DECISION_PROMPT  # score_offer, as its programs are told it

    @cached_property
    def applicant(self) -> Applicant:
        """The request's applicant as the risk model takes it: built once for every offer a draft or a decision
        program has scored."""
        return Applicant(**self.params.applicant.model_dump())

    @property
    def risk(self) -> RiskClient:
        return self.context["risk"]

    @property
    def waits_on_network(self) -> bool:
        return True  # each offer is a call to the risk-model service

    def quality(self, answer: CreditOffers) -> Quality:
        """The total amount offered, without a bound: the largest total within the risk limits would mean searching
        the risk model's limit curve, which the pack does not do."""
        return Quality("total amount offered", sum(offer.amount for offer in answer.offers))

    def decision_functions(self) -> dict:
        return {SCORE_OFFER: self.score_offer}

    def score_offer(self, amount, annual_rate, term_months) -> dict:
        """One offer to this request's applicant, scored by the risk-model service: what `score_offer` returns in
        a decision program. An offer the service refuses, or no score, raises: the program stops and says why."""
        for name, value in (("amount", amount), ("annual_rate", annual_rate), ("term_months", term_months)):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise TypeError(f"{SCORE_OFFER}: {name} must be a number, not {type(value).__name__}")
        if term_months != int(term_months):
            raise ValueError(f"{SCORE_OFFER}: term_months must be a whole number of months, not {term_months}")
        [result] = self.risk.score_all(self.applicant, [Offer(float(amount), float(annual_rate), int(term_months))])
        if isinstance(result, RiskRejected):
            raise ValueError(f"{SCORE_OFFER}: {result}")
        if isinstance(result, RiskUnavailable):
            raise RuntimeError(f"{SCORE_OFFER}: no score: {result}")
        return {
            "probability_of_default": round(result.probability_of_default, 6),
            "loss_given_default": round(result.loss_given_default, 6),
            "approved": not self.breaches(result),
        }

    @check("risk_check")
    def offers_within_risk_limits(self, answer: CreditOffers) -> CheckResult:
        offers = [Offer(o.amount, o.annual_rate, o.term_months) for o in answer.offers]
        results = self.risk.score_all(self.applicant, offers)
        if all(isinstance(result, RiskUnavailable) for result in results):  # one reason, said once
            return False, f"none of the {len(offers)} offers scored, so none approved: {results[0]}"
        failures, passes = [], []
        for number, (offer, result) in enumerate(zip(answer.offers, results, strict=True), start=1):
            line = f"offer {number} ({offer.describe()})"
            if isinstance(result, Score):
                breaches = self.breaches(result)
                figures = f"PD={result.probability_of_default:.4f}, LGD={result.loss_given_default:.4f}"
                (failures if breaches else passes).append(f"{line}: {'; '.join(breaches) or figures}")
            elif isinstance(result, RiskRejected):
                failures.append(f"{line}: the risk model refused it: {result}")
            else:  # RiskUnavailable: fail closed
                failures.append(f"{line}: not scored, so not approved: {result}")
        if failures:
            return False, f"{len(failures)} of {len(offers)} offers rejected: " + " | ".join(failures)
        version = results[0].model_version
        return True, f"all {len(offers)} offers within limits ({version}): " + " | ".join(passes)

    def breaches(self, score: Score) -> list[str]:
        p = self.params
        return [
            breach(name, value, limit)
            for name, value, limit in (
                ("probability of default", score.probability_of_default, p.max_probability_of_default),
                ("loss given default", score.loss_given_default, p.max_loss_given_default),
            )
            if value >= limit
        ]

    @check("distinct_offers")
    def offers_differ(self, answer: CreditOffers) -> CheckResult:
        """After the risk check: a draft that repeats an offer still learns what the risk model made of each (the
        re-draft's feedback), and a run on the small model still reaches the risk service."""
        first_of: dict[tuple[float, float, int], int] = {}
        for number, offer in enumerate(answer.offers, start=1):
            if offer.terms in first_of:
                return False, (
                    f"offers {first_of[offer.terms]} and {number} are the same offer ({offer.describe()}); "
                    "each offer must differ in amount, rate or term"
                )
            first_of[offer.terms] = number
        if len(answer.offers) == 1:
            return True, "a single offer"
        return True, f"all {len(answer.offers)} offers differ"

    @check("disclosure_check")
    def carries_disclosure(self, answer: CreditOffers) -> CheckResult:
        required = normalized(self.params.disclosure)
        if required in normalized(answer.disclosure):
            return True, "the required disclosure is present"
        return False, f"the answer's disclosure must contain, verbatim: {self.params.disclosure!r}"


def breach(name: str, value: float, limit: float) -> str:
    """`probability of default 0.0710 is 0.0210 over the limit 0.05`; a figure must be under its limit."""
    if value == limit:
        return f"{name} {value:.4f} is at the limit {limit:g}; it must be under it"
    over = f"{value - limit:.4f}"
    return f"{name} {value:.4f} is {'just' if float(over) == 0 else over} over the limit {limit:g}"


def normalized(text: str) -> str:
    """Whitespace collapsed: line breaks a model inserts do not change the sentence."""
    return re.sub(r"\s+", " ", text).strip()
