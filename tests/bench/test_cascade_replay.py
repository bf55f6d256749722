"""The cascade replay: its latency model, and a policy run on recorded drafts as the live round runs it — the greedy
first stage, escalation in its order, the same `settled`, and the selection package's pick."""

from __future__ import annotations

import json

import pytest

from deliberate.scheduler.settings import SchedulerSettings
from deliberate.selection.adaptive import PROGRAM, PROSE, AdaptivePolicy
from deliberate_bench.replays.cascade import LatencyModel, Problem, run_policy, verified_single
from deliberate_bench.results import LAB_FILES

MODEL = LatencyModel(call_s=1.0, token_s=0.1, alpha=0.5)
CASCADE = AdaptivePolicy.parse("cscscs/start2/step2/q2+x/greedy")


def test_a_stage_costs_its_longest_draft_plus_a_share_of_each_step_another_draft_decodes_beside_it():
    assert MODEL.stage_seconds([10]) == pytest.approx(1.0 + 0.1 * 10)
    # 10 steps with two drafts decoding (1.5 each), then 10 with one.
    assert MODEL.stage_seconds([10, 20]) == pytest.approx(1.0 + 0.1 * (10 * 1.5 + 10))
    assert MODEL.stage_seconds([]) == 0.0


def draft(kind: str, answer: str, valid: bool = True, tokens: int = 10, index: int = 0) -> dict:
    text = f"```python\nprint({answer})\n```" if kind == PROGRAM else f"Final answer: {answer}"
    return {"round": 0, "index": index, "kind": kind, "text": text, "answer": answer, "valid": valid, "score": 1.0,
            "evidence": [], "finish_reason": "STOP", "completion_tokens": tokens}  # fmt: skip


def problem(greedy: tuple[str, str], sampled: dict[str, list[str]]) -> Problem:
    drafts = {kind: [draft(kind, a, index=i + 10 * (kind == PROGRAM)) for i, a in enumerate(answers)]
              for kind, answers in sampled.items()}  # fmt: skip
    return Problem("p", "72", {PROGRAM: draft(PROGRAM, greedy[0], index=91), PROSE: draft(PROSE, greedy[1], index=90)},
                   drafts, round_seconds=5.0)  # fmt: skip


def test_greedy_drafts_that_agree_settle_the_cascade_at_its_first_stage():
    outcome = run_policy(problem(("72", "72"), {PROSE: ["1", "2"], PROGRAM: ["3", "4"]}), CASCADE, 6, "majority", MODEL)
    assert (outcome.answer, outcome.drafts, outcome.first_stage) == ("72", 2, True)
    assert outcome.seconds == pytest.approx(MODEL.stage_seconds([10, 10]))


def test_disagreeing_drafts_escalate_two_at_a_time_until_the_answers_settle():
    disagreeing = problem(("70", "72"), {PROSE: ["71", "72"], PROGRAM: ["69", "70"]})
    outcome = run_policy(disagreeing, CASCADE, 6, "majority", MODEL)
    # Stage 2 adds a sampled program (69) and prose draft (71): no pair agrees; stage 3 adds 70 and 72.
    assert (outcome.drafts, outcome.first_stage) == (6, False)
    assert outcome.seconds == pytest.approx(3 * MODEL.stage_seconds([10, 10]))


def test_a_policy_needing_more_drafts_of_a_kind_than_recorded_cannot_be_replayed():
    assert run_policy(problem(("1", "2"), {PROSE: ["3"], PROGRAM: ["4"]}), CASCADE, 6, "majority", MODEL) is None


def test_a_greedy_single_pass_is_verified_with_the_live_rules():
    program = verified_single({"text": "```python\nx = 6 * 12\nprint(x)\n```", "completion_tokens": 9}, PROGRAM)
    assert (program["answer"], program["valid"], program["kind"]) == ("72", True, PROGRAM)
    wrong = verified_single({"text": "6 * 12 = 70\nFinal answer: 70", "completion_tokens": 9}, PROSE)
    assert wrong["valid"] is False, "the arithmetic pack recomputes 6 * 12"


def test_the_deployed_cascade_is_the_replays_choice():
    chosen = json.loads((LAB_FILES / "cascade_replay.json").read_text())["chosen"]
    fields = SchedulerSettings.model_fields
    assert fields["cascade_policy"].default == chosen["policy"]
    assert fields["cascade_max_drafts"].default == chosen["max_drafts"]
    assert fields["cascade_selection_policy"].default == chosen["selection"]
