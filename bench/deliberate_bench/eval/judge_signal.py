"""The trained judge as a selection signal: SmolLM2-135M fine-tuned on the default model's own labelled drafts —
prose and programs that passed the Verifier's rules — and read on eval-200's recorded drafts, cross-validated by
problem (docs/judge.md#the-judge-as-a-selection-signal).

    python -m deliberate_bench.eval.judge_signal                    # fine-tunes and judges fold by fold; resumable
    python -m deliberate_bench.eval.judge_signal --summarize-only   # the replay, in seconds

Problem i of eval-200 is in fold i mod `--folds`. Each fold's judge is trained (as `deliberate bench train-judge`
trains: the Verifier's judge prompt, the label as strict JSON) on the tuning block's drafts and on every other fold's,
and judges only its own fold's drafts, so no draft is judged by a model that saw its problem. A draft's signal is the
probability the judge gives `"valid": true` where its reply forks between true and false: one forward pass, no
generation. The live Verifier reads the same fork greedily (valid when that probability is above ½) and blends
its score into the rules' (`JudgeResult.blend`); `summarize` replays both on the default round.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from deliberate.selection import same_answer
from deliberate_bench.eval.judge_replay import draft_key, summarize
from deliberate_bench.eval.train_judge import (
    DEFAULT_BASE,
    Example,
    balanced,
    encode,
    pad_id_of,
    save_judge,
    target_text,
    train,
)
from deliberate_bench.results import LAB_FILES, read_runs, write_json

TRAINING_RUNS = LAB_FILES / "eval-tuning.runs.jsonl"
SCORED_RUNS = LAB_FILES / "eval-gsm8k-200.runs.jsonl"
OUT = LAB_FILES / "judge-signal"
MODELS = Path(".deliberate/judges")


# --------------------------------------------------------------------------------------------------
# Records (pure)
# --------------------------------------------------------------------------------------------------


def gsm8k_records(path: Path) -> list[dict]:
    """The runs file's GSM8K problems that were solved (`results.read_runs`)."""
    return [r for r in read_runs(path) if r.get("task") == "gsm8k" and "error" not in r.get("solve", {"error": ""})]


def judged_drafts(record: Mapping) -> list[dict]:
    """The drafts of the recorded first round the judge is asked about: those that passed every hard rule (the
    Verifier consults its judge for no others)."""
    return [d for d in record["solve"].get("drafts", ()) if d["round"] == 0 and d["valid"]]


def judge_record(record: Mapping, draft: Mapping) -> dict:
    """A draft as `train_judge` reads a record: the question, the draft's text, and its label against the gold
    answer (the gold answer itself never appears in it). A program's answer is the value it printed."""
    answer = draft.get("answer") or ""
    if same_answer(answer, record["gold"]):
        label = {"valid": True, "score": 1.0, "error": None}
    else:
        label = {"valid": False, "score": 0.0, "error": f"the final answer {answer} is wrong" if answer else
                 "no final answer"}  # fmt: skip
    return {"key": draft_key(record, draft), "prompt": record["question"], "draft": draft.get("text", ""),
            "kind": draft.get("kind") or "prose", "label": label}  # fmt: skip


def fold_of(position: int, folds: int) -> int:
    """A scored problem's fold: its place in the runs file (the evaluation's random sample) mod `folds`, as
    `replay.cross_validated` assigns them."""
    return position % folds


def fold_records(training: Sequence[dict], scored: Sequence[dict], folds: int, fold: int) -> tuple[list, list]:
    """(what fold `fold`'s judge trains on, what it judges): the tuning block and the other folds' drafts, and
    its own fold's drafts."""
    train_on = [judge_record(r, d) for r in training for d in judged_drafts(r)]
    judge_on = []
    for position, record in enumerate(scored):
        rows = [judge_record(record, d) for d in judged_drafts(record)]
        (judge_on if fold_of(position, folds) == fold else train_on).extend(rows)
    return train_on, judge_on


def bucketed(examples: Sequence[Example], batch_size: int, rng: random.Random) -> list[Example]:
    """The examples ordered so that `train`'s consecutive batches hold examples of similar length (padding is
    most of the cost of a batch mixing 100-token programs with 500-token prose), the batches shuffled; the
    remainder that fills no batch is dropped."""
    ordered = sorted(examples, key=lambda e: len(e.input_ids))
    batches = [ordered[k : k + batch_size] for k in range(0, len(ordered) - batch_size + 1, batch_size)]
    rng.shuffle(batches)
    return [e for batch in batches for e in batch]


# --------------------------------------------------------------------------------------------------
# The judge's probability of "valid"
# --------------------------------------------------------------------------------------------------


def answer_fork(tokenizer) -> tuple[list[int], int, int]:
    """(the answer's tokens before it says true or false, the token of true, the token of false), as the judge
    learned its answer (`train_judge.target_text`)."""
    yes = tokenizer(target_text({"valid": True, "score": 1.0, "error": None}), add_special_tokens=False)["input_ids"]
    no = tokenizer(target_text({"valid": False, "score": 0.0, "error": None}), add_special_tokens=False)["input_ids"]
    fork = next(k for k, (a, b) in enumerate(zip(yes, no, strict=False)) if a != b)
    return yes[:fork], yes[fork], no[fork]


def valid_probabilities(network, tokenizer, records: Sequence[dict], batch_size: int) -> list[float]:
    """P(true) ÷ (P(true) + P(false)) at the fork of each record's answer, `batch_size` records per forward pass
    (similar lengths together)."""
    import torch

    from deliberate.engines.base import chat_prompt
    from deliberate.verifier.judge import SYSTEM_PROMPT, judge_user_message

    prefix, true_id, false_id = answer_fork(tokenizer)
    pad_id = pad_id_of(tokenizer)
    inputs = []
    for r in records:
        prompt = chat_prompt(tokenizer, SYSTEM_PROMPT, judge_user_message(r["prompt"], r["draft"]))
        inputs.append(tokenizer(prompt, add_special_tokens=False)["input_ids"] + prefix)
    order = sorted(range(len(inputs)), key=lambda k: len(inputs[k]))
    found = [0.0] * len(inputs)
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            rows = order[start : start + batch_size]
            width = max(len(inputs[k]) for k in rows)
            ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
            mask = torch.zeros((len(rows), width), dtype=torch.long)
            for row, k in enumerate(rows):
                ids[row, : len(inputs[k])] = torch.tensor(inputs[k])
                mask[row, : len(inputs[k])] = 1
            hidden = network.model(input_ids=ids, attention_mask=mask).last_hidden_state
            last = hidden[torch.arange(len(rows)), mask.sum(dim=1) - 1]
            logits = network.lm_head(last)[:, [true_id, false_id]].float()
            for k, p in zip(rows, torch.softmax(logits, dim=-1)[:, 0].tolist(), strict=True):
                found[k] = p
    return found


# --------------------------------------------------------------------------------------------------
# One fold: train (or load the saved judge), then judge the fold's drafts
# --------------------------------------------------------------------------------------------------


def run_fold(args: argparse.Namespace, training: list[dict], scored: list[dict], fold: int, log) -> None:
    import torch

    from deliberate.engines.transformers_engine import load_pretrained

    scores_path = args.out / f"fold{fold}.scores.jsonl"
    report_path = args.out / f"fold{fold}.json"
    if report_path.exists():
        log(f"fold {fold}: done ({report_path})")
        return
    train_on, judge_on = fold_records(training, scored, args.folds, fold)
    model_dir = MODELS / f"qwen-drafts-{args.steps}-steps-fold{fold}-of-{args.folds}"
    rng = random.Random(args.seed + fold)
    torch.manual_seed(args.seed + fold)
    if (model_dir / "judge-training.json").exists():
        network, tokenizer = load_pretrained(str(model_dir))
        training_report = json.loads((model_dir / "judge-training.json").read_text())
        log(f"fold {fold}: judge loaded from {model_dir}")
    else:
        network, tokenizer = load_pretrained(args.base)
        encoded = [encode(r, tokenizer, args.max_length) for r in balanced(train_on, args.valid_share, rng)]
        examples = bucketed([e for e in encoded if e is not None], args.batch_size, rng)
        steps = args.steps or len(examples) // args.batch_size
        log(f"fold {fold}: training on {len(examples)} examples of {len(train_on)} drafts, {steps} steps …")
        pad_id = pad_id_of(tokenizer)
        started = time.perf_counter()
        first, last = train(network, examples, steps, args.batch_size, args.learning_rate, pad_id, log)
        training_report = {
            "drafts": len(train_on),
            "drafts_right": sum(r["label"]["valid"] for r in train_on),
            "examples": len(examples),
            "skipped_too_long": sum(e is None for e in encoded),
            "steps": steps,
            "batch_size": args.batch_size,
            "learning_rate": args.learning_rate,
            "seconds": round(time.perf_counter() - started, 1),
            "first_loss": first,
            "last_loss": last,
        }
        save_judge(network, tokenizer, model_dir)
        (model_dir / "judge-training.json").write_text(json.dumps(training_report, indent=2) + "\n")
    log(f"fold {fold}: judging {len(judge_on)} drafts …")
    started = time.perf_counter()
    probabilities = valid_probabilities(network, tokenizer, judge_on, args.eval_batch_size)
    seconds = time.perf_counter() - started
    with scores_path.open("w") as out:
        for record, p in zip(judge_on, probabilities, strict=True):
            out.write(json.dumps({"key": record["key"], "kind": record["kind"], "right": record["label"]["valid"],
                                  "p_valid": round(p, 5)}) + "\n")  # fmt: skip
    report = {
        "fold": fold,
        "folds": args.folds,
        "base": args.base,
        "training": training_report,
        "judged": {
            "drafts": len(judge_on),
            "seconds": round(seconds, 1),
            "seconds_per_draft": round(seconds / max(1, len(judge_on)), 4),
        },  # fmt: skip
        "threads": torch.get_num_threads(),
    }
    write_json(report_path, report)
    log(f"fold {fold}: wrote {scores_path} ({seconds:.0f} s)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--training-runs", type=Path, default=TRAINING_RUNS, help="always trained on")
    parser.add_argument("--scored-runs", type=Path, default=SCORED_RUNS, help="judged fold by fold")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--folds", type=int, default=2)
    parser.add_argument("--base", default=DEFAULT_BASE)
    parser.add_argument("--steps", type=int, default=64, help="optimizer steps per fold (0: one epoch)")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--learning-rate", type=float, default=5e-5)
    parser.add_argument("--max-length", type=int, default=768, help="longest example in tokens; longer skipped")
    parser.add_argument("--valid-share", type=float, default=0.3, help="right drafts repeated up to this share")
    parser.add_argument("--eval-batch-size", type=int, default=8)
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: every CPU)")
    parser.add_argument("--seed", type=int, default=15)
    parser.add_argument("--fold", type=int, action="append", help="train and judge only this fold (repeatable)")
    parser.add_argument("--summarize-only", action="store_true")
    args = parser.parse_args(argv)

    def log(*parts, end="\n"):
        print(*parts, end=end, file=sys.stderr, flush=True)

    training, scored = gsm8k_records(args.training_runs), gsm8k_records(args.scored_runs)
    if not args.summarize_only:
        import torch

        from deliberate.engines.base import cpu_count

        torch.set_num_threads(args.threads or cpu_count())
        args.out.mkdir(parents=True, exist_ok=True)
        for fold in args.fold or range(args.folds):
            run_fold(args, training, scored, fold, log)

    result = summarize(scored, args.out, args.folds)
    write_json(args.out / "summary.json", result)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
