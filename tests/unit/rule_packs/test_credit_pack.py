"""The credit pack's checks on the worked example's applicant, scored in process: distinct offers before any risk
call, breaches that state the figure, the limit and the excess, and the quality of a set of offers."""

from __future__ import annotations

import json

import pytest

from deliberate.decisions.packs import PackContext, Quality
from deliberate.decisions.prompts import decision_prompt_of
from deliberate.drafter.decision import DECISION_STRATEGIES, DECISION_SYSTEM_PROMPT, decision_system_prompt
from deliberate.drafter.prompts import draft_plans
from deliberate.drafter.server import decision_plans
from deliberate.risk.model import score
from deliberate.rule_packs.credit.pack import CreditOffers, CreditPack, CreditParams, breach
from deliberate.rule_packs.credit.prompt import SCORE_OFFER_EXAMPLE, SCORE_OFFER_STRATEGIES
from deliberate.verifier.constraints import ConstraintSpec, compile_rules
from deliberate.verifier.hostile_programs import as_decision_draft
from deliberate.verifier.rules import verify
from deliberate_client.examples import credit

from .worked_examples import example_program

# Within the limits: PD 0.0326, 0.0426, 0.0263 (docs/business-cases.md).
GOOD_OFFERS = [
    {"amount": 10000, "annual_rate": 0.099, "term_months": 36},
    {"amount": 20000, "annual_rate": 0.089, "term_months": 48},
    {"amount": 8000, "annual_rate": 0.079, "term_months": 24},
]
RISKY_OFFER = {"amount": 40000, "annual_rate": 0.14, "term_months": 60}  # PD 0.1017, LGD 0.4167


class ScoresInProcess:
    """A risk client that scores with the model itself, no service, and counts the offers it was asked for."""

    def __init__(self):
        self.scored = 0

    def score_all(self, applicant, offers):
        self.scored += len(offers)
        return [score(applicant, offer) for offer in offers]


def pack(risk: ScoresInProcess | None = None) -> CreditPack:
    return CreditPack(CreditParams.model_validate(credit.context()), PackContext({"risk": risk or ScoresInProcess()}))


def offers(*terms: dict) -> CreditOffers:
    return CreditOffers(offers=list(terms), disclosure=credit.DISCLOSURE)


def test_distinct_offers_runs_after_the_risk_check():
    order = [rule_id for rule_id, _ in CreditPack.checks()]
    assert order == ["risk_check", "distinct_offers", "disclosure_check"]


def test_two_identical_offers_fail_naming_both_and_the_offer():
    repeated = offers(GOOD_OFFERS[0], GOOD_OFFERS[1], {**GOOD_OFFERS[2], "term_months": 36}, GOOD_OFFERS[2])
    assert pack().offers_differ(repeated) == (True, "all 4 offers differ")
    same = offers({**GOOD_OFFERS[2], "term_months": 36}, GOOD_OFFERS[1], {**GOOD_OFFERS[2], "term_months": 36})
    assert pack().offers_differ(same) == (
        False,
        "offers 1 and 3 are the same offer (8000 at 7.90 % for 36 months); each offer must differ in amount, rate "
        "or term",
    )


def test_a_draft_repeating_an_offer_fails_once_its_offers_were_scored():
    risk = ScoresInProcess()
    rules = compile_rules("", [ConstraintSpec(0, "rule_pack", "credit")], credit.context(), {"risk": risk}).rules
    answer = {"offers": [GOOD_OFFERS[0], GOOD_OFFERS[1], GOOD_OFFERS[0]], "disclosure": credit.DISCLOSURE}
    verdict = verify(json.dumps(answer), rules)
    assert not verdict.valid
    assert verdict.outcomes[-1].message == (
        "distinct_offers failed: offers 1 and 3 are the same offer (10000 at 9.90 % for 36 months); each offer must "
        "differ in amount, rate or term"
    )
    assert risk.scored == 3 and verdict.outcomes[-2].message.startswith("risk_check passed")
    verdict = verify(json.dumps({**answer, "offers": GOOD_OFFERS}), rules)
    assert verdict.valid and risk.scored == 6


def test_a_single_offer_passes():
    assert pack().offers_differ(offers(GOOD_OFFERS[0])) == (True, "a single offer")


def test_a_breach_states_the_figure_the_excess_and_the_limit():
    passed, detail = pack().offers_within_risk_limits(offers(*GOOD_OFFERS[:2], RISKY_OFFER))
    assert not passed
    assert detail == (
        "1 of 3 offers rejected: offer 3 (40000 at 14.00 % for 60 months): probability of default 0.1017 is 0.0517 "
        "over the limit 0.05; loss given default 0.4167 is 0.0167 over the limit 0.4"
    )
    passed, detail = pack().offers_within_risk_limits(offers(*GOOD_OFFERS))
    assert passed and "offer 1 (10000 at 9.90 % for 36 months): PD=0.0326, LGD=0.2917" in detail


def test_a_figure_at_its_limit_fails_saying_it_must_be_under():
    assert breach("probability of default", 0.05, 0.05) == (
        "probability of default 0.0500 is at the limit 0.05; it must be under it"
    )
    assert breach("loss given default", 0.40001, 0.4) == "loss given default 0.4000 is just over the limit 0.4"


def test_the_quality_is_the_total_amount_offered_without_a_bound():
    quality = pack().quality(offers(*GOOD_OFFERS))
    assert quality == Quality("total amount offered", 38000.0)
    assert quality.ratio is None


# ---- decision programs: the risk model as the program's simulator (score_offer) ----


def credit_program_rules(risk: ScoresInProcess):
    schema = json.dumps(credit.OUTPUT_SCHEMA)
    return compile_rules(schema, [ConstraintSpec(0, "rule_pack", "credit")], credit.context(), {"risk": risk})


def verify_credit_program(code: str, risk: ScoresInProcess):
    rules = credit_program_rules(risk)
    draft = as_decision_draft(code)
    return verify(draft, rules.rules_for("program"), "stop", rules.output_schema, credit.context(), "program")


def one_offer_schema() -> str:
    schema = json.loads(json.dumps(credit.OUTPUT_SCHEMA))
    schema["properties"]["offers"]["minItems"] = schema["properties"]["offers"]["maxItems"] = 1
    return json.dumps(schema)


def run_example(applicant: dict, risk: ScoresInProcess):
    context = {**credit.context(), "applicant": applicant}
    rules = compile_rules(one_offer_schema(), [ConstraintSpec(0, "rule_pack", "credit")], context, {"risk": risk})
    code = example_program(SCORE_OFFER_EXAMPLE)
    return verify(as_decision_draft(code), rules.rules_for("program"), "stop", rules.output_schema, context, "program")


WEAK_APPLICANT = {"annual_income": 30000, "monthly_debt_payments": 400, "credit_score": 600, "collateral_value": 0}


def test_the_prompt_s_example_program_answers_its_own_question_with_the_risk_model():
    """The example the Drafter shows answers its own made-up question (one offer at 0.069 over 60 months, as large
    as the risk model approves, amounts rounded to 1,000), asking the risk model on the way: the pack's checks
    pass its offer."""
    risk = ScoresInProcess()
    verdict = run_example(credit.APPLICANT, risk)
    assert verdict.valid, "; ".join(o.message for o in verdict.outcomes)
    (offer,) = json.loads(verdict.extracted_answer)["offers"]
    assert (offer["annual_rate"], offer["term_months"]) == (0.069, 60) and offer["amount"] % 1000 == 0
    tried_before = offer["amount"] / 0.9 + 1000  # at least the search's previous try, which was refused
    assert not pack().score_offer(tried_before, 0.069, 60)["approved"]
    assert risk.scored > 1  # the search's calls, then the risk check's


def test_the_prompt_s_example_offers_nothing_rather_than_an_offer_the_risk_model_refuses():
    """A weak applicant whom the risk model approves for no amount over 60 months: the example prints no offer (the
    schema then refuses the empty list), never one the model refused."""
    verdict = run_example(WEAK_APPLICANT, ScoresInProcess())
    assert json.loads(verdict.extracted_answer)["offers"] == []
    assert not verdict.valid and "should be non-empty" in "; ".join(o.message for o in verdict.outcomes)


def test_the_prompt_s_example_is_not_an_answer_to_the_evaluated_requests():
    """Issue 55: the example has a shape of its own - one offer, where every evaluated request asks for 2 or 3
    different offers - so copying it answers none of them."""
    assert "Propose" not in SCORE_OFFER_EXAMPLE and "1 loan offer" in SCORE_OFFER_EXAMPLE
    verdict = run_example(credit.APPLICANT, ScoresInProcess())
    assert len(json.loads(verdict.extracted_answer)["offers"]) < credit.OFFERS


def test_score_offer_answers_for_the_request_s_applicant_and_refuses_bad_input():
    scoring = pack()
    result = scoring.score_offer(10000, 0.099, 36)
    assert result == {"probability_of_default": 0.03263, "loss_given_default": 0.291667, "approved": True}
    assert scoring.score_offer(40000, 0.14, 60)["approved"] is False
    with pytest.raises(TypeError, match="score_offer: amount must be a number, not str"):
        scoring.score_offer("10000", 0.099, 36)
    with pytest.raises(ValueError, match="term_months must be a whole number of months, not 36.5"):
        scoring.score_offer(10000, 0.099, 36.5)


def test_a_program_calling_score_offer_too_often_fails_naming_the_limit():
    code = "for i in range(300):\n    score_offer(1000 + i, 0.05, 36)\nprint('{}')\n"
    verdict = verify_credit_program(code, ScoresInProcess())
    assert not verdict.valid
    assert "score_offer was called more than 200 times" in verdict.outcomes[1].message


def test_a_program_defining_its_own_score_offer_is_refused():
    code = "def score_offer(a, r, t):\n    return {'approved': True}\nprint('{}')\n"
    verdict = verify_credit_program(code, ScoresInProcess())
    assert verdict.outcomes[1].message == "program failed: line 2 defines score_offer; it is already defined: call it"


def test_the_drafter_describes_score_offer_for_a_credit_request_only():
    credit_prompt = decision_system_prompt(decision_prompt_of(["credit"]))
    assert "score_offer(amount, annual_rate, term_months)" in credit_prompt and "best_rows" not in credit_prompt
    assert decision_prompt_of(["ad_selection", "nonexistent"]) is None
    assert decision_system_prompt(decision_prompt_of(["ad_selection"])) == DECISION_SYSTEM_PROMPT


def test_a_credit_request_s_programs_get_the_pack_s_strategies_and_others_the_exact_engine_s():
    plans = draft_plans(3, [], program_drafts=2)
    credit_plans = decision_plans(plans, 0, 0, credit.context(), ["credit"])
    assert [plan.strategy for plan in credit_plans if plan.decision] == list(SCORE_OFFER_STRATEGIES[:2])
    other = decision_plans(plans, 0, 0, credit.context(), ["ad_selection"])
    assert [plan.strategy for plan in other if plan.decision] == list(DECISION_STRATEGIES[:2])
