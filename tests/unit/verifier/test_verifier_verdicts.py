"""Verdicts that mean something: abstentions, substantive rules and the evidence they leave."""

from __future__ import annotations

import json

import pytest

from deliberate.verifier.constraints import ConstraintSpec, compile_rules
from deliberate.verifier.rules import RuleOutcome, score_outcomes, verify
from deliberate.verifier.server import verdict_to_proto
from deliberate_client.examples import ads

ARITHMETIC = ConstraintSpec(0, "rule_pack", "arithmetic")


def free_text(text: str, *specs: ConstraintSpec):
    rule_set = compile_rules("", list(specs), {})
    return verify(text, rule_set.rules, "stop", rule_set.output_schema, {})


def outcome(verdict, rule_id: str) -> RuleOutcome:
    return next(o for o in verdict.outcomes if o.rule_id == rule_id)


def test_arithmetic_without_an_equation_abstains_and_is_no_evidence():
    verdict = free_text("Natalia sold clips. Final answer: 72", ARITHMETIC)

    arithmetic = outcome(verdict, "arithmetic")
    assert arithmetic.abstained and arithmetic.passed and arithmetic.substantive
    assert arithmetic.message == "arithmetic abstained: no equation to recompute"
    assert verdict.valid
    assert verdict.evidence == []


def test_arithmetic_with_a_right_equation_is_evidence():
    verdict = free_text("48 / 2 = 24, then 48 + 24 = 72\nFinal answer: 72", ARITHMETIC)

    assert outcome(verdict, "arithmetic").message == "arithmetic passed: 2 equations recomputed, all correct"
    assert verdict.evidence == ["arithmetic"]


def test_natalias_wrong_step_invalidates_the_draft():
    verdict = free_text("In May she sold 48 / 5 = 10 clips, so 10 + 10 = 20.\nFinal answer: 20", ARITHMETIC)

    assert not verdict.valid
    assert outcome(verdict, "arithmetic").message == (
        "arithmetic failed: 1 of 2 equations wrong: 48 / 5 = 10 (actually 9.6)"
    )
    assert verdict.evidence == []


def test_a_latex_draft_is_read_and_checked():
    text = "In May: \\( \\frac{48}{2} = 24 \\). Total: $48 + 24 = 72$.\n\\boxed{72}"
    verdict = free_text(text, ARITHMETIC)

    assert verdict.valid and verdict.extracted_answer == "72"
    assert verdict.evidence == ["arithmetic"]


def test_format_rules_alone_are_no_evidence():
    verdict = free_text("The answer is 2.5.")

    assert verdict.valid and verdict.score == 1.0
    assert not any(o.substantive for o in verdict.outcomes)
    assert verdict.evidence == []


def test_a_cel_constraint_is_evidence_and_a_soft_one_is_not():
    hard = ConstraintSpec(0, "cel_expression", 'text.contains("72")', id="mentions_72")
    soft = ConstraintSpec(1, "cel_expression", 'text.contains("clips")', id="mentions_clips", soft=True)

    verdict = free_text("Final answer: 72 clips", hard, soft)

    assert outcome(verdict, "mentions_72").substantive and outcome(verdict, "mentions_clips").substantive
    assert verdict.evidence == ["mentions_72"]  # a soft rule only lowers the score; it vouches for nothing


def test_abstentions_are_left_out_of_the_score():
    passed = RuleOutcome("final_answer", True, "final_answer passed: 72", True, 0.0)
    failed_soft = RuleOutcome("explicit_final_line", False, "explicit_final_line failed", False, 0.0)
    abstained = RuleOutcome("arithmetic", True, "arithmetic abstained: …", True, 0.0, abstained=True)

    assert score_outcomes([passed, failed_soft, abstained]) == score_outcomes([passed, failed_soft])
    assert score_outcomes([passed, failed_soft]) == pytest.approx(1.0 / 1.5)
    assert score_outcomes([abstained]) == 0.0  # nothing judged


def ad_verdict(plan: object):
    specs = []
    for i, c in enumerate(ads.CONSTRAINTS):
        kind = next(k for k in ("celExpression", "rulePack") if k in c)
        specs.append(
            ConstraintSpec(
                index=i,
                kind={"celExpression": "cel_expression", "rulePack": "rule_pack"}[kind],
                source=c[kind],
                id=c.get("id", ""),
                params=c.get("params", {}),
                failure_message=c.get("failureMessage", ""),
            )
        )
    rule_set = compile_rules(json.dumps(ads.OUTPUT_SCHEMA), specs, ads.context())
    return verify(json.dumps(plan), rule_set.rules, "stop", rule_set.output_schema, ads.context())


def test_a_feasible_ad_plan_names_its_substantive_checks_but_not_the_recorded_total():
    catalog = sorted(ads.load_catalog(), key=lambda a: a.cost)
    cheapest: dict[str, int] = {}
    for ad in catalog:
        cheapest.setdefault(ad.category, ad.id)
    verdict = ad_verdict({"selected_ids": list(cheapest.values())[:5]})

    assert verdict.valid
    assert not outcome(verdict, "ctr_total").substantive  # always passes: it records, it does not check
    assert not outcome(verdict, "json_schema").substantive
    assert verdict.evidence == [
        "size_check",
        "pool_check",
        "catalog_check",
        "picks_check",
        "budget_check",
        "category_check",
    ]


def test_a_soft_pack_whose_answer_does_not_match_abstains_in_its_checks():
    rule_set = compile_rules("", [ConstraintSpec(0, "rule_pack", "ad_selection", soft=True)], {})
    verdict = verify('{"selected_ids": "not a list"}', rule_set.rules)

    assert not outcome(verdict, "ad_selection").passed  # the soft shape rule reports the mismatch
    budget = outcome(verdict, "budget_check")
    assert budget.abstained and budget.passed
    assert budget.message == "budget_check abstained: the answer does not match AdPlan"
    assert verdict.valid and verdict.evidence == []


def test_the_proto_carries_abstention_substance_and_evidence():
    verdict = free_text("48 + 24 = 72\nFinal answer: 72", ARITHMETIC)
    proto = verdict_to_proto("d1", verdict, 0.01)

    arithmetic = next(r for r in proto.rule_results if r.rule_id == "arithmetic")
    assert arithmetic.substantive and not arithmetic.abstained
    assert list(proto.evidence) == ["arithmetic"]

    abstaining = verdict_to_proto("d2", free_text("Final answer: 72", ARITHMETIC), 0.01)
    assert next(r for r in abstaining.rule_results if r.rule_id == "arithmetic").abstained
    assert list(abstaining.evidence) == []
