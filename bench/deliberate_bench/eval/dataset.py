"""`deliberate bench dataset`: verifier training records from real runs of the Drafter and the Verifier.

Each record is `{prompt, draft, constraints, label: {valid, score, error}}` plus `context`, `output_schema`
and `meta` (docs/judge.md has the format). Two sources:

* GSM8K problems: the Drafter writes several drafts per problem (one strategy hint each, sampled with a seed
  of the problem's own); the Verifier checks them with the arithmetic pack the Scheduler adds by default. The
  label comes from the gold answer: valid iff the draft's final answer equals it; the error is what the rules
  said (or that the final answer is wrong, or missing).
* The client's worked examples (`deliberate solve --example NAME`, every entry of its EXAMPLES registry):
  drafts for the example's request, labelled by the rules' verdict.

Records are deduplicated (the normalized draft text, per problem) and split into train and validation by
problem: a hash of the problem id decides, so a problem's records are all on one side, on every run. Each
finished problem is appended at once (`<out>/train.jsonl`, `<out>/validation.jsonl`, then a line in
`<out>/progress.jsonl`), so a rerun skips what is done and resumes.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from google.protobuf import json_format, struct_pb2

from deliberate.cli.stack import Ports, Stack
from deliberate.core.files import write_atomically
from deliberate_api.common.v1 import common_pb2
from deliberate_api.drafter.v1 import drafter_service_pb2, drafter_service_pb2_grpc
from deliberate_api.verifier.v1 import verifier_service_pb2, verifier_service_pb2_grpc
from deliberate_bench.command import parser_for
from deliberate_bench.eval.labels import GSM8K_CONSTRAINTS, SPLITS, gsm8k_label, normalized, rules_label, split_of
from deliberate_bench.eval.problems import DEFAULT_DATA, DEFAULT_EXCLUDE, Problem, load_problems, read_exclusions
from deliberate_bench.eval.services import interrupted
from deliberate_bench.results import LAB_FILES, append_run, read_runs, write_json

FORMAT_VERSION = 1
DEFAULT_OUT = LAB_FILES / "judge-dataset"
# The constraint the Scheduler adds to a free-text request (scheduler/verdicts.py); the GSM8K drafts get it too.


# --------------------------------------------------------------------------------------------------
# Records: labels, deduplication, the split (pure)
# --------------------------------------------------------------------------------------------------


@dataclass
class Task:
    """One problem's request: what the Drafter is asked and the Verifier checks against."""

    problem_id: str  # split key: all drafts of a problem share it
    run_id: str  # progress key: one draft batch (a business example has several, one per seed)
    source: str  # "gsm8k" or "example:<name>"
    prompt: str
    seed: int
    constraints: list[dict] = field(default_factory=list)
    context: dict = field(default_factory=dict)
    output_schema: str = ""
    gold: str | None = None  # GSM8K: label from the gold answer; None: label from the rules


def build_record(task: Task, draft: common_pb2.Draft, verdict: common_pb2.DraftVerdict, split: str, model: str) -> dict:
    label = gsm8k_label(draft.text, task.gold, verdict) if task.gold is not None else rules_label(verdict)
    return {
        "prompt": task.prompt,
        "draft": draft.text,
        "constraints": task.constraints,
        "context": task.context,
        "output_schema": task.output_schema,
        "label": label,
        "meta": {
            "format": FORMAT_VERSION,
            "source": task.source,
            "problem_id": task.problem_id,
            "split": split,
            "model": model,
            "seed": task.seed,
            "strategy": draft.strategy,
            "finish_reason": common_pb2.FinishReason.Name(draft.finish_reason).removeprefix("FINISH_REASON_"),
            "completion_tokens": draft.usage.completion_tokens,
            "answer": verdict.extracted_answer or None,
            "rules_valid": verdict.valid,
            "rules_score": round(verdict.score, 4),
            "gold": task.gold,
        },
    }


def new_records(records: Iterable[dict], seen: set[tuple[str, str]]) -> list[dict]:
    """The records whose (problem, normalized draft) is not in `seen`, which they are added to."""
    kept = []
    for record in records:
        key = (record["meta"]["problem_id"], normalized(record["draft"]))
        if key in seen or not key[1]:
            continue
        seen.add(key)
        kept.append(record)
    return kept


# --------------------------------------------------------------------------------------------------
# Sources
# --------------------------------------------------------------------------------------------------


def gsm8k_tasks(problems: list[Problem], seed: int) -> list[Task]:
    return [
        Task(f"gsm8k:{p.line}", f"gsm8k:{p.line}", "gsm8k", p.question, seed + p.line, GSM8K_CONSTRAINTS, gold=p.gold)
        for p in problems
    ]


def example_tasks(names: list[str], runs: int, seed: int) -> list[Task]:
    """`runs` draft batches (seeds seed, seed+1, …) for each named worked example of the client's EXAMPLES
    registry, built from the example's request dict (prompt, output_schema, constraints, context)."""
    from deliberate_client.cli import EXAMPLES

    tasks = []
    for name in names:
        example = EXAMPLES[name]()
        for k in range(runs):
            tasks.append(
                Task(
                    problem_id=f"example:{name}",
                    run_id=f"example:{name}#{k}",
                    source=f"example:{name}",
                    prompt=example["prompt"],
                    seed=seed + k,
                    constraints=list(example.get("constraints", [])),
                    context=dict(example.get("context") or {}),
                    output_schema=example.get("output_schema", ""),
                )
            )
    return tasks


# --------------------------------------------------------------------------------------------------
# Calling the Drafter and the Verifier
# --------------------------------------------------------------------------------------------------


@dataclass
class Generation:
    drafts_per_problem: int
    max_new_tokens: int
    temperature: float
    timeout_s: float
    strategies: tuple[str, ...]


class DraftAndVerify:
    def __init__(self, drafter: str, verifier: str):
        self.channels = [grpc.insecure_channel(drafter), grpc.insecure_channel(verifier)]
        self.drafter = drafter_service_pb2_grpc.DrafterServiceStub(self.channels[0])
        self.verifier = verifier_service_pb2_grpc.VerifierServiceStub(self.channels[1])

    def run(self, task: Task, g: Generation, offset: int) -> list[tuple[common_pb2.Draft, common_pb2.DraftVerdict]]:
        """The task's drafts (one strategy each, rotated by `offset` so problems see every strategy) and their
        verdicts."""
        n = g.drafts_per_problem
        strategies = [g.strategies[(offset + i) % len(g.strategies)] for i in range(n)]
        sampling = common_pb2.SamplingParams(temperature=g.temperature, max_new_tokens=g.max_new_tokens, seed=task.seed)
        request = drafter_service_pb2.GenerateDraftsRequest(
            request_id=f"dataset-{task.run_id}",
            prompt=task.prompt,
            num_drafts=n,
            strategies=strategies,
            sampling=sampling,
            output_schema=task.output_schema,
        )
        drafts = [m.draft for m in self.drafter.GenerateDrafts(request, timeout=g.timeout_s)]
        context = struct_pb2.Struct()
        context.update(task.context)
        verified = self.verifier.VerifyDrafts(
            verifier_service_pb2.VerifyDraftsRequest(
                request_id=f"dataset-{task.run_id}",
                prompt=task.prompt,
                drafts=drafts,
                output_schema=task.output_schema,
                constraints=[json_format.ParseDict(c, common_pb2.Constraint()) for c in task.constraints],
                context=context,
            ),
            timeout=g.timeout_s,
        )
        return list(zip(drafts, verified.verdicts, strict=True))

    def close(self) -> None:
        for channel in self.channels:
            channel.close()


# --------------------------------------------------------------------------------------------------
# The output directory
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Output:
    directory: Path

    def split_file(self, split: str) -> Path:
        return self.directory / f"{split}.jsonl"

    @property
    def progress(self) -> Path:
        return self.directory / "progress.jsonl"

    def done_runs(self) -> set[str]:
        return {record["run_id"] for record in read_runs(self.progress)}

    def records(self, split: str) -> list[dict]:
        return read_runs(self.split_file(split))

    def seen(self) -> set[tuple[str, str]]:
        """(problem, normalized draft) of every record written so far: a resumed run adds no duplicate, even
        of a problem whose records were written but not yet marked done."""
        return {(r["meta"]["problem_id"], normalized(r["draft"])) for s in SPLITS for r in self.records(s)}

    def write(self, records: list[dict], run_id: str, drafts: int) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        for split in SPLITS:
            lines = [r for r in records if r["meta"]["split"] == split]
            if lines:
                with self.split_file(split).open("a") as out:
                    out.write("".join(json.dumps(r) + "\n" for r in lines))
                    out.flush()
                    os.fsync(out.fileno())
        append_run(self.progress, {"run_id": run_id, "drafts": drafts, "records": len(records),
                                   "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})  # fmt: skip

    def resplit(self, validation_share: float) -> int:
        """Moves every record to the split `split_of` gives its problem at `validation_share`, so a rerun with
        another share leaves the whole dataset split by that share (still by problem). Returns how many moved;
        the files are rewritten (atomically) only when some did."""
        records = [r for split in SPLITS for r in self.records(split)]
        moved = 0
        for record in records:
            split = split_of(record["meta"]["problem_id"], validation_share)
            moved += record["meta"]["split"] != split
            record["meta"]["split"] = split
        if moved:
            for split in SPLITS:
                lines = "".join(json.dumps(r) + "\n" for r in records if r["meta"]["split"] == split)
                write_atomically(self.split_file(split), lines.encode())
        return moved


def summary(output: Output) -> dict:
    """Counts per split and source, and the share labelled valid: written to <out>/summary.json."""
    result: dict = {"format": FORMAT_VERSION, "splits": {}}
    for split in SPLITS:
        records = output.records(split)
        by_source: dict[str, dict] = {}
        for r in records:
            entry = by_source.setdefault(r["meta"]["source"], {"records": 0, "valid": 0, "problems": set()})
            entry["records"] += 1
            entry["valid"] += r["label"]["valid"]
            entry["problems"].add(r["meta"]["problem_id"])
        result["splits"][split] = {
            "records": len(records),
            "problems": len({r["meta"]["problem_id"] for r in records}),
            "valid": sum(r["label"]["valid"] for r in records),
            "by_source": {k: {**v, "problems": len(v["problems"])} for k, v in sorted(by_source.items())},
        }
    models = {r["meta"]["model"] for s in SPLITS for r in output.records(s)}
    result["models"] = sorted(models)
    return result


# --------------------------------------------------------------------------------------------------
# The command
# --------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """`deliberate bench dataset` (deliberate_bench.command)."""
    parser = parser_for("dataset", __doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from deliberate.drafter.prompts import DEFAULT_STRATEGIES

    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output directory (default bench/studies/judge/"
                        "judge-dataset)")  # fmt: skip
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="JSONL of GSM8K-format problems")
    parser.add_argument("--exclude", type=Path, default=DEFAULT_EXCLUDE, help="line numbers never used")
    parser.add_argument("--problems", type=int, default=300, help="GSM8K problems (default 300)")
    parser.add_argument(
        "--validation-share",
        type=float,
        default=0.2,
        help="share of problems held out (default 0.2); a rerun with another share re-splits what is written",
    )
    parser.add_argument("--examples", help="worked examples, comma-separated (default: every registered one)")
    parser.add_argument("--example-runs", type=int, default=6, help="draft batches per example (default 6)")
    parser.add_argument("--drafts", type=int, default=8, help="drafts per problem and batch (default 8)")
    parser.add_argument("--max-new-tokens", type=int, default=160, help="per draft (default 160)")
    parser.add_argument("--temperature", type=float, default=0.8, help="of the drafts (default 0.8)")
    parser.add_argument("--seed", type=int, default=15, help="problem sample and sampling seed (default 15)")
    parser.add_argument("--model", default="smollm2-135m", help="the Drafter's model (default smollm2-135m)")
    parser.add_argument(
        "--engine-threads", type=int, default=0, help="the Drafter's CPU threads (0: all; 1 on a shared, busy machine)"
    )
    parser.add_argument("--timeout", type=float, default=600.0, help="deadline per call in seconds")
    parser.add_argument("--log-dir", type=Path, default=Path(".deliberate/dataset-logs"), help="service logs")
    parser.set_defaults(strategies=DEFAULT_STRATEGIES)


def run(args: argparse.Namespace) -> int:
    from deliberate_client.cli import EXAMPLES

    names = sorted(EXAMPLES) if args.examples is None else [n for n in args.examples.split(",") if n.strip()]
    unknown = [n for n in names if n not in EXAMPLES]
    if unknown:
        print(f"error: --examples: unknown {unknown}; known: {sorted(EXAMPLES)}", file=sys.stderr)
        return 2
    if not 1 <= args.drafts <= 8:
        print("error: --drafts must be in 1..8", file=sys.stderr)
        return 2
    problems = load_problems(args.data, args.problems, args.seed, read_exclusions(args.exclude))
    tasks = gsm8k_tasks(problems, args.seed) + example_tasks(names, args.example_runs, args.seed)
    output = Output(args.out)
    if moved := output.resplit(args.validation_share):
        print(f"dataset: {moved} records moved to the split of their problem at --validation-share "
              f"{args.validation_share}", file=sys.stderr)  # fmt: skip
    done = output.done_runs()
    todo = [t for t in tasks if t.run_id not in done]
    print(f"dataset: {len(tasks)} draft batches ({len(problems)} GSM8K problems, {len(names)} examples × "
          f"{args.example_runs}); {len(tasks) - len(todo)} already in {args.out}", file=sys.stderr)  # fmt: skip
    if todo:
        code = generate(args, output, todo, len(tasks) - len(todo), len(tasks))
        if code:
            return code
    counts = summary(output)
    write_json(args.out / "summary.json", counts)
    print(json.dumps(counts, indent=2))
    return 0


# What drafts and labels a record. The risk model is there for the credit pack: without it every credit offer would
# be labelled by the rule's fail-closed message (the service is down), which says nothing about the draft.
LABELLING_SERVICES = ("risk", "drafter", "verifier")


def generate(args: argparse.Namespace, output: Output, todo: list[Task], done: int, total: int) -> int:
    g = Generation(args.drafts, args.max_new_tokens, args.temperature, args.timeout, tuple(args.strategies))
    try:
        previous_handler = signal.signal(signal.SIGTERM, interrupted)  # `timeout`, `kill`: stop the services too
    except ValueError:  # not the main thread (embedded use): no handler
        previous_handler = None
    env = {"DELIBERATE_MODEL": args.model}
    if args.engine_threads:
        env["DELIBERATE_ENGINE_THREADS"] = str(args.engine_threads)
    stack = Stack(
        ports=Ports.free(),
        env=env,
        log_dir=args.log_dir,
        state_dir=Path(tempfile.mkdtemp(prefix="deliberate-dataset-")),
        with_gateway=False,
    )
    print(f"starting the Drafter ({args.model}), the Verifier and the risk model; logs in {args.log_dir}/ …",
          file=sys.stderr)  # fmt: skip
    calls = None
    try:
        for service in LABELLING_SERVICES:
            stack.start(service)
        stack.wait_healthy(600, services=LABELLING_SERVICES)
        calls = DraftAndVerify(stack.address_of("drafter"), stack.address_of("verifier"))
        seen = output.seen()
        started = time.monotonic()
        for count, task in enumerate(todo, start=1):
            try:
                pairs = calls.run(task, g, offset=done + count)
            except grpc.RpcError as error:
                print(
                    f"\nerror: {task.run_id}: {error.code().name}: {error.details()}; rerun to resume", file=sys.stderr
                )
                return 1
            split = split_of(task.problem_id, args.validation_share)
            records = new_records((build_record(task, d, v, split, args.model) for d, v in pairs), seen)
            output.write(records, task.run_id, len(pairs))
            elapsed = time.monotonic() - started
            eta = (len(todo) - count) * elapsed / count / 60
            print(f"\rdataset {done + count}/{total}  {elapsed / 60:.1f} min  ETA {eta:.0f} min", end="",
                  file=sys.stderr, flush=True)  # fmt: skip
        print(file=sys.stderr)
    except (RuntimeError, TimeoutError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"\ninterrupted; {output.directory} keeps what finished — rerun to resume", file=sys.stderr)
        return 1
    finally:
        if calls is not None:
            calls.close()
        if previous_handler is not None:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second TERM must not leave the services behind
        stack.down()
        if previous_handler is not None:
            signal.signal(signal.SIGTERM, previous_handler)  # the caller's handling, as it was (a test process's)
    return 0
