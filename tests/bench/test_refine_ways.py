"""`deliberate bench refine-ways` without a model: the recorded rounds it replays, the recording it hands the
`recorded` engine, what it reads from a final response, and the default its rule picks."""

from __future__ import annotations

import json

from deliberate_api.common.v1 import common_pb2
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb
from deliberate_bench.live import refine_ways
from deliberate_bench.live.refine_ways import outcome, recorded_rounds, recording_lines, summary


def runs_record(problem_id: str, kinds: list[str]) -> dict:
    drafts = [{"round": 0, "index": i, "kind": kind, "text": f"```python\nprint({i})\n```" if kind == "program"
               else f"{i} + 1 = {i + 1}\nFinal answer: {i + 1}"} for i, kind in enumerate(kinds)]  # fmt: skip
    drafts.append({"round": 1, "index": 0, "kind": "prose", "text": "a re-draft"})
    question = f"Question {problem_id}?"
    return {"task": "gsm8k", "id": problem_id, "question": question, "gold": "1", "solve": {"drafts": drafts}}


def test_the_first_rounds_are_read_with_the_strategies_the_drafter_gave_them(tmp_path):
    runs = tmp_path / "drafts.runs.jsonl"
    records = [runs_record("a", ["prose"] * 3 + ["program"] * 2), runs_record("b", ["program", "prose"])]
    runs.write_text("".join(json.dumps(r) + "\n" for r in records))
    problems = recorded_rounds(runs, limit=5)
    assert [p["id"] for p in problems] == ["a"]  # b's order of kinds is no plan a default round makes
    strategies = [strategy for strategy, _ in problems[0]["drafts"]]
    assert len(set(strategies)) == 5 and all(d["round"] == 0 for _, d in problems[0]["drafts"])
    lines = [json.loads(line) for line in recording_lines(problems).splitlines()]
    assert lines[3]["text"] == "print(3)\n```"  # the Drafter prefills the fence itself
    assert lines[0]["text"].startswith("0 + 1 = 1") and lines[0]["strategy"] == strategies[0]


def final(answer: str, status: int, evidence: list[str], extracted: str, refine_tokens: int) -> pb.SolveResponse:
    best = pb.DraftReport(
        draft=common_pb2.Draft(id="r-0-d1", usage=common_pb2.TokenUsage(completion_tokens=40)),
        verdict=common_pb2.DraftVerdict(evidence=evidence, extracted_answer=extracted),
    )
    return pb.SolveResponse(answer=answer, status=status, drafts=[best], selected_draft_ids=["r-0-d1"],
                            usage=common_pb2.TokenUsage(completion_tokens=40 + refine_tokens))  # fmt: skip


def test_an_answer_that_left_a_checked_plan_is_counted_and_a_plain_final_line_is_recognized():
    changed = outcome(final("Steps.\nFinal answer: 8", pb.SOLVE_STATUS_VERIFIED, ["program"], "7", 30), "8")
    assert changed["checked_answer_changed"] and changed["good"] and changed["final_line"]
    assert changed["refine_tokens"] == 30 and changed["selected"] == "d1"
    unchecked = outcome(final("Final answer: \\boxed{8}", pb.SOLVE_STATUS_UNCHECKED, [], "7", 0), "8")
    assert not unchecked["checked_answer_changed"] and not unchecked["final_line"]
    currency = outcome(final("Final answer: $8.00", pb.SOLVE_STATUS_UNCHECKED, [], "7", 0), "8")
    assert currency["final_line"] and currency["selected_answer"] == "7"
    inline_latex = outcome(final("Final answer: $8$", pb.SOLVE_STATUS_UNCHECKED, [], "7", 0), "8")
    assert not inline_latex["final_line"]


def way(good: int, tokens: float, n: int = 10) -> list[dict]:
    return [{"good": i < good, "refine_tokens": tokens, "refine_latency_s": tokens / 10,
             "first_content_after_drafts_s": 0.1, "final_line": True, "checked_answer_changed": False,
             "replaced": False, "prefix_chars": 0, "selected": "d0", "selected_answer": "7"}
            for i in range(n)]  # fmt: skip


def test_the_default_is_the_cheapest_way_within_the_allowance_of_the_best():
    assert refine_ways.ALLOWANCE_POINTS == 1.0

    def records(accuracies: dict[str, int]) -> list[dict]:
        rows = {w: way(accuracies[w], {"pass_through": 0, "refine": 100, "prefix": 150}[w]) for w in refine_ways.WAYS}
        return [{"ways": {w: {"grpc": rows[w][i]} for w in rows}} for i in range(10)]

    assert summary(records({"pass_through": 7, "refine": 7, "prefix": 7}))["default"] == "pass_through"
    lost = summary(records({"pass_through": 6, "refine": 7, "prefix": 7}))  # 10 points below on 10 problems
    assert lost["default"] == "refine" and lost["prefix_token_ratio"] == 1.5
    assert lost["ways"]["refine"]["accuracy"] == 70.0 and lost["same_selection_share"] == 1.0


def test_the_prefix_is_the_default_only_where_it_meets_its_targets():
    def records(prefix_tokens: float) -> list[dict]:
        rows = {"pass_through": way(5, 0), "refine": way(7, 100), "prefix": way(7, prefix_tokens)}
        return [{"ways": {w: {"grpc": rows[w][i]} for w in rows}} for i in range(10)]

    cheap = summary(records(60))  # passing through loses 20 points; the prefix saves 40 % of the tokens
    assert cheap["default"] == "prefix" and cheap["prefix_meets_targets"]
    dear = summary(records(80))  # saves 20 %: not enough, however much cheaper than refining from nothing
    assert dear["default"] == "refine" and not dear["prefix_meets_targets"]


def test_the_schedulers_default_way_is_the_one_the_measurement_chose():
    """The committed measurement (make refine-ways) chose the deployed default by the rule fixed before the run."""
    from deliberate.scheduler.settings import SchedulerSettings
    from deliberate_bench.results import LAB_FILES, read_runs

    measured = json.loads((LAB_FILES / "refine.json").read_text())
    again = summary(list(read_runs(LAB_FILES / "refine.runs.jsonl")))  # the rule applied again to the recorded calls
    assert SchedulerSettings.model_fields["final_text"].default == measured["default"] == again["default"]
    assert again["ways"] == measured["ways"]
