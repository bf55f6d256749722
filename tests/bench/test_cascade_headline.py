"""make eval-cascade's headline from a runs file: every row on the same problems, the vote and the oracle over the
complete round's drafts, the paired difference to one greedy program, the cascade's first-stage share and VERIFIED
precision, and the issue's targets judged on them."""

from __future__ import annotations

from deliberate_bench.eval.cascade_headline import headline, markdown, stop_rule, vote

MODEL = "qwen2.5-coder-1.5b"


def drafted(*answers: str | None) -> list[dict]:
    return [{"round": 0, "index": i, "answer": a, "generation_latency_s": 20.0} for i, a in enumerate(answers)]


def record(
    i: int, program: str, prose: str, complete: list[str | None], cascade: str, status: str, stages: int
) -> dict:
    stop = (
        "settled: a valid prose draft and a valid program agree on 7" if stages == 1 else "not settled: 8 drafts spent"
    )
    return {
        "task": "gsm8k", "id": f"train:{i}", "gold": "7", "settings": {"model": MODEL}, "code": {"commit": "abc"},
        "single_program": {"answer": program, "latency_s": 5.0, "completion_tokens": 100},
        "single": {"answer": prose, "latency_s": 7.0, "completion_tokens": 140},
        "round_complete": {"answer": complete[0], "status": "VERIFIED", "latency_s": 25.0, "completion_tokens": 600,
                           "drafts": drafted(*complete)},
        "solve": {"answer": cascade, "status": status, "latency_s": 9.0 * stages, "completion_tokens": 240 * stages,
                  "rounds": 1, "round_plan": {"stages": stages, "stop_reason": stop}},
    }  # fmt: skip


RECORDS = [
    record(1, "7", "7", ["7", "7", "3", "7", "7"], "7", "VERIFIED", 1),
    record(2, "3", "7", ["3", "7", "7", "3", None], "7", "VERIFIED", 3),
    record(3, "3", "3", ["3", "3", "4", "5", "7"], "3", "UNCHECKED", 3),
    record(4, "7", "7", ["7", "7", "7", "7", "7"], "7", "VERIFIED", 1),
]


def test_a_plain_vote_counts_every_answered_draft_under_the_one_answer_identity():
    assert vote(drafted("3", "7", "$7.00", None)) == "7"
    assert vote(drafted(None, None)) is None


def test_every_row_is_judged_on_the_same_problems_against_one_greedy_program():
    result = headline(RECORDS, "eval-cascade.runs.jsonl")
    rows = {c["name"]: c for c in result["configs"]}
    assert result["baseline_row"] == f"single:program:{MODEL}" and result["problems"] == 4
    assert rows[f"single:program:{MODEL}"]["accuracy"] == 0.5 and rows["cascade"]["accuracy"] == 0.75
    assert rows["cascade"]["paired_vs_baseline_points"] == 25.0, "one problem gained, none lost"
    assert rows["majority@5"]["accuracy"] == 0.5 and rows["pass@5"]["accuracy"] == 1.0
    assert rows["cascade"]["first_stage_share"] == 0.5
    assert (rows["cascade"]["verified_precision"], rows["cascade"]["rest_accuracy"]) == (1.0, 0.0)
    assert result["commits"] == ["abc"]


def test_the_targets_say_which_figures_are_met():
    targets = {t["target"]: t for t in headline(RECORDS, "runs")["targets"]}
    margin = next(t for name, t in targets.items() if name.startswith("cascade ≥ single:program"))
    assert margin["value"][0] == 25.0 and not margin["met"], "4 problems: the paired interval reaches below 0"
    p50 = targets["cascade p50 ≤ 2× the baseline's"]
    assert p50["value"] == round(18.0 / 5.0, 2) and not p50["met"]
    assert targets["cascade ≥ majority@5 over complete drafts"]["met"]
    assert "| `cascade` | 75.0%" in markdown(headline(RECORDS, "runs"))


def test_a_stop_rule_is_named_without_the_numbers_it_saw():
    assert stop_rule("settled: a valid program draft's token confidence 8.05 ≥ 7.8") == (
        "settled: a valid program draft's token confidence ≥ 7.8"
    )
    assert stop_rule("settled: 2 valid drafts agree on 4999999999999999/250000000000000") == (
        "settled: 2 valid drafts agree"
    )
    assert stop_rule("not settled: 4 drafts spent") == "not settled: 4 drafts spent"


def test_why_says_per_stop_rule_what_each_row_got_on_those_problems():
    why = {r["rule"]: r for r in headline(RECORDS, "runs")["by_stop_rule"]}
    settled, spent = why["settled: a valid prose draft and a valid program agree"], why["not settled: 8 drafts spent"]
    assert settled["problems"] == 2 and settled["accuracy"]["cascade"] == 1.0
    assert spent["problems"] == 2 and spent["accuracy"]["cascade"] == 0.5
    assert spent["accuracy"]["baseline"] == 0.0 and spent["accuracy"]["pass@5"] == 1.0
    assert "| not settled: 8 drafts spent | 2 | 50.0% | 0.0% |" in markdown(headline(RECORDS, "runs"))
