"""`deliberate bench dataset` on a real Drafter and Verifier (2 GSM8K problems, the ad example, tiny budgets), and
`deliberate bench train-judge` (slow: a couple of steps) saving a judge the Verifier's judge loads with one setting."""

from __future__ import annotations

import json
import signal

import pytest

from deliberate.selection import same_answer
from deliberate.verifier.parsing import extract_final_answer
from deliberate_bench.eval import dataset, train_judge

from .conftest import gsm8k_questions


def run_command(module, argv: list[str]) -> int:
    """`deliberate bench <argv>`: the module's main with the arguments after the program's name."""
    return module.main(argv[1:])


def write_problems(tmp_path, count: int):
    data = tmp_path / "problems.jsonl"
    data.write_text("".join(json.dumps(q) + "\n" for q in gsm8k_questions(count)))
    return data


@pytest.mark.model
@pytest.mark.timeout(600)
def test_dataset_writes_labelled_records_split_by_problem_and_resumes(tmp_path):
    data, out = write_problems(tmp_path, 2), tmp_path / "ds"
    argv = ["dataset", "--data", str(data), "--exclude", str(tmp_path / "none"), "--out", str(out)]
    argv += ["--problems", "2", "--drafts", "2", "--max-new-tokens", "8", "--example-runs", "1"]
    argv += ["--engine-threads", "1"]
    argv += ["--validation-share", "0.5", "--log-dir", str(tmp_path / "logs")]
    handling = signal.getsignal(signal.SIGTERM)
    assert run_command(dataset, argv) == 0
    assert signal.getsignal(signal.SIGTERM) == handling  # its SIGTERM handling was its own, not left ignored

    records: list[dict] = []
    for split in ("train", "validation"):
        path = out / f"{split}.jsonl"
        records += [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    assert records, "no record written"
    for r in records:
        assert {"prompt", "draft", "constraints", "label", "meta"} <= set(r)
        assert set(r["label"]) == {"valid", "score", "error"}
        assert isinstance(r["label"]["valid"], bool) and 0.0 <= r["label"]["score"] <= 1.0
        assert (r["label"]["error"] is None) == r["label"]["valid"]
        assert r["meta"]["model"] == "smollm2-135m" and r["meta"]["split"] == dataset.split_of(
            r["meta"]["problem_id"], 0.5
        )
    gsm8k = [r for r in records if r["meta"]["source"] == "gsm8k"]
    examples = [r for r in records if r["meta"]["source"] == "example:ad-selection"]
    assert gsm8k and examples
    assert {r["meta"]["gold"] for r in gsm8k} <= {q["answer"].rsplit("####", 1)[1].strip() for q in gsm8k_questions(2)}
    assert all(r["constraints"] == [{"rulePack": "arithmetic"}] for r in gsm8k)
    # GSM8K labels follow the gold answer, recomputed here from the draft text.
    for r in gsm8k:
        assert r["label"]["valid"] == same_answer(extract_final_answer(r["draft"]), r["meta"]["gold"])
    # Ads drafts carry the rules' verdict.
    assert all(r["label"]["valid"] == r["meta"]["rules_valid"] for r in examples)
    # The risk model runs with the Verifier: no credit offer is labelled by a service being down.
    assert not [r for r in records if "UNAVAILABLE" in (r["label"]["error"] or "")]
    problems = {split: {r["meta"]["problem_id"] for r in records if r["meta"]["split"] == split} for split in
                ("train", "validation")}  # fmt: skip
    assert not problems["train"] & problems["validation"]
    summary = json.loads((out / "summary.json").read_text())
    assert sum(s["records"] for s in summary["splits"].values()) == len(records)

    # A rerun finds every batch done: nothing new is generated or written.
    sizes = {p.name: p.stat().st_size for p in out.glob("*.jsonl")}
    assert run_command(dataset, argv) == 0
    assert {p.name: p.stat().st_size for p in out.glob("*.jsonl")} == sizes


def judge_records(valid: bool, problem: str, split: str, n: int) -> list[dict]:
    label = {"valid": valid, "score": float(valid), "error": None if valid else "the final answer 5 is wrong"}
    records = []
    for k in range(n):
        answer = k + 2 if valid else 5
        meta = {"source": "gsm8k", "problem_id": f"{problem}{k}", "split": split}
        draft = f"{k} + 2 = {answer}\nFinal answer: {answer}"
        records.append({"prompt": f"What is {k} + 2?", "draft": draft, "constraints": [], "label": label, "meta": meta})
    return records


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.timeout(600)
def test_train_judge_saves_a_judge_the_verifier_loads_with_one_setting(tmp_path):
    ds = tmp_path / "ds"
    ds.mkdir()
    train = judge_records(True, "gsm8k:1", "train", 2) + judge_records(False, "gsm8k:2", "train", 2)
    validation = judge_records(True, "gsm8k:3", "validation", 1) + judge_records(False, "gsm8k:4", "validation", 1)
    for name, records in (("train", train), ("validation", validation)):
        (ds / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    out, report = tmp_path / "judge", tmp_path / "report.json"
    argv = ["train-judge", "--dataset", str(ds), "--out", str(out), "--report", str(report)]
    argv += ["--steps", "2", "--batch-size", "2", "--learning-rate", "1e-4", "--skip-untrained"]
    assert run_command(train_judge, argv) == 0

    figures = json.loads(report.read_text())
    assert figures["training"]["steps"] == 2 and figures["training"]["examples"] >= 4
    assert figures["trained"]["records"] == 2
    assert 0.0 <= figures["trained"]["parse_share"] <= 1.0
    assert (out / "config.json").is_file() and (out / "judge-training.json").is_file()

    # The Verifier's one setting: --judge <directory> runs the trained judge on the transformers engine.
    import asyncio

    from deliberate.core.config import parse_settings
    from deliberate.engines import load_engine
    from deliberate.verifier.judge import Judge
    from deliberate.verifier.settings import VerifierSettings

    settings = parse_settings(VerifierSettings, ["--judge", str(out)])
    assert settings.judge_engine_and_model() == ("transformers", str(out))
    engine = load_engine(*settings.judge_engine_and_model())
    result = asyncio.run(Judge(engine, timeout_s=120).judge("What is 1 + 2?", "1 + 2 = 3\nFinal answer: 3"))
    assert result.latency_s > 0 and (result.usable or result.error.startswith("judge reply"))
