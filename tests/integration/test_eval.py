"""`deliberate bench eval` end to end against the real services: 2 GSM8K problems and 1 ad catalog, tiny budgets."""

from __future__ import annotations

import json

import pytest

from deliberate_client.cli import main

from .conftest import gsm8k_questions

pytestmark = pytest.mark.timeout(240)


def run_eval(stack, data, results, *extra: str) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(
            [
                "bench",
                "eval",
                *("--address", stack.address),
                *("--drafter-address", stack.address_of("drafter")),
                *("--refiner-address", stack.address_of("refiner")),
                *("--data", str(data), "--limit", "2", "--sizes", "1,2"),
                *("--ads", "1", "--ads-catalog-size", "8"),
                *("--max-new-tokens", "8", "--refine-max-new-tokens", "8", "--timeout", "120"),
                *("--results-dir", str(results), "--name", "it"),
                *extra,
            ]
        )
    assert exit_.value.code == 0


def test_eval_end_to_end_writes_a_summary_whose_counts_add_up(stack, tmp_path, capsys):
    data = tmp_path / "problems.jsonl"
    data.write_text("".join(json.dumps(q) + "\n" for q in gsm8k_questions(2)))
    results = tmp_path / "results"
    run_eval(stack, data, results)

    runs = (results / "it.runs.jsonl").read_text().splitlines()
    assert len(runs) == 3  # 2 problems + 1 catalog, one line each
    result = json.loads((results / "it.json").read_text())
    assert {"problems", "model", "engine", "seed", "configs", "ad_selection"} <= set(result)
    assert result["problems"] == 2 and result["seed"] == 2026 and result["errors"] == 0
    assert result["peak_rss_mb_by_service"] is None  # services started elsewhere: not measured
    names = [c["name"] for c in result["configs"]]
    for name in ["single", "majority@1", "majority@2", "best_of@1", "best_of@2", "pipeline@1", "pipeline@2"]:
        assert name in names
    assert [n for n in names if n.startswith("select:")] == [
        "select:score",
        "select:score+stddev",
        "select:score+stddev+latency",
        "select:score+stddev+latency+agreement",
    ]
    keys = {"name", "n", "accuracy", "ci_low", "ci_high", "diff_vs_single", "diff_ci_low", "diff_ci_high"}
    keys |= {"latency_p50_s", "latency_p95_s", "latency_p99_s", "tokens_per_problem", "peak_rss_mb"}
    for config in result["configs"]:
        assert keys <= set(config), config["name"]
        assert config["problems"] == 2
        assert config["correct"] + sum(config["failures"].values()) == 2
        assert 0.0 <= config["ci_low"] <= config["accuracy"] <= config["ci_high"] <= 1.0
        assert config["latency_p50_s"] > 0 and config["tokens_per_problem"] > 0
        if config["name"].startswith("pipeline@"):
            assert {"verified_precision", "unverified_accuracy"} <= set(config)
            assert sum(config["statuses"].values()) == 2
    ads = result["ad_selection"]
    assert ads["instances"] == 1 and [c["name"] for c in ads["configs"]] == ["single", "pipeline@2"]
    table = (results / "it.md").read_text()
    assert "| `pipeline@2` | 2 |" in table and "Ad selection, 1 catalogs" in table

    # A rerun finds every problem done: no service call, no new line, the same summary.
    run_eval(stack, data, results)
    assert (results / "it.runs.jsonl").read_text().splitlines() == runs
    assert json.loads((results / "it.json").read_text())["configs"] == result["configs"]


def test_eval_reports_the_pipeline_both_ways(stack, tmp_path):
    data = tmp_path / "problems.jsonl"
    data.write_text("".join(json.dumps(q) + "\n" for q in gsm8k_questions(1)))
    results = tmp_path / "results"
    run_eval(stack, data, results, "--early-stop", "both", "--limit", "1")

    records = [json.loads(line) for line in (results / "it.runs.jsonl").read_text().splitlines()]
    assert len(records) == 2  # 1 problem + 1 catalog, each solved both ways
    for record in records:
        assert record["settings"]["early_stop"] == "both"
        without = record["solve_without_early_stop"]
        assert "error" not in without and without["latency_s"] > 0 and without["completion_tokens"] > 0
        assert "early_stop" in record["solve"]  # what early stopping did on the other side
    comparison = json.loads((results / "it.json").read_text())["early_stop"]
    assert (comparison["n"], comparison["n_gsm8k"], comparison["n_ads"]) == (2, 1, 1)
    assert comparison["latency_ratio"] > 0 and comparison["token_ratio"] > 0
    assert "The pipeline both ways" in (results / "it.md").read_text()
