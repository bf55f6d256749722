"""`deliberate bench train-judge`: fine-tunes the embedded SmolLM2-135M (all weights, on the CPU, with transformers)
into the Verifier's judge, on the records `deliberate bench dataset` wrote, and measures it against the untrained model.

The judge is asked exactly what the Verifier asks (verifier/judge.py: its system prompt and
`judge_user_message`), and learns to answer strictly `{"valid": bool, "score": float, "error": str|null}` with
the record's label; the loss is on those answer tokens only. Before and after, both models answer the GSM8K
validation records (problems never trained on) through the transformers engine the Verifier uses, and each
answer is parsed the way the Verifier parses it; `valid` is scored against the gold answer (the records'
label), not against the rules. The trained model is saved as an HF directory that the Verifier loads with one
setting, `--judge <directory>` (docs/judge.md).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from deliberate_bench.command import parser_for
from deliberate_bench.results import LAB_FILES, read_runs, write_json

DEFAULT_BASE = "smollm2-135m"
DEFAULT_DATASET = LAB_FILES / "judge-dataset"
DEFAULT_OUT = Path(".deliberate/judges/smollm2-135m-judge")
DEFAULT_REPORT = LAB_FILES / "judge-training.json"


# --------------------------------------------------------------------------------------------------
# Examples (pure)
# --------------------------------------------------------------------------------------------------


def target_text(label: dict) -> str:
    """The answer the judge learns for a record: its label as one strict JSON object."""
    return json.dumps(
        {"valid": bool(label["valid"]), "score": round(float(label["score"]), 2), "error": label["error"]}
    )


def balanced(records: Sequence[dict], valid_share: float, rng: random.Random) -> list[dict]:
    """The records, with the valid ones repeated until they are at least `valid_share` of the whole (SmolLM2's
    own drafts are rarely right: without this, "invalid" is all a judge learns). Shuffled."""
    valid = [r for r in records if r["label"]["valid"]]
    invalid = [r for r in records if not r["label"]["valid"]]
    chosen = list(records)
    if valid and valid_share > 0:
        wanted = math.ceil(valid_share * len(invalid) / (1 - valid_share))
        chosen += [valid[k % len(valid)] for k in range(max(0, wanted - len(valid)))]
    rng.shuffle(chosen)
    return chosen


def limited(records: Sequence[dict], limit: int, rng: random.Random) -> list[dict]:
    """At most `limit` records: every valid one (they are rare, and precision and recall need them), then invalid
    ones sampled."""
    valid = [r for r in records if r["label"]["valid"]][:limit]
    invalid = [r for r in records if not r["label"]["valid"]]
    return valid + rng.sample(invalid, min(limit - len(valid), len(invalid)))


@dataclass(frozen=True)
class Example:
    input_ids: list[int]
    answer_start: int  # the first token of the answer (the loss is on tokens from here on)


def pad_id_of(tokenizer) -> int:
    """The token a batch is padded with (masked out): the tokenizer's pad token, else its end of text."""
    return tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id


def encode(record: dict, tokenizer, max_length: int) -> Example | None:
    """The record as the judge sees it, followed by its answer and end of turn; None when longer than
    `max_length` tokens."""
    from deliberate.engines.base import chat_prompt
    from deliberate.verifier.judge import SYSTEM_PROMPT, judge_user_message

    prompt = chat_prompt(tokenizer, SYSTEM_PROMPT, judge_user_message(record["prompt"], record["draft"]))
    prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    answer_ids = tokenizer(target_text(record["label"]), add_special_tokens=False)["input_ids"]
    ids = prompt_ids + answer_ids + [tokenizer.eos_token_id]
    if len(ids) > max_length:
        return None
    return Example(ids, len(prompt_ids))


# --------------------------------------------------------------------------------------------------
# Training
# --------------------------------------------------------------------------------------------------


@dataclass
class TrainingRun:
    examples: int  # encoded training examples (valid ones repeated included)
    skipped_too_long: int
    steps: int
    batch_size: int
    learning_rate: float
    seconds: float
    first_loss: float | None
    last_loss: float | None  # mean of the last 10 steps


def train(network, examples: list[Example], steps: int, batch_size: int, learning_rate: float, pad_id: int,
          log=print) -> tuple[float | None, float | None]:  # fmt: skip
    """`steps` AdamW steps over `examples` in order (cycling), linear decay to 0; the loss is the cross-entropy
    of the answer tokens, computed on those positions only (the vocabulary projection of every prompt token
    would cost a fifth of the step)."""
    import torch
    import torch.nn.functional as F

    network.train()
    optimizer = torch.optim.AdamW(network.parameters(), lr=learning_rate, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1 - step / max(1, steps))
    losses: list[float] = []
    started = time.perf_counter()
    for step in range(steps):
        batch = [examples[(step * batch_size + k) % len(examples)] for k in range(batch_size)]
        width = max(len(e.input_ids) for e in batch)
        ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        answer = torch.zeros((len(batch), width), dtype=torch.bool)  # positions whose NEXT token is answer
        for row, e in enumerate(batch):
            ids[row, : len(e.input_ids)] = torch.tensor(e.input_ids)
            mask[row, : len(e.input_ids)] = 1
            answer[row, e.answer_start - 1 : len(e.input_ids) - 1] = True
        hidden = network.model(input_ids=ids, attention_mask=mask).last_hidden_state
        logits = network.lm_head(hidden[answer])
        targets = ids[:, 1:][answer[:, :-1]]
        loss = F.cross_entropy(logits.float(), targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(network.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
        log(
            f"\rtrain-judge step {step + 1}/{steps}  loss {loss.item():.3f}  {time.perf_counter() - started:.0f} s",
            end="",
        )
    log("")
    network.eval()
    if not losses:
        return None, None
    return round(losses[0], 4), round(sum(losses[-10:]) / len(losses[-10:]), 4)


def save_judge(network, tokenizer, out: Path) -> None:
    """An HF-format directory (fp32 safetensors, config, tokenizer) the transformers engine loads. The weights
    were de-quantized from the GGUF on loading; transformers still marks the network as GGUF-quantized and would
    refuse to save it, so that mark goes first."""
    network.hf_quantizer = None
    network.config.quantization_config = None
    del network.config.quantization_config
    out.mkdir(parents=True, exist_ok=True)
    network.save_pretrained(out)
    tokenizer.save_pretrained(out)


# --------------------------------------------------------------------------------------------------
# Measuring a judge
# --------------------------------------------------------------------------------------------------


@dataclass
class JudgeScores:
    records: int
    labelled_valid: int
    parsed: int
    correct: int
    predicted_valid: int
    true_positives: int
    seconds: float

    @property
    def accuracy(self) -> float:
        """Right verdicts among all records (an answer that does not parse is a wrong one)."""
        return self.correct / self.records if self.records else 0.0

    @property
    def parse_share(self) -> float:
        return self.parsed / self.records if self.records else 0.0

    @property
    def precision(self) -> float | None:
        return self.true_positives / self.predicted_valid if self.predicted_valid else None

    @property
    def recall(self) -> float | None:
        return self.true_positives / self.labelled_valid if self.labelled_valid else None

    def to_dict(self) -> dict:
        return {
            **asdict(self),
            "accuracy": round(self.accuracy, 4),
            "parse_share": round(self.parse_share, 4),
            "precision_valid": None if self.precision is None else round(self.precision, 4),
            "recall_valid": None if self.recall is None else round(self.recall, 4),
            "always_invalid_accuracy": round(1 - self.labelled_valid / self.records, 4) if self.records else None,
        }


def score_replies(records: Sequence[dict], replies: Sequence[str], seconds: float) -> JudgeScores:
    """Each reply parsed as the Verifier parses it and compared with the record's label."""
    from deliberate.verifier.judge import JudgeAnswer, parse_judge_reply

    parsed = correct = predicted_valid = true_positives = 0
    for record, reply in zip(records, replies, strict=True):
        truth = bool(record["label"]["valid"])
        answer = parse_judge_reply(reply)
        if not isinstance(answer, JudgeAnswer):
            continue
        parsed += 1
        correct += answer.valid == truth
        predicted_valid += answer.valid
        true_positives += answer.valid and truth
    labelled_valid = sum(bool(r["label"]["valid"]) for r in records)
    return JudgeScores(len(records), labelled_valid, parsed, correct, predicted_valid, true_positives,
                       round(seconds, 1))  # fmt: skip


def judge_replies(engine, records: Sequence[dict], batch_size: int, log=print) -> tuple[list[str], float]:
    """The replies of `engine` as the Verifier's judge (its prompt, its sampling), `batch_size` records per
    generate call."""
    from deliberate.verifier.judge import SYSTEM_PROMPT, Judge, judge_user_message

    params = Judge(engine, timeout_s=0).params
    prompts = [engine.format_chat(SYSTEM_PROMPT, judge_user_message(r["prompt"], r["draft"])) for r in records]
    replies: list[str] = []
    started = time.perf_counter()
    for start in range(0, len(prompts), batch_size):
        completions = engine.generate(prompts[start : start + batch_size], params, lambda _: None, threading.Event())
        replies += [c.text for c in completions]
        log(f"\r  judged {len(replies)}/{len(prompts)}", end="")
    log("")
    return replies, time.perf_counter() - started


def measure(model: str, records: Sequence[dict], batch_size: int, threads: int, log=print) -> tuple[dict, list[str]]:
    from deliberate.engines.transformers_engine import TransformersEngine

    engine = TransformersEngine.load(model, threads=threads or None)
    replies, seconds = judge_replies(engine, records, batch_size, log)
    return score_replies(records, replies, seconds).to_dict(), replies


# --------------------------------------------------------------------------------------------------
# The command
# --------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """`deliberate bench train-judge` (deliberate_bench.command)."""
    parser = parser_for("train-judge", __doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dataset",
        type=Path,
        action="append",
        help="a `deliberate bench dataset` directory; repeat to pool several (default: the judge study's)",
    )
    parser.add_argument("--base", default=DEFAULT_BASE, help="the model fine-tuned (default smollm2-135m)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where the trained judge is saved")
    parser.add_argument("--report", type=Path, default=DEFAULT_REPORT, help="the figures, as JSON")
    parser.add_argument("--steps", type=int, default=0, help="optimizer steps (default: one pass over the examples)")
    parser.add_argument("--max-examples", type=int, default=0, help="training records used (0: all)")
    parser.add_argument(
        "--eval-limit",
        type=int,
        default=0,
        help="GSM8K validation records judged: every valid one, invalid ones sampled",
    )
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--learning-rate", type=float, default=5e-5)
    parser.add_argument("--max-length", type=int, default=384, help="longest example in tokens; longer ones skipped")
    parser.add_argument("--valid-share", type=float, default=0.3, help="valid records repeated up to this share")
    parser.add_argument("--eval-batch-size", type=int, default=8)
    parser.add_argument("--skip-untrained", action="store_true", help="do not measure the untrained model")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: every CPU)")
    parser.add_argument("--seed", type=int, default=15)


def run(args: argparse.Namespace) -> int:
    import torch

    from deliberate.engines.base import cpu_count
    from deliberate.engines.transformers_engine import load_pretrained

    def log(*parts, end="\n"):
        print(*parts, end=end, file=sys.stderr, flush=True)

    datasets = args.dataset or [DEFAULT_DATASET]
    train_records = [r for d in datasets for r in read_runs(d / "train.jsonl")]
    validation = [r for d in datasets for r in read_runs(d / "validation.jsonl") if r["meta"]["source"] == "gsm8k"]
    if not train_records or not validation:
        log(f"error: {datasets} need train.jsonl and GSM8K records in validation.jsonl (`deliberate bench dataset`)")
        return 2
    train_problems = {r["meta"]["problem_id"] for r in train_records}
    if train_problems & {r["meta"]["problem_id"] for r in validation}:
        log("error: a problem is in both splits; rebuild the dataset")
        return 2
    rng = random.Random(args.seed)
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads or cpu_count())
    if args.max_examples:
        train_records = rng.sample(train_records, min(args.max_examples, len(train_records)))
    if args.eval_limit:
        validation = limited(validation, args.eval_limit, random.Random(args.seed))

    report: dict = {
        "command": "deliberate bench train-judge " + " ".join(sys.argv[2:]),
        "base": args.base,
        "datasets": [str(d) for d in datasets],
        "validation": {
            "records": len(validation),
            "labelled_valid": sum(r["label"]["valid"] for r in validation),
            "problems": len({r["meta"]["problem_id"] for r in validation}),
        },  # fmt: skip
        "threads": torch.get_num_threads(),
    }
    if not args.skip_untrained:
        log(f"untrained {args.base}: judging {len(validation)} GSM8K validation records …")
        report["untrained"], _ = measure(args.base, validation, args.eval_batch_size, args.threads, log)
        log(json.dumps(report["untrained"]))

    network, tokenizer = load_pretrained(args.base)
    chosen = balanced(train_records, args.valid_share, rng)
    encoded = [encode(r, tokenizer, args.max_length) for r in chosen]
    examples = [e for e in encoded if e is not None]
    steps = args.steps or math.ceil(len(examples) / args.batch_size)
    log(f"training on {len(examples)} examples ({len(encoded) - len(examples)} longer than {args.max_length} "
        f"tokens skipped), {steps} steps of {args.batch_size} …")  # fmt: skip
    started = time.perf_counter()
    pad_id = pad_id_of(tokenizer)
    first, last = train(network, examples, steps, args.batch_size, args.learning_rate, pad_id, log)
    run_ = TrainingRun(len(examples), len(encoded) - len(examples), steps, args.batch_size, args.learning_rate,
                       round(time.perf_counter() - started, 1), first, last)  # fmt: skip
    report["training"] = asdict(run_) | {
        "records": len(train_records),
        "records_valid": sum(r["label"]["valid"] for r in train_records),
        "problems": len(train_problems),
    }
    save_judge(network, tokenizer, args.out)
    (args.out / "judge-training.json").write_text(json.dumps(report["training"], indent=2) + "\n")
    log(f"saved {args.out} ({run_.seconds:.0f} s of training); judging with it …")
    del network

    report["trained"], replies = measure(str(args.out), validation, args.eval_batch_size, args.threads, log)
    report["trained_examples"] = [{"draft": r["draft"][-200:], "label": r["label"], "reply": reply}
                                  for r, reply in list(zip(validation, replies, strict=True))[:5]]  # fmt: skip
    report["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    args.report.parent.mkdir(parents=True, exist_ok=True)
    write_json(args.report, report)
    print(json.dumps({k: report.get(k) for k in ("validation", "untrained", "training", "trained")}, indent=2))
    log(f"wrote {args.report}; load it with --judge {args.out}")
    return 0
