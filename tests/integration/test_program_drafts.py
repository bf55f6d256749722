"""Program drafts through the four real services (issue 24, item 1): a round of 3 drafts with 1 program is 2 prose
drafts and, last, 1 program whose text starts with the prefilled fence. Whether the small model writes a correct
program is not asserted."""

from __future__ import annotations

import json

import grpc
import pytest

from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb
from deliberate_client.client import DeliberateClient, build_request

from .conftest import gsm8k_questions

pytestmark = pytest.mark.model


def test_a_round_of_three_drafts_with_one_program_is_two_prose_drafts_and_a_program(stack):
    request = build_request(
        gsm8k_questions(1)[0]["question"], num_drafts=3, max_new_tokens=32, refine_max_new_tokens=8, seed=7
    )
    request.program_drafts = 1
    with DeliberateClient(stack.address) as client:
        response = client.solve(request, timeout=240)

    for round_ in range(response.rounds):  # every round mixes them, re-drafts included
        drafts = sorted((r.draft for r in response.drafts if r.round == round_), key=lambda d: d.index)
        assert [d.kind for d in drafts] == ["prose", "prose", "program"], [d.text for d in drafts]
        program = drafts[2]
        assert program.text.startswith("```python\n"), program.text
        assert program.strategy not in {d.strategy for d in drafts[:2]}
        assert not any(d.text.startswith("```python") for d in drafts[:2])
    # The Scheduler asks the Verifier for the program check: the program ran in the sandbox, prose abstained.
    for report in response.drafts:
        if report.aborted.reason == "quorum" or report.duplicate_of:
            continue  # cancelled before verification, or sharing another draft's verdict
        program_results = [r for r in report.verdict.rule_results if r.rule_id == "program"]
        assert program_results, [r.message for r in report.verdict.rule_results]
        if report.draft.kind == "prose":
            assert program_results[0].abstained
        else:
            assert not program_results[0].abstained, program_results[0].message
    selected = [r for r in response.drafts if r.selected]
    assert all(set(r.components.signals) >= {"kind_share", "cross_check"} for r in selected)


def test_more_programs_than_drafts_is_refused_naming_the_field(stack):
    request = build_request("What is 2 + 2?", num_drafts=2)
    request.program_drafts = 3
    with DeliberateClient(stack.address) as client, pytest.raises(grpc.RpcError) as raised:
        client.solve(request, timeout=30)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert raised.value.details().startswith("program_drafts: must be at most num_drafts (2), got 3")


def test_an_ad_decision_runs_its_program_over_the_request_s_data_and_never_answers_with_the_reference_plan(
    stack, otlp_receiver
):
    """Decision programs through the four services on the test model: the program draft ran in the sandbox over
    `ctx` (its verdict has the program rule, not a parse of its text), every re-draft's feedback is in the response
    and the round's span, and an UNVERIFIED answer carries the ad pack's optimum beside it, never as it."""
    from deliberate_client.examples import ads

    request = build_request(
        ads.prompt(),
        num_drafts=2,
        max_new_tokens=48,
        refine_max_new_tokens=8,
        seed=3,
        output_schema=json.dumps(ads.OUTPUT_SCHEMA),
        context=ads.context(),
        constraints=ads.CONSTRAINTS,
        program_drafts=1,
    )
    with DeliberateClient(stack.address) as client:
        response = client.solve(request, timeout=300)

    programs = [r for r in response.drafts if r.draft.kind == "program" and not r.duplicate_of]
    opening = "```python\nimport json\n\n"
    assert programs and all(r.draft.text.startswith(opening) for r in programs)
    described = 'catalog = ctx["catalog"]  # a list of 100 dicts; each dict has the keys '
    assert all(described in r.draft.text for r in programs)
    for report in programs:
        if report.aborted.reason:
            continue
        ran = [r for r in report.verdict.rule_results if r.rule_id == "program"]
        assert ran and not ran[0].abstained, [r.message for r in report.verdict.rule_results]
    assert len(response.redraft_feedback) == response.rounds - 1
    rounds = [s for s in otlp_receiver.trace(response.trace_id) if s["name"] == "deliberate.round"]
    feedback = sorted(s["attributes"].get("deliberate.round.feedback", "") for s in rounds)
    assert [f for f in feedback if f] == sorted(response.redraft_feedback)
    if response.status == pb.SOLVE_STATUS_UNVERIFIED:
        reference = response.reference_plan
        assert reference.rule_pack == "ad_selection" and reference.quality.ratio == 1.0
        assert json.loads(reference.answer)["selected_ids"] == [9, 23, 54, 82, 97]  # the shipped catalog's optimum
        assert not response.HasField("quality")
    else:
        assert not response.HasField("reference_plan") and response.quality.objective > 0
