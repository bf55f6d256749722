"""What the `deliberate solve` CLI says about the status and the checks behind it."""

from __future__ import annotations

import argparse

from deliberate_api.common.v1 import common_pb2
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb
from deliberate_client.cli import request_from_args
from deliberate_client.progress import ProgressView, verified_by_lines


def solve_args(**overrides) -> argparse.Namespace:
    args = dict(
        prompt="What is 48 + 24?", example=None, constraints=None, check_arithmetic=False, num_drafts=1,
        max_new_tokens=None, refine_max_new_tokens=None, temperature=None, seed=None, schema=None, context=None,
    )  # fmt: skip
    args.update(overrides)
    return argparse.Namespace(**args)


def response(status, verified_by=(), judge=None) -> pb.SolveResponse:
    verdict = common_pb2.DraftVerdict(
        draft_id="d0",
        valid=True,
        rule_results=[
            common_pb2.RuleResult(rule_id="final_answer", passed=True, hard=True, message="final_answer passed: 72"),
            common_pb2.RuleResult(
                rule_id="arithmetic",
                passed=True,
                hard=True,
                substantive=True,
                message="arithmetic passed: 2 equations recomputed, all correct",
            ),
        ],
        evidence=list(verified_by),
    )
    if judge is not None:
        verdict.judge.CopyFrom(judge)
    return pb.SolveResponse(
        status=status,
        status_reason="reason",
        verified_by=list(verified_by),
        selected_draft_ids=["d0"],
        drafts=[pb.DraftReport(draft=common_pb2.Draft(id="d0"), verdict=verdict, selected=True)],
    )


def test_a_verified_answer_names_each_check_with_its_message():
    judge = common_pb2.JudgeVerdict(valid=True, score=0.9, hard=True)
    lines = verified_by_lines(response(pb.SOLVE_STATUS_VERIFIED, ["arithmetic", "judge"], judge))
    assert lines == [
        "checked arithmetic passed: 2 equations recomputed, all correct",
        "checked judge (hard) found it valid, score 0.90",
    ]


def test_other_statuses_name_no_checks():
    assert verified_by_lines(response(pb.SOLVE_STATUS_UNCHECKED)) == []
    assert verified_by_lines(response(pb.SOLVE_STATUS_UNVERIFIED, ["arithmetic"])) == []


def test_the_summary_prints_the_unchecked_status_and_the_delta_term(capsys):
    r = response(pb.SOLVE_STATUS_UNCHECKED)
    r.drafts[0].components.CopyFrom(pb.ScoreComponents(alpha=1.0, beta=0.3, delta=0.3, answer_share=1.0, score=1.0))
    ProgressView().summary(r)
    out = capsys.readouterr().out
    assert "status  UNCHECKED — reason" in out
    assert "+ 0.30·1.00" in out  # δ·answer_share
    assert "checked arithmetic" not in out


def test_no_default_arithmetic_reaches_the_request():
    assert request_from_args(solve_args(no_default_arithmetic=True)).disable_default_arithmetic
    assert not request_from_args(solve_args()).disable_default_arithmetic


def test_selection_policy_reaches_the_request():
    assert request_from_args(solve_args(selection_policy="majority")).selection_policy == "majority"
    assert request_from_args(solve_args()).selection_policy == ""  # the Scheduler's default


def test_program_drafts_reach_the_request_only_when_given():
    assert request_from_args(solve_args(program_drafts=2)).program_drafts == 2
    assert request_from_args(solve_args(program_drafts=0)).HasField("program_drafts")  # 0: prose only, explicitly
    assert not request_from_args(solve_args()).HasField("program_drafts")  # the Scheduler's default


def test_the_summary_shows_the_weighted_formula_only_for_the_weighted_policy(capsys):
    r = response(pb.SOLVE_STATUS_UNCHECKED)
    r.drafts[0].components.CopyFrom(pb.ScoreComponents(final=0.75, alpha=1.0, delta=0.3, score=1.0))
    r.selection_policy = "majority"
    ProgressView().summary(r)
    out = capsys.readouterr().out
    assert "ranked by majority" in out
    assert "final 0.750 (majority)" in out
    assert "1.00·1.00" not in out


def test_the_summary_prints_the_answer_when_it_is_not_the_one_that_streamed(capsys):
    """A rejected refinement is replaced by the best draft: the answer printed must be the one answered."""
    view = ProgressView()
    view.show(pb.SolveStreamResponse(refine_chunk=pb.RefineChunk(text='{"items": []}')))
    r = response(pb.SOLVE_STATUS_VERIFIED, ["arithmetic"])
    r.answer = '{"items": [{"sku": "TEA-100"}]}'
    view.summary(r)
    assert '\nanswer:\n{"items": [{"sku": "TEA-100"}]}\n' in capsys.readouterr().out
    r.answer = '{"items": []}'
    view.summary(r)
    assert "answer:" not in capsys.readouterr().out


def test_a_draft_line_says_where_it_ran_and_why_it_moved():
    from deliberate_client.progress import placement_note

    assert placement_note(pb.DraftReport()) == ""
    stayed = pb.DraftReport(placement=pb.DraftPlacement(replica="10.0.0.2:50052"))
    assert placement_note(stayed) == "  on 10.0.0.2:50052"
    moved = pb.DraftReport(placement=pb.DraftPlacement(replica="a:1", moved_from="b:2", moved_reason="lost"))
    assert placement_note(moved) == "  on a:1 (moved from b:2: lost)"
