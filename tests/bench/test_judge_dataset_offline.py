"""`deliberate bench dataset` and `deliberate bench train-judge` without a model: labels, deduplication, the split by
problem, resuming, the training target and the judge's scores."""

from __future__ import annotations

import json
import random

import pytest

from deliberate.verifier.judge import parse_judge_reply
from deliberate_api.common.v1 import common_pb2
from deliberate_bench.eval.dataset import Output, Task, build_record, example_tasks, new_records
from deliberate_bench.eval.labels import gsm8k_label, normalized, rules_label, split_of
from deliberate_bench.eval.train_judge import balanced, score_replies, target_text


def verdict(*failed: str, valid: bool | None = None, score: float = 1.0) -> common_pb2.DraftVerdict:
    results = [common_pb2.RuleResult(rule_id="r", passed=False, hard=True, message=m) for m in failed]
    results.append(common_pb2.RuleResult(rule_id="soft", passed=False, hard=False, message="soft note"))
    return common_pb2.DraftVerdict(valid=not failed if valid is None else valid, score=score, rule_results=results)


def test_a_gsm8k_draft_is_valid_iff_its_final_answer_equals_the_gold_one():
    assert gsm8k_label("48 / 2 = 24\n48 + 24 = 72\nFinal answer: 72", "72", verdict()) == {
        "valid": True,
        "score": 1.0,
        "error": None,
    }
    # Right by the gold answer even where a rule failed: the gold answer decides validity.
    assert gsm8k_label("Final answer: $72.00", "72", verdict("arithmetic failed: 1 wrong"))["valid"] is True


def test_a_wrong_gsm8k_draft_carries_the_rules_messages_or_what_is_wrong_without_the_gold_answer():
    wrong = gsm8k_label("2 + 2 = 5\nFinal answer: 5", "72", verdict("arithmetic failed: 2 + 2 = 5 (actually 4)"))
    assert wrong == {"valid": False, "score": 0.0, "error": "arithmetic failed: 2 + 2 = 5 (actually 4)"}
    assert gsm8k_label("Final answer: 70", "72", verdict())["error"] == "the final answer 70 is wrong"
    assert gsm8k_label("I do not know.", "72", verdict())["error"] == "no final answer"
    assert "72" not in gsm8k_label("Final answer: 70", "72", verdict())["error"]


def test_a_business_draft_is_labelled_by_the_rules_hard_failures_only():
    assert rules_label(verdict(score=0.9)) == {"valid": True, "score": 0.9, "error": None}
    failed = rules_label(verdict("budget_check failed: 5023 > 5000", "size_check failed", score=0.25))
    assert failed == {"valid": False, "score": 0.25, "error": "budget_check failed: 5023 > 5000; size_check failed"}


def test_the_split_is_by_problem_deterministic_and_near_the_share():
    ids = [f"gsm8k:{i}" for i in range(4000)]
    splits = [split_of(i, 0.12) for i in ids]
    assert splits == [split_of(i, 0.12) for i in ids]
    assert 0.10 < splits.count("validation") / len(ids) < 0.14
    assert {split_of(i, 0.0) for i in ids} == {"train"}


def task(problem: str = "gsm8k:1", gold: str | None = "72") -> Task:
    return Task(problem, problem, "gsm8k", "How many?", 7, [{"rulePack": "arithmetic"}], gold=gold)


def draft(text: str) -> common_pb2.Draft:
    return common_pb2.Draft(text=text, strategy="step by step", finish_reason=common_pb2.FINISH_REASON_STOP)


def test_a_record_has_the_documented_fields():
    record = build_record(task(), draft("Final answer: 72"), verdict(), "train", "smollm2-135m")
    assert set(record) == {"prompt", "draft", "constraints", "context", "output_schema", "label", "meta"}
    assert record["constraints"] == [{"rulePack": "arithmetic"}]
    assert record["meta"]["model"] == "smollm2-135m" and record["meta"]["split"] == "train"
    assert record["meta"]["finish_reason"] == "STOP" and record["meta"]["problem_id"] == "gsm8k:1"
    json.dumps(record)  # serializable as is


def test_duplicates_are_dropped_per_problem_after_normalizing():
    seen: set = set()
    records = [
        build_record(task("gsm8k:1"), draft(text), verdict(), "train", "m")
        for text in ("Final answer: 72.", "final  answer: 72", "Final answer: 70", "   ")
    ]
    kept = new_records(records, seen)
    assert [r["draft"] for r in kept] == ["Final answer: 72.", "Final answer: 70"]
    # The same text for another problem is no duplicate; for the same problem, later, it is.
    other = build_record(task("gsm8k:2"), draft("Final answer: 72"), verdict(), "train", "m")
    assert new_records([other, records[1]], seen) == [other]
    assert normalized("A  b\n C!") == "a b c"


def test_output_resumes_without_duplicates_and_keeps_problems_on_one_side(tmp_path):
    output = Output(tmp_path / "ds")
    first = [build_record(task("gsm8k:1"), draft(f"Final answer: {n}"), verdict(), "validation", "m") for n in (1, 2)]
    output.write(first, "gsm8k:1", drafts=2)
    assert output.done_runs() == {"gsm8k:1"}
    assert [r["draft"] for r in output.records("validation")] == ["Final answer: 1", "Final answer: 2"]
    assert output.records("train") == []
    # A rerun starts from what is on disk: the same drafts again are not written twice.
    again = new_records(first, output.seen())
    assert again == []


def test_every_registered_worked_example_becomes_draft_batches_of_one_problem():
    from deliberate_client.cli import EXAMPLES

    tasks = example_tasks(sorted(EXAMPLES), runs=3, seed=10)
    assert len(tasks) == 3 * len(EXAMPLES)
    for t in tasks:
        example = EXAMPLES[t.source.removeprefix("example:")]()
        assert t.prompt == example["prompt"] and t.gold is None
        assert t.constraints == list(example.get("constraints", []))
    ads = [t for t in tasks if t.source == "example:ad-selection"]
    assert {t.problem_id for t in ads} == {"example:ad-selection"}
    assert [t.seed for t in ads] == [10, 11, 12] and len({t.run_id for t in ads}) == 3


def test_the_training_target_is_strict_json_the_verifier_parses():
    for label in ({"valid": True, "score": 1.0, "error": None}, {"valid": False, "score": 0.0, "error": "bad sum"}):
        answer = parse_judge_reply(target_text(label))
        assert not isinstance(answer, str)
        assert answer.valid == label["valid"] and answer.score == label["score"]
        assert json.loads(target_text(label)) == label


def labelled(valid: bool, n: int) -> list[dict]:
    return [{"label": {"valid": valid, "score": float(valid), "error": None}, "id": k} for k in range(n)]


def test_balancing_repeats_valid_records_up_to_the_share_and_keeps_every_record():
    records = labelled(True, 2) + labelled(False, 70)
    chosen = balanced(records, 0.3, random.Random(1))
    share = sum(r["label"]["valid"] for r in chosen) / len(chosen)
    assert share == pytest.approx(0.3, abs=0.01)
    assert all(r in chosen for r in records)
    assert len(balanced(labelled(False, 5), 0.3, random.Random(1))) == 5  # nothing valid to repeat


def test_judge_scores_count_an_unparsable_reply_as_wrong_and_not_valid():
    records = labelled(True, 2) + labelled(False, 2)
    replies = [
        '{"valid": true, "score": 0.9, "error": null}',  # right
        "It looks fine to me.",  # unparsable
        '{"valid": true, "score": 0.6, "error": null}',  # wrong: a false positive
        '{"valid": false, "score": 0.0, "error": "the sum is wrong"}',  # right
    ]
    scores = score_replies(records, replies, seconds=1.0).to_dict()
    assert scores["parsed"] == 3 and scores["parse_share"] == 0.75
    assert scores["accuracy"] == 0.5
    assert scores["precision_valid"] == 0.5 and scores["recall_valid"] == 0.5
    assert scores["always_invalid_accuracy"] == 0.5


def test_eval_judges_are_label_setting_pairs():
    from deliberate_bench.eval.judges import parse_judges

    pairs = parse_judges("rules=off, untrained=transformers,trained=.deliberate/judges/j")
    assert pairs == [("rules", "off"), ("untrained", "transformers"), ("trained", ".deliberate/judges/j")]
    for bad in ("rules", "rules=", "a=off,a=transformers"):
        with pytest.raises(ValueError, match="--judges"):
            parse_judges(bad)


def test_eval_reads_the_validation_problems_of_a_dataset_in_written_order(tmp_path):
    from deliberate_bench.eval.problems import validation_problems

    data = tmp_path / "train.jsonl"
    rows = [{"question": f"q{i}", "answer": f"work\n#### {i}"} for i in range(6)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ds = tmp_path / "ds"
    ds.mkdir()
    metas = [("gsm8k", "gsm8k:4"), ("gsm8k", "gsm8k:1"), ("gsm8k", "gsm8k:4"), ("example:ads", "example:ads")]
    lines = [{"meta": {"source": source, "problem_id": pid}} for source, pid in metas]
    (ds / "validation.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    problems = validation_problems(ds, data, limit=5)
    assert [(p.id, p.question, p.gold) for p in problems] == [("train:4", "q4", "4"), ("train:1", "q1", "1")]
    assert [p.line for p in validation_problems(ds, data, limit=1)] == [4]


def test_a_judged_eval_raises_the_schedulers_verify_deadline_above_the_judges():
    from dataclasses import replace

    from deliberate_bench.eval.calls import JUDGE_VERIFY_MARGIN_S, Settings

    plain = Settings([2], 160, 64, None, 1, True, False, 100, 60.0, "llamacpp", "smollm2-135m")
    assert plain.judge_env() == {} and "judge" not in plain.fingerprint()
    judged = replace(plain, judge="transformers", judge_model="smollm2-135m", judge_timeout_s=60.0)
    env = judged.judge_env()
    assert env["DELIBERATE_JUDGE"] == "transformers" and env["DELIBERATE_JUDGE_MODEL"] == "smollm2-135m"
    assert float(env["DELIBERATE_VERIFY_TIMEOUT_S"]) == 60.0 + JUDGE_VERIFY_MARGIN_S
    assert judged.fingerprint()["judge"] == "transformers"
    # Rules only in a comparison: the same deadline, judge off.
    assert replace(judged, judge="off").judge_env()["DELIBERATE_JUDGE"] == "off"


def test_the_verifier_runs_a_trained_judge_directory_on_transformers():
    from deliberate.core.config import parse_settings
    from deliberate.verifier.settings import VerifierSettings

    trained = parse_settings(VerifierSettings, ["--judge", ".deliberate/judges/j"])
    assert trained.judge_engine_and_model() == ("transformers", ".deliberate/judges/j")
    engine = parse_settings(VerifierSettings, ["--judge", "llamacpp", "--judge-model", "smollm2-135m"])
    assert engine.judge_engine_and_model() == ("llamacpp", "smollm2-135m")


def test_a_judge_reply_with_a_null_error_is_usable():
    answer = parse_judge_reply('{"valid": true, "score": 1.0, "error": null}')
    assert not isinstance(answer, str) and answer.valid and answer.error is None


def test_a_limited_validation_set_keeps_every_valid_record():
    from deliberate_bench.eval.train_judge import limited

    records = labelled(False, 30) + labelled(True, 2)
    chosen = limited(records, 8, random.Random(3))
    assert len(chosen) == 8 and sum(r["label"]["valid"] for r in chosen) == 2
    assert len(limited(records, 100, random.Random(3))) == 32


def test_a_rerun_with_another_validation_share_resplits_by_problem(tmp_path):
    output = Output(tmp_path / "ds")
    for n in range(40):
        problem = f"gsm8k:{n}"
        records = [build_record(task(problem), draft(f"Final answer: {k}"), verdict(), split_of(problem, 0.1), "m")
                   for k in (1, 2)]  # fmt: skip
        output.write(records, problem, drafts=2)
    assert output.resplit(0.1) == 0, "the same share moves nothing"
    moved = output.resplit(0.5)
    validation, train = output.records("validation"), output.records("train")
    assert moved > 0 and len(validation) + len(train) == 80
    for record in validation + train:
        assert record["meta"]["split"] == split_of(record["meta"]["problem_id"], 0.5)
    assert not {r["meta"]["problem_id"] for r in validation} & {r["meta"]["problem_id"] for r in train}
    assert output.resplit(0.5) == 0
