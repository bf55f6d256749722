"""The retrained judge as a selection signal (bench/deliberate_bench/eval/judge_signal.py, judge_replay.py): folds that
never judge a draft with a model that saw its problem, and a replay that reads the judge's probability."""

from __future__ import annotations

import json
import random

import pytest

from deliberate_bench.eval import judge_replay, judge_signal
from deliberate_bench.eval.replay import DEFAULT_MIX
from deliberate_bench.eval.train_judge import Example


def _draft(index: int, kind: str, answer: str, valid: bool = True, score: float = 1.0) -> dict:
    return {"round": 0, "index": index, "kind": kind, "answer": answer, "valid": valid, "score": score,
            "text": f"draft {index}: {answer}", "finish_reason": "STOP", "completion_tokens": 50}  # fmt: skip


def _record(problem: int, answers: list[str], gold: str, invalid: tuple[int, ...] = ()) -> dict:
    prose = DEFAULT_MIX[0]  # the default round's prose drafts first, then programs, as recorded rounds hold them
    kinds = ["prose"] * prose + ["program"] * (len(answers) - prose)
    drafts = [
        _draft(i, kind, a, valid=i not in invalid) for i, (kind, a) in enumerate(zip(kinds, answers, strict=True))
    ]
    return {"task": "gsm8k", "id": f"train:{problem}", "question": f"question {problem}", "gold": gold,
            "solve": {"drafts": drafts}}  # fmt: skip


def test_a_fold_judges_only_its_own_problems_and_trains_on_the_tuning_block_and_every_other_fold():
    tuning = [_record(1000 + p, ["1"] * 6, "1") for p in range(3)]
    scored = [_record(p, ["1", "2", "3", "4", "5", "6"], "1", invalid=(2,)) for p in range(10)]
    judged_by_fold = []
    for fold in range(2):
        train_on, judge_on = judge_signal.fold_records(tuning, scored, 2, fold)
        trained_problems = {r["key"].split("/")[0] for r in train_on}
        judged_problems = {r["key"].split("/")[0] for r in judge_on}
        assert not trained_problems & judged_problems
        assert {r["id"] for r in tuning} <= trained_problems
        assert judged_problems == {f"train:{p}" for p in range(fold, 10, 2)}
        judged_by_fold.append({r["key"] for r in judge_on})
    assert not judged_by_fold[0] & judged_by_fold[1]
    # Every draft that passed the rules is judged once; the invalid one (index 2) never.
    assert len(judged_by_fold[0] | judged_by_fold[1]) == 10 * 5
    assert not any(key.endswith("/0:2") for keys in judged_by_fold for key in keys)


def test_a_draft_is_labelled_against_the_gold_answer_and_a_program_by_the_value_it_printed():
    record = _record(7, ["12", "", "12.0", "3", "4", "12"], "12")
    labels = [judge_signal.judge_record(record, d)["label"] for d in record["solve"]["drafts"]]
    assert [label["valid"] for label in labels] == [True, False, True, False, False, True]
    assert labels[1]["error"] == "no final answer" and labels[3]["error"] == "the final answer 3 is wrong"
    assert all("12" not in (label["error"] or "") for label in labels)  # the gold answer is never in a label


def test_batches_hold_examples_of_similar_length_and_every_full_batch_is_kept():
    examples = [Example(list(range(n)), n - 1) for n in random.Random(3).sample(range(10, 500), 43)]
    ordered = judge_signal.bucketed(examples, 8, random.Random(4))
    assert len(ordered) == 40
    batches = [ordered[k : k + 8] for k in range(0, 40, 8)]
    spans = sorted((min(len(e.input_ids) for e in b), max(len(e.input_ids) for e in b)) for b in batches)
    assert all(
        high < next_low for (_, high), (next_low, _) in zip(spans, spans[1:], strict=False)
    )  # batches do not overlap


@pytest.mark.parametrize(
    ("values", "right", "expected"),
    [([0.9, 0.8, 0.2, 0.1], [True, True, False, False], 1.0), ([0.1, 0.9], [True, False], 0.0),
     ([0.5, 0.5, 0.5], [True, False, False], 0.5), ([0.3, 0.4], [True, True], None)],
)  # fmt: skip
def test_the_area_under_the_curve_counts_right_drafts_ranked_above_wrong_ones(values, right, expected):
    assert judge_replay.area_under_curve(values, right) == expected


def test_a_soft_judge_moves_the_score_as_the_verifier_blends_it():
    record = _record(1, ["1", "2", "3", "4", "5"], "1")
    drafts = record["solve"]["drafts"]
    scores = {judge_replay.draft_key(record, drafts[0]): 0.9, judge_replay.draft_key(record, drafts[1]): 0.2}
    blended = judge_replay.soft_overrides(record, drafts, scores)
    assert blended == {"0:0": {"score": pytest.approx(1.0)}, "0:1": {"score": pytest.approx(0.7)}}


def test_a_judge_that_knows_the_answer_lifts_the_replay_to_the_oracle_and_a_coin_does_not(tmp_path):
    rng = random.Random(11)
    scored = []
    for problem in range(40):  # one right draft among wrong ones that outvote it: the shape selection misses
        answers = ["7", "7", "7", "8", "9"]
        answers[rng.randrange(3, 5)] = "1"
        scored.append(_record(problem, answers, "1"))
    for name, judge in {"oracle": lambda right: 0.95 if right else 0.05, "coin": lambda _: rng.random()}.items():
        out = tmp_path / name
        out.mkdir()
        for fold in range(2):
            _, judge_on = judge_signal.fold_records([], scored, 2, fold)
            rows = [{"key": r["key"], "kind": r["kind"], "right": r["label"]["valid"],
                     "p_valid": judge(r["label"]["valid"])} for r in judge_on]  # fmt: skip
            (out / f"fold{fold}.scores.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        result = judge_replay.summarize(scored, out, 2)
        rows = {r["name"]: r["right"] for r in result["rows"]}
        assert rows["pass@5"] == 40 and rows["pipeline@5"] == 0
        if name == "oracle":
            assert rows["pipeline@5:judge"] == 40 and rows["pipeline@5:learned_cv+judge"] >= 36
            assert result["discrimination"]["auc"]["judge"] == 1.0 and result["verdicts"]["accuracy"] == 1.0
            assert result["discrimination"]["auc_within_round"]["judge"] == 1.0
        else:
            assert rows["pipeline@5:judge"] < 30
