"""Verdicts that mean something, through the real processes: abstentions, evidence, the default arithmetic
pack, and a status that is VERIFIED only when a substantive check vouches for the answer."""

from __future__ import annotations

import grpc
import pytest

from deliberate_api.common.v1 import common_pb2
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb
from deliberate_api.verifier.v1 import verifier_service_pb2, verifier_service_pb2_grpc
from deliberate_client.client import DeliberateClient, build_request

pytestmark = pytest.mark.model

ARITHMETIC = common_pb2.Constraint(rule_pack="arithmetic")


def verify_with_arithmetic(stack, *texts: str):
    request = verifier_service_pb2.VerifyDraftsRequest(
        prompt="Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May.",
        drafts=[common_pb2.Draft(id=f"d{i}", index=i, text=t) for i, t in enumerate(texts)],
        constraints=[ARITHMETIC],
    )
    with grpc.insecure_channel(stack.address_of("verifier")) as channel:
        return verifier_service_pb2_grpc.VerifierServiceStub(channel).VerifyDrafts(request, timeout=30).verdicts


def arithmetic(verdict) -> common_pb2.RuleResult:
    return next(r for r in verdict.rule_results if r.rule_id == "arithmetic")


def test_the_real_verifier_abstains_checks_latex_and_rejects_a_hidden_rounding(stack):
    no_equation, latex, rounded, marked = verify_with_arithmetic(
        stack,
        "She sold 72 clips altogether.\nFinal answer: 72",
        "In May: \\( \\frac{48}{2} = 24 \\). Altogether: $48 + 24 = 72$.\n\\boxed{72}",
        "In May she sold 48 / 5 = 10 clips, so 10 + 10 = 20.\nFinal answer: 20",
        "Each of 5 boxes holds about 48 / 5 = 10 clips.\nFinal answer: 10",
    )

    assert no_equation.valid and arithmetic(no_equation).abstained
    assert arithmetic(no_equation).message == "arithmetic abstained: no equation to recompute"
    assert list(no_equation.evidence) == []

    assert latex.valid and latex.extracted_answer == "72"
    assert arithmetic(latex).substantive and not arithmetic(latex).abstained
    assert list(latex.evidence) == ["arithmetic"]

    assert not rounded.valid
    assert arithmetic(rounded).message == "arithmetic failed: 1 of 2 equations wrong: 48 / 5 = 10 (actually 9.6)"

    assert marked.valid and list(marked.evidence) == ["arithmetic"]  # "about" marks the rounding


def short_request(**options) -> pb.SolveRequest:
    return build_request(
        "What is 12 + 30?", num_drafts=2, max_new_tokens=24, refine_max_new_tokens=8, seed=3, **options
    )


def best_draft(response: pb.SolveResponse) -> pb.DraftReport:
    return next(r for r in response.drafts if r.draft.id == response.selected_draft_ids[0])


def assert_status_matches_the_evidence(response: pb.SolveResponse) -> None:
    best = best_draft(response)
    if not best.verdict.valid:
        assert response.status == pb.SOLVE_STATUS_UNVERIFIED
        assert list(response.verified_by) == []
    elif response.status == pb.SOLVE_STATUS_COMPUTATION_CHECKED:  # arithmetic recomputed or a program run, no more
        assert best.verdict.evidence and set(best.verdict.evidence) <= {"arithmetic", "program"}
        assert list(response.verified_by) == [] and "not the plan" in response.status_reason
    elif best.verdict.evidence:
        assert response.status == pb.SOLVE_STATUS_VERIFIED
        # The Verifier's evidence, and cross_check where the selection found a program that reached the answer.
        assert [e for e in response.verified_by if e != "cross_check"] == list(best.verdict.evidence)
        assert "checked by " in response.status_reason
    else:
        assert response.status == pb.SOLVE_STATUS_UNCHECKED
        assert list(response.verified_by) == []
        assert "no substantive check applied" in response.status_reason
        assert response.status_reason.endswith("the answer is not verified") or "refinement rejected" in (
            response.status_reason
        )


def test_a_free_text_solve_gets_the_arithmetic_pack_and_an_honest_status(stack):
    with DeliberateClient(stack.address) as client:
        response = client.solve(short_request(), timeout=240)
        state = client.stub.GetState(pb.GetStateRequest(), timeout=10)

    for report in response.drafts:
        if report.verdict.valid:  # fast-fail: an invalid draft may stop before the pack runs
            assert "arithmetic" in [r.rule_id for r in report.verdict.rule_results], "the default pack ran"
        assert report.components.delta == pytest.approx(state.weights.delta)
    assert state.weights.delta > 0
    assert_status_matches_the_evidence(response)


def test_format_checks_alone_never_make_an_answer_verified(stack):
    # Prose drafts only: a program draft's run is a substantive check of its own.
    request = short_request(disable_default_arithmetic=True, program_drafts=0)
    with DeliberateClient(stack.address) as client:
        response = client.solve(request, timeout=240)

    for report in response.drafts:
        assert "arithmetic" not in [r.rule_id for r in report.verdict.rule_results]
        assert list(report.verdict.evidence) == []
    assert response.status in (pb.SOLVE_STATUS_UNCHECKED, pb.SOLVE_STATUS_UNVERIFIED)
    assert list(response.verified_by) == []
    assert_status_matches_the_evidence(response)
