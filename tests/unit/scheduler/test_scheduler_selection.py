"""Risk-adjusted selection, self-consistency, structural duplicates and re-drafting feedback."""

from __future__ import annotations

import pytest

from deliberate.drafter.prompts import draft_user_message
from deliberate.scheduler.learning.weights import Weights
from deliberate.scheduler.verdicts import (
    DEFAULT_ARITHMETIC,
    computed_answer_line,
    effective_constraints,
    late_verdict,
    refinement_problem,
    status_reason,
    unchecked_detail,
    verifier_feedback,
    with_computed_answer,
)
from deliberate.selection import Candidate as Scored
from deliberate.selection import answer_key, select
from deliberate.selection.duplicates import duplicate_key, structural_signature
from deliberate_api.common.v1 import common_pb2
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb


def test_final_score_follows_the_formula():
    drafts = [
        Scored("a", 0, True, 0.9, latency=0.5, answer="72"),
        Scored("b", 1, True, 0.7, latency=0.0, answer="70"),
        Scored("c", 2, True, 0.7, latency=0.0, answer="70"),
    ]
    selection = select(drafts, max_selected=2, weights=Weights(alpha=1.0, beta=0.3, gamma=0.02, delta=0.4).vector())
    a, b = selection.signals["a"], selection.signals["b"]
    assert a["agreement"] == pytest.approx(1 - 0.0942809, abs=1e-6)  # population stddev of [0.9, 0.7, 0.7]
    assert (a["answer_share"], b["answer_share"]) == (pytest.approx(1 / 3), pytest.approx(2 / 3))
    assert selection.finals["a"] == pytest.approx(0.9 + 0.3 * a["agreement"] + 0.4 / 3 - 0.02 * 0.5)
    assert selection.finals["b"] == pytest.approx(0.7 + 0.3 * b["agreement"] + 0.4 * 2 / 3)


def test_answer_share_outweighs_a_small_score_lead_only_through_delta():
    drafts = [
        Scored("lonely", 0, True, 0.85, answer="41"),
        Scored("majority", 1, True, 0.8, answer="42"),
        Scored("also", 2, True, 0.8, answer="42.00"),  # the same number
    ]
    assert select(drafts, max_selected=1, weights=Weights(delta=0.3).vector()).selected[0].draft_id == "majority"
    assert select(drafts, max_selected=1, weights=Weights(delta=0.0).vector()).selected[0].draft_id == "lonely"


def test_answers_are_compared_by_value():
    assert answer_key("72.00") == answer_key("72") == answer_key(" 72 ")
    assert answer_key("-0.50") == answer_key("-0.5") != answer_key("0.5")
    one = {"72", "72.00", "\\boxed{72}", "$72", "Natalia sold altogether in April and May, which is 72 clips"}
    assert {answer_key(answer) for answer in one} == {"72"}
    assert answer_key("48 + 24 = 72 clips") == "72"
    assert answer_key("\\frac{3}{4}") == answer_key("0.75") == "3/4"
    assert answer_key("$1,200.50") == answer_key("1200.5") != answer_key("1200")
    assert answer_key("Blue  Whale") == answer_key("blue whale") != answer_key("whale")
    assert answer_key("") == answer_key("   ") == ""


def test_the_status_is_verified_only_with_evidence_and_names_it():
    checked = Scored("checked", 0, True, 1.0, answer="72", evidence=("arithmetic",))
    unchecked = Scored("unchecked", 1, True, 1.0, answer="72")
    invalid = Scored("invalid", 2, False, 0.5, answer="20")

    computed = select([checked, unchecked, invalid], max_selected=2)
    assert computed.status == "computation_checked" and computed.verified_by == []
    assert computed.reason == (
        "2 of 3 drafts passed every hard rule; computations checked by arithmetic, not the plan "
        "(no program of the round reached the same answer as a prose draft)"
    )

    rule_checked = Scored("rule", 3, True, 1.0, answer="72", evidence=("budget_check",))
    verified = select([rule_checked, unchecked, invalid], max_selected=2)
    assert verified.status == "verified" and verified.verified_by == ["budget_check"]
    assert verified.reason == "2 of 3 drafts passed every hard rule; checked by budget_check"

    format_only = select([unchecked, invalid], max_selected=2)
    assert format_only.status == "unchecked"
    assert format_only.verified_by == []
    assert "no substantive check applied" in format_only.reason

    nothing = select([invalid], max_selected=2)
    assert (nothing.status, nothing.verified_by) == ("unverified", [])


def test_the_status_reason_is_the_selections_then_what_was_checked_then_what_replaced_what():
    failed = common_pb2.DraftVerdict(
        draft_id="invalid",
        rule_results=[common_pb2.RuleResult(rule_id="arithmetic", passed=False, hard=True, message="2 + 2 = 5")],
    )
    unverified = select([Scored("invalid", 2, False, 0.5, answer="20")])
    assert status_reason(unverified, 3, [failed, failed], failed) == (
        f"{unverified.reason} after 3 round(s); errors: 2 + 2 = 5"
    )
    format_only = select([Scored("unchecked", 1, True, 1.0, answer="72")])
    passed = common_pb2.DraftVerdict(
        draft_id="unchecked", valid=True, rule_results=[common_pb2.RuleResult(rule_id="final_answer", passed=True)]
    )
    replaced = "refinement rejected (it broke); answering with the best draft #1"
    assert status_reason(format_only, 1, [passed], passed, replaced) == (
        f"{format_only.reason}{unchecked_detail(passed)}; {replaced}"
    )
    assert status_reason(format_only, 1, [passed], passed).endswith("the answer is not verified")


def test_a_higher_score_without_evidence_does_not_outrank_a_checked_draft():
    best_score = Scored("best-score", 0, True, 1.0, answer="72")
    checked = Scored("checked", 1, True, 0.5, answer="70", evidence=("budget_check",))
    selection = select([best_score, checked], max_selected=2)
    assert [d.draft_id for d in selection.selected] == ["checked", "best-score"]
    assert selection.status == "verified" and selection.verified_by == ["budget_check"]


def test_requests_without_an_output_schema_get_the_arithmetic_pack_by_default():
    cel = common_pb2.Constraint(cel_expression="size(text) > 0")
    assert effective_constraints(pb.SolveRequest(prompt="q", constraints=[cel])) == [cel, DEFAULT_ARITHMETIC]
    assert DEFAULT_ARITHMETIC.rule_pack == "arithmetic" and not DEFAULT_ARITHMETIC.soft
    assert effective_constraints(pb.SolveRequest(prompt="q"), default_arithmetic=False) == []
    assert effective_constraints(pb.SolveRequest(prompt="q", output_schema='{"type": "object"}')) == []
    soft = common_pb2.Constraint(rule_pack="arithmetic", soft=True)  # declared by the client: kept as declared
    assert effective_constraints(pb.SolveRequest(prompt="q", constraints=[soft])) == [soft]


def test_a_round_with_program_drafts_gets_the_program_check_by_default():
    program = common_pb2.Constraint(rule_pack="program")
    assert effective_constraints(pb.SolveRequest(prompt="q"), programs=True) == [program, DEFAULT_ARITHMETIC]
    assert effective_constraints(pb.SolveRequest(prompt="q"), programs=True, default_arithmetic=False) == [program]
    soft = common_pb2.Constraint(rule_pack="program", soft=True)  # declared by the client: kept as declared
    assert effective_constraints(pb.SolveRequest(prompt="q", constraints=[soft]), programs=True)[0] == soft
    assert len(effective_constraints(pb.SolveRequest(prompt="q", constraints=[soft]), programs=True)) == 2
    schema = pb.SolveRequest(prompt="q", output_schema='{"type": "object"}')
    assert effective_constraints(schema, programs=True) == []


def test_an_unchecked_reason_names_what_was_checked_and_what_abstained():
    verdict = common_pb2.DraftVerdict(
        valid=True,
        rule_results=[
            common_pb2.RuleResult(rule_id="final_answer", passed=True, hard=True),
            common_pb2.RuleResult(rule_id="numeric_answer", passed=True, hard=True),
            common_pb2.RuleResult(
                rule_id="arithmetic",
                passed=True,
                hard=True,
                abstained=True,
                substantive=True,
                message="arithmetic abstained: no equation to recompute",
            ),
        ],
    )
    assert unchecked_detail(verdict) == (
        "; passed: final_answer, numeric_answer; abstained: arithmetic abstained: no equation to recompute"
        "; the answer is not verified"
    )


def verdict(answer: str, valid: bool = True, evidence: tuple = (), program: bool = False) -> common_pb2.DraftVerdict:
    results = [common_pb2.RuleResult(rule_id="program", passed=True, substantive=True)] if program else []
    return common_pb2.DraftVerdict(valid=valid, extracted_answer=answer, evidence=evidence, rule_results=results)


def test_a_refinement_may_change_a_checked_answer_only_with_a_check_of_its_own_and_never_a_checked_plan():
    arithmetic_only = verdict("72", evidence=("arithmetic",))
    assert refinement_problem(verdict("72.0"), arithmetic_only) == ""  # the same value, worded anew
    assert refinement_problem(verdict("70"), arithmetic_only) == (
        "its answer '70' differs from the checked draft's '72' and no substantive check applied to it"
    )
    assert refinement_problem(verdict("70", evidence=("arithmetic",)), arithmetic_only) == ""
    plan_checked = verdict("72", evidence=("arithmetic", "cross_check"))
    assert refinement_problem(verdict("70", evidence=("arithmetic",)), plan_checked) == (
        "its answer '70' differs from the checked draft's '72', whose plan was checked (cross_check)"
    )
    assert refinement_problem(verdict("70"), verdict("72")) == ""  # an unchecked best draft promises nothing
    broken = common_pb2.DraftVerdict(
        valid=False, rule_results=[common_pb2.RuleResult(hard=True, passed=False, message="complete failed: cut off")]
    )
    assert refinement_problem(broken, plan_checked) == "complete failed: cut off"


def test_a_program_answer_states_the_value_its_program_printed():
    program = "```python\nprint(48 + 24)\n```"
    assert with_computed_answer(program, verdict("72", program=True)) == f"{program}\n\nFinal answer: 72"
    assert with_computed_answer("So 72.\nFinal answer: 72", verdict("72")) == "So 72.\nFinal answer: 72"
    assert with_computed_answer(program, verdict("", program=True)) == program  # it printed no number
    assert computed_answer_line(verdict("72", program=True)) == "\n\nFinal answer: 72"


def test_a_slow_verification_loses_when_gamma_is_high():
    drafts = [Scored("slow", 0, True, 0.80, latency=1.0), Scored("fast", 1, True, 0.78, latency=0.0)]
    assert select(drafts, max_selected=1, weights=Weights(gamma=0.01).vector()).selected[0].draft_id == "slow"
    assert select(drafts, max_selected=1, weights=Weights(gamma=0.05).vector()).selected[0].draft_id == "fast"


def test_agreement_on_the_answer_breaks_ties():
    drafts = [
        Scored("lonely", 0, True, 0.8, answer="41"),
        Scored("majority", 1, True, 0.8, answer="42"),
        Scored("also", 2, True, 0.8, answer="42"),
    ]
    selection = select(drafts, max_selected=1)
    assert selection.selected[0].draft_id == "majority"
    assert selection.signals["majority"]["answer_share"] == pytest.approx(2 / 3)


def test_invalid_drafts_never_compete_with_valid_ones():
    drafts = [Scored("invalid", 0, False, 1.0), Scored("valid", 1, True, 0.1)]
    assert [d.draft_id for d in select(drafts, max_selected=2).selected] == ["valid"]


def test_structural_signature_ignores_wording_but_not_numbers():
    a = structural_signature("First, 48 / 2 = 24. Then 48 + 24 = 72. Final answer: 72")
    b = structural_signature("We get 48/2=24 and so 48+24 = 72; the answer is 72.")
    c = structural_signature("48 / 2 = 24, 48 + 24 = 73. Final answer: 73")
    assert a == b != c
    assert structural_signature("costs 1,200.50") == structural_signature("costs 1200.5")
    assert structural_signature("no numbers here") != structural_signature("other words")


def test_programs_and_structured_plans_are_duplicates_only_when_their_text_is_the_same():
    """Recorded (ads-pipeline-solver, ads-014): a program passing ctx["pool"] as rows failed; two later programs with
    the same numbers and operators, one of which found a feasible plan, shared its verdict and were lost."""
    failed = 'plan = best_rows(pool, maximize="ctr", count=picks, at_most={"cost": budget})'
    feasible = (
        'plan = best_rows([a for a in catalog if a["id"] in pool], maximize="ctr", count=picks, '
        'at_most={"cost": budget})'
    )
    assert structural_signature(failed) == structural_signature(feasible), "the old key: numbers and operators"
    assert duplicate_key(failed, "program", True) != duplicate_key(feasible, "program", True)
    assert duplicate_key(failed, "program", True) == duplicate_key(failed.replace(", ", ",  "), "program", True)
    fair = '{"items": [{"sku": "A-1", "discount_percent": 10}], "message": "Ten percent off this week"}'
    claim = '{"items": [{"sku": "A-1", "discount_percent": 10}], "message": "Lowest prices ever, ten percent off"}'
    assert duplicate_key(fair, "prose", True) != duplicate_key(claim, "prose", True)
    assert duplicate_key("48 / 2 = 24. Final answer: 24", "prose", False) == duplicate_key("48/2=24, so 24", "", False)


def verdict_of(draft_id: str, *messages: str) -> common_pb2.DraftVerdict:
    rules = [common_pb2.RuleResult(rule_id=m.split()[0], passed=False, message=m, hard=True) for m in messages]
    return common_pb2.DraftVerdict(draft_id=draft_id, rule_results=rules)


def test_redraft_feedback_carries_the_verifiers_messages_into_the_next_prompt():
    verdicts = [
        verdict_of("a", "budget_check failed: total cost 5,023 is 23 over the budget 5,000"),
        verdict_of("b", "budget_check failed: total cost 5,023 is 23 over the budget 5,000"),
        verdict_of("c", "category_check failed: ads 1 and 6 are both in category 'travel'"),
    ]
    feedback = verifier_feedback(verdicts)
    assert feedback == (
        "budget_check failed: total cost 5,023 is 23 over the budget 5,000; "
        "category_check failed: ads 1 and 6 are both in category 'travel'"
    )
    prompt = draft_user_message("Pick 5 ads.", "Be greedy.", {"type": "object"}, feedback)
    assert "your" not in feedback and "budget_check failed: total cost 5,023 is 23 over the budget 5,000" in prompt


def test_a_late_verdict_is_an_invalid_draft_with_a_reason():
    verdict = late_verdict("d1", 0.8)
    assert not verdict.valid
    assert verdict.rule_results[0].message == "verification_timeout failed: no verdict within 0.8s"


def test_a_checked_draft_outranks_an_unchecked_one_of_equal_score():
    unchecked = Scored("fast", 0, valid=True, score=1.0, latency=0.0, answer="90")
    checked = Scored("slow", 1, valid=True, score=1.0, latency=0.5, answer="20", evidence=("arithmetic",))
    selection = select([unchecked, checked], max_selected=2)
    assert [d.draft_id for d in selection.selected] == ["slow", "fast"]
    assert selection.status == "computation_checked" and selection.verified_by == []


def test_a_program_and_a_prose_draft_reaching_one_answer_verify_it_whichever_is_best():
    def round_(prose_score: float, program_score: float) -> list[Scored]:
        return [
            Scored("prose", 0, True, prose_score, answer="72", evidence=("arithmetic",)),
            Scored("program", 1, True, program_score, answer="72.0", evidence=("program",), kind="program"),
            Scored("other", 2, True, 0.5, answer="70", evidence=("program",), kind="program"),
        ]

    by_prose = select(round_(1.0, 0.9), policy="best_of", max_selected=1)
    assert (by_prose.selected[0].draft_id, by_prose.status) == ("prose", "verified")  # it gained cross_check
    assert by_prose.verified_by == ["arithmetic", "cross_check"]
    by_program = select(round_(0.9, 1.0), policy="best_of", max_selected=1)
    assert (by_program.selected[0].draft_id, by_program.status) == ("program", "verified")
    other = round_(1.0, 1.0)[2]
    assert select([other], max_selected=1).status == "computation_checked"  # a program alone: it ran, that is all


def test_the_ranking_lists_every_draft_valid_ones_as_ranked_then_the_others_by_score():
    drafts = [
        Scored("bad-high", 0, False, 0.6, answer="1"),
        Scored("good", 1, True, 0.9, answer="72"),
        Scored("bad-low", 2, False, 0.1, answer="2"),
        Scored("fine", 3, True, 0.5, answer="72"),
    ]
    selection = select(drafts, max_selected=1)
    assert [d.draft_id for d in selection.selected] == ["good"]
    assert selection.ranking == ("good", "fine", "bad-high", "bad-low")
    invalid_only = select([d for d in drafts if not d.valid], max_selected=1)
    assert invalid_only.ranking == ("bad-high", "bad-low") and invalid_only.selected[0].draft_id == "bad-high"
