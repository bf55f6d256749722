"""Risk-adjusted selection, self-consistency, structural duplicates and re-drafting feedback."""

from __future__ import annotations

import pytest

from deliberate.common.v1 import common_pb2
from deliberate.drafter.prompts import draft_user_message
from deliberate.scheduler.pipeline import late_verdict, verifier_feedback
from deliberate.scheduler.selection import Scored, select, structural_signature
from deliberate.scheduler.v1 import scheduler_service_pb2 as pb
from deliberate.scheduler.weights import Weights


def test_final_score_follows_the_formula():
    drafts = [Scored("a", 0, True, 0.9, latency=0.5), Scored("b", 1, True, 0.7, latency=0.0)]
    selection = select(drafts, max_selected=2, weights=Weights(alpha=1.0, beta=0.3, gamma=0.02))
    agreement = 1 - 0.1  # population stddev of [0.9, 0.7] is 0.1
    assert selection.components["a"].agreement == pytest.approx(agreement)
    assert selection.components["a"].final == pytest.approx(0.9 + 0.3 * agreement - 0.02 * 0.5)
    assert selection.components["b"].final == pytest.approx(0.7 + 0.3 * agreement)


def test_a_slow_verification_loses_when_gamma_is_high():
    drafts = [Scored("slow", 0, True, 0.80, latency=1.0), Scored("fast", 1, True, 0.78, latency=0.0)]
    assert select(drafts, 1, Weights(gamma=0.01)).selected[0].draft_id == "slow"
    assert select(drafts, 1, Weights(gamma=0.05)).selected[0].draft_id == "fast"


def test_agreement_on_the_answer_breaks_ties():
    drafts = [
        Scored("lonely", 0, True, 0.8, answer="41"),
        Scored("majority", 1, True, 0.8, answer="42"),
        Scored("also", 2, True, 0.8, answer="42"),
    ]
    selection = select(drafts, max_selected=1)
    assert selection.selected[0].draft_id == "majority"
    assert selection.components["majority"].answer_share == pytest.approx(2 / 3)


def test_invalid_drafts_never_compete_with_valid_ones():
    drafts = [Scored("invalid", 0, False, 1.0), Scored("valid", 1, True, 0.1)]
    assert [d.draft_id for d in select(drafts, 2).selected] == ["valid"]


def test_structural_signature_ignores_wording_but_not_numbers():
    a = structural_signature("First, 48 / 2 = 24. Then 48 + 24 = 72. Final answer: 72")
    b = structural_signature("We get 48/2=24 and so 48+24 = 72; the answer is 72.")
    c = structural_signature("48 / 2 = 24, 48 + 24 = 73. Final answer: 73")
    assert a == b != c
    assert structural_signature("costs 1,200.50") == structural_signature("costs 1200.5")
    assert structural_signature("no numbers here") != structural_signature("other words")


def report(draft_id: str, *messages: str) -> pb.DraftReport:
    rules = [common_pb2.RuleResult(rule_id=m.split()[0], passed=False, message=m, hard=True) for m in messages]
    return pb.DraftReport(draft=common_pb2.Draft(id=draft_id), verdict=common_pb2.DraftVerdict(rule_results=rules))


def test_redraft_feedback_carries_the_verifiers_messages_into_the_next_prompt():
    reports = [
        report("a", "budget_check failed: sum=5023 > 5000"),
        report("b", "budget_check failed: sum=5023 > 5000"),
        report("c", "category_check failed: ads 1 and 6 are both in category 'travel'"),
    ]
    feedback = verifier_feedback(reports)
    assert feedback == (
        "budget_check failed: sum=5023 > 5000; category_check failed: ads 1 and 6 are both in category 'travel'"
    )
    prompt = draft_user_message("Pick 5 ads.", "Be greedy.", {"type": "object"}, feedback)
    assert "your" not in feedback and "budget_check failed: sum=5023 > 5000" in prompt


def test_a_late_verdict_is_an_invalid_draft_with_a_reason():
    verdict = late_verdict("d1", 0.8)
    assert not verdict.valid
    assert verdict.rule_results[0].message == "verification_timeout failed: no verdict within 0.8s"
