"""The frontier's rule and its reading of recorded runs (bench/deliberate_bench/eval/frontier.py)."""

import json

import pytest

from deliberate_bench.eval import frontier


def config(name, accuracy, p50, oracle=False):
    return {"name": name, "accuracy": accuracy, "latency_p50_s": p50, "oracle": oracle}


def test_the_frontier_keeps_only_what_nothing_faster_beats_and_never_an_oracle():
    configs = [
        config("single:0.5b", 0.2, 5.0),
        config("single:1.5b", 0.4, 15.0),
        config("majority@5:0.5b", 0.3, 30.0),  # slower than single:1.5b and less accurate: off
        config("pipeline@5:1.5b", 0.6, 90.0),
        config("pass@5:1.5b", 0.9, 80.0, oracle=True),
    ]
    assert frontier.on_frontier(configs) == ["single:0.5b", "single:1.5b", "pipeline@5:1.5b"]


def test_the_default_is_the_most_accurate_pipeline_within_the_latency_budget():
    configs = [
        config(frontier.TODAY, 0.40, 30.0),
        config("pipeline@5:1.5b", 0.70, 76.0),  # over 2.5 x 30 s
        config("pipeline@3:1.5b", 0.60, 60.0),
        config("pipeline@5:0.5b/1.5b", 0.60, 40.0),  # as accurate and faster: wins the tie
        config("single:program:1.5b", 0.65, 10.0),  # not a pipeline deployment
    ]
    assert frontier.chosen_default(configs) == ("pipeline@5:0.5b/1.5b", 75.0)


def record(problem, answer, cross_answer):
    """A run record as `deliberate bench eval` writes it, with just the fields the frontier reads."""
    draft = {"round": 0, "kind": "prose", "answer": answer, "valid": True, "score": 1.0, "completion_tokens": 10,
             "generation_latency_s": 4.0, "verify_latency_s": 0.1, "finish_reason": "STOP", "components": {},
             "selected": True, "duplicate_of": -1, "evidence": [], "failed_rules": []}  # fmt: skip
    return {
        "task": "gsm8k", "id": f"train:{problem}", "gold": "7",
        "single": {"answer": answer, "latency_s": 2.0, "completion_tokens": 10, "finish_reason": "STOP"},
        "single_program": {"answer": "7", "latency_s": 1.0, "completion_tokens": 5, "finish_reason": "STOP"},
        "solve": {"answer": answer, "status": "VERIFIED", "latency_s": 9.0, "completion_tokens": 60,
                  "drafts": [dict(draft, index=i) for i in range(5)]},
        "subsets": {"3": {"answer": answer, "status": "VERIFIED", "latency_s": 6.0, "completion_tokens": 35}},
        "cross_refine": {"answer": cross_answer, "latency_s": 8.0, "completion_tokens": 55},
        "rss_mb": {"drafter": 1000.0, "refiner": 900.0, "scheduler": 100.0, "verifier": 50.0},
    }  # fmt: skip


def test_rows_come_from_the_problems_every_run_holds(tmp_path):
    small, large = frontier.MODELS
    runs = {small: [record(1, "7", "7"), record(2, "8", "7")], large: [record(1, "7", "8")]}
    for model, records in runs.items():
        (tmp_path / f"frontier-{model}.runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    result = frontier.frontier(tmp_path)
    by_name = {c["name"]: c for c in result["configs"]}
    assert result["problems"] == 1  # train:2 is in one run only
    assert by_name["single:program:0.5b"]["accuracy"] == 1.0
    assert by_name["pipeline@5:0.5b/1.5b"]["accuracy"] == 1.0
    assert by_name["pipeline@5:1.5b/0.5b"]["accuracy"] == 0.0
    assert by_name["pipeline@5:1.5b/0.5b"]["refiner_model"] == small
    assert by_name["pipeline@5:0.5b"]["peak_rss_mb"] == 2050.0  # the whole stack, summed
    assert by_name["single:0.5b"]["peak_rss_mb"] == 1000.0  # the Drafter alone
    assert result["default"] in by_name and "2.5x" in result["rule"]


@pytest.mark.parametrize("name", ["single:0.5b", "pipeline@5:1.5b/0.5b"])
def test_the_markdown_lists_every_row(tmp_path, name):
    small, large = frontier.MODELS
    for model in (small, large):
        (tmp_path / f"frontier-{model}.runs.jsonl").write_text(json.dumps(record(1, "7", "7")) + "\n")
    assert f"| {name} " in frontier.markdown(frontier.frontier(tmp_path))
