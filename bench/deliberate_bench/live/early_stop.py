"""Early stopping (streaming verification, abort of failed drafts, quorum) against none, side by side in one run;
or (`--compare adaptive`, `make bench-adaptive`) adaptive draft counts against the default round; or (`--compare
previous`) the default round against the one before issue 25; or (`--compare confidence`) the confidence stop on
top of the default round against the default round.

    deliberate bench early-stop [--limit 50] [--ads 10] [--drafts 5] [--model NAME] [--runs FILE]
                               [--compare early_stop|adaptive|previous|confidence] [--program-drafts K]

One local stack (the default engine, model and sampling; the Refiner's consensus min_support 3). Each problem
(GSM8K questions from --data, then ad-selection instances) is solved twice with the same request, seed and
drafts asked for: once as it comes (every early-stop behaviour on, their defaults) and once with
`disable_streaming_verification` and `disable_quorum` set. Each problem's pair is appended to the runs file
as soon as it is done, and a run started again skips the problems already there (resumable; `--limit 3` is a
quick profile). Writes bench/studies/early-stopping/early_stop.json:

* `latency_ratio`: total solve latency with ÷ without;
* `token_ratio`: completion tokens generated (drafts and refinement) with ÷ without;
* `accuracy_with` / `accuracy_without`: GSM8K answers equal to the gold number;
* `valid_rate_with` / `valid_rate_without`: ad plans meeting every constraint (checked from the catalog);
* `n` (problems), `n_gsm8k`, `n_ads`, and what early stopping did (`aborted`, `cancelled`, `quorum_reached`);
* `complete` (every planned problem is in) and `planned`: `--summarize-only` writes the figures of a run stopped
  part way, from the problems it finished.

`--same-both-sides` is the control (an A/A run): both solves of a problem go without early stopping, so the
figures show what two runs of the same logic differ by — the benchmark's noise, which llama.cpp's sampling (not
reproducible across batch layouts) and the Refiner's temperature make large. Its records and figures go to
`early_stop_aa.runs.jsonl` and `early_stop_aa.json` unless --runs / --out say otherwise.

`--compare adaptive` solves each problem once with `SolveRequest.draft_count = DRAFT_COUNT_ADAPTIVE` (the
Scheduler's --adaptive-policy) and once with `DRAFT_COUNT_ALL_AT_ONCE` and every early-stop default (today's default
round), into `adaptive.runs.jsonl` and `adaptive.json`, with `mean_drafts_with` / `mean_drafts_without`.

`--compare previous` solves each problem once as it comes (today's defaults: the Scheduler's mix of prose drafts
and programs, every early-stop behaviour on) and once as the default round was before issue 25: `PREVIOUS_PROGRAMS`
program of N (schema requests draft prose either way) and early stopping off; into `default_round.runs.jsonl` and
`default_round.json`. `--program-drafts K` asks for K programs of N on the with side (e.g. `--compare previous
--program-drafts 4`: the round of 1 prose draft and 4 programs that the replay prices at about half the tokens).

`--compare confidence` solves each problem once with `SolveRequest.confidence_stop` true and once false (both with
every other early-stop default), into `confidence_stop_live.runs.jsonl` and `confidence_stop_live.json`, with
`low_confidence` (drafts stopped on their confidence). Every other comparison's without side has it off.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from deliberate.cli.stack import Ports, Stack
from deliberate.selection import same_answer
from deliberate.verifier.parsing import extract_final_answer
from deliberate_api.common.v1 import common_pb2
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb
from deliberate_bench.eval.ads import ad_instance, check_ad_plan
from deliberate_bench.eval.problems import load_problems
from deliberate_bench.eval.stats import paired_bootstrap
from deliberate_bench.inputs import add_data_argument
from deliberate_bench.results import LAB_FILES, append_run, read_runs_by_id, write_result
from deliberate_client.client import DeliberateClient, build_request

SEED = 1
# Programs in the default round before issue 25 (--program-drafts 1; docs/scheduler.md, "The default round").
PREVIOUS_PROGRAMS = 1
# A catalog per ad instance, of the size `deliberate bench eval` uses.
AD_CATALOG_SIZE = 100
AD_SEED_BASE = 1000


def problems(args) -> list[dict]:
    """The GSM8K questions (a fixed sample of --data) and the ad instances, each with a stable id."""
    chosen = [
        {"id": p.id, "task": "gsm8k", "question": p.question, "gold": p.gold}
        for p in load_problems(args.data, args.limit, SEED, set())
    ]
    ads = args.ads if args.ads is not None else min(10, max(1, args.limit // 5))
    chosen += [{"id": f"ads:{AD_SEED_BASE + i}", "task": "ads", "seed": AD_SEED_BASE + i} for i in range(ads)]
    return chosen


def request_of(problem: dict, args) -> tuple[pb.SolveRequest, object]:
    """The request (early stopping at its defaults) and, for an ad instance, its catalog."""
    tokens = {"max_new_tokens": args.max_new_tokens} if args.max_new_tokens else {}
    if problem["task"] == "gsm8k":
        return build_request(problem["question"], num_drafts=args.drafts, seed=SEED, **tokens), None
    catalog, prompt, schema, constraints, context = ad_instance(problem["seed"], AD_CATALOG_SIZE)
    request = build_request(
        prompt, num_drafts=args.drafts, seed=SEED, output_schema=schema, context=context, constraints=constraints,
        **tokens,
    )  # fmt: skip
    return request, catalog


def solve_once(client: DeliberateClient, problem: dict, args, side: bool) -> dict:
    """One solve of `problem`: the "with" side (`side` True) with early stopping — or, `--compare adaptive`, with
    an adaptive round against the default one — unless --same-both-sides."""
    changed = side and not args.same_both_sides
    request, catalog = request_of(problem, args)
    request.request_id = f"{args.out}-{problem['id']}-{'with' if changed else 'without'}-{time.time_ns()}"
    if args.compare == "adaptive":
        request.draft_count = pb.DRAFT_COUNT_ADAPTIVE if changed else pb.DRAFT_COUNT_ALL_AT_ONCE
    elif args.compare == "confidence":
        request.confidence_stop = changed
    elif not changed:
        request.disable_streaming_verification = request.disable_quorum = True
        request.confidence_stop = False
        if args.compare == "previous" and not request.output_schema:
            request.program_drafts = PREVIOUS_PROGRAMS
    if changed and args.program_drafts and not request.output_schema:
        request.program_drafts = args.program_drafts
    started = time.perf_counter()
    response = client.stub.Solve(request, timeout=args.timeout)
    latency = time.perf_counter() - started
    answer = response.answer.removeprefix(response.thinking_trace).lstrip("\n")
    if problem["task"] == "gsm8k":
        good = same_answer(extract_final_answer(answer), problem["gold"])
    else:
        good, _ = check_ad_plan(answer, catalog)
    return {
        "latency_s": round(latency, 3),
        "completion_tokens": response.usage.completion_tokens,
        "draft_tokens": sum(d.draft.usage.completion_tokens for d in response.drafts),
        "answer": extract_final_answer(answer) if problem["task"] == "gsm8k" else "",
        "good": good,
        "status": pb.SolveStatus.Name(response.status),
        "rounds": response.rounds,
        "aborted": response.early_stop.aborted,
        "cancelled": response.early_stop.cancelled,
        "low_confidence": response.early_stop.low_confidence,
        "quorum_reached": response.early_stop.reached,
        "early_stop_reason": response.early_stop.reason,
        "num_drafts_reason": response.num_drafts_reason,
        # Why the ratios are what they are: each draft's length, end, verdict and answer, and what stopped it.
        "drafts": [
            {
                "round": r.round,
                "index": r.draft.index,
                "kind": r.draft.kind,
                "tokens": r.draft.usage.completion_tokens,
                "seconds": round(r.draft.generation_latency.ToTimedelta().total_seconds(), 2),
                "finish": common_pb2.FinishReason.Name(r.draft.finish_reason).removeprefix("FINISH_REASON_"),
                "valid": r.verdict.valid,
                "answer": r.verdict.extracted_answer,
                "aborted": r.aborted.reason,
                "abort_rule": r.aborted.rule_id,
            }
            for r in response.drafts
        ],
    }


def figures(records: list[dict]) -> dict:
    def rate(task: str, side: str) -> float | None:
        chosen = [r[side]["good"] for r in records if r["task"] == task]
        return round(100 * sum(chosen) / len(chosen), 1) if chosen else None

    gsm8k = [r for r in records if r["task"] == "gsm8k"]
    change, low, high = paired_bootstrap([r["with"]["good"] for r in gsm8k], [r["without"]["good"] for r in gsm8k])
    return {
        **side_by_side(records),
        "accuracy_with": rate("gsm8k", "with"),
        "accuracy_without": rate("gsm8k", "without"),
        # GSM8K accuracy with − without in points, with its paired 95 % bootstrap interval over problems.
        "accuracy_change_points": round(100 * change, 1),
        "accuracy_change_interval": [round(100 * low, 1), round(100 * high, 1)],
        "valid_rate_with": rate("ads", "with"),
        "valid_rate_without": rate("ads", "without"),
        "n_gsm8k": len(gsm8k),
        "n_ads": sum(r["task"] == "ads" for r in records),
        # Where the time went: each task alone, and the GSM8K problems where a draft was aborted against the rest
        # (on those early stopping changed nothing, so their ratio is the run-to-run spread).
        "by_task": {task: side_by_side([r for r in records if r["task"] == task]) for task in ("gsm8k", "ads")},
        "gsm8k_with_aborts": side_by_side([r for r in gsm8k if r["with"]["aborted"]]),
        "gsm8k_without_aborts": side_by_side([r for r in gsm8k if not r["with"]["aborted"]]),
    }


def side_by_side(records: list[dict]) -> dict:
    """With against without over `records`: the ratios, the totals, and how many were right (or satisfied) on
    each side and on one side only."""

    def total(side: str, key: str) -> float:
        return sum(r[side][key] for r in records)

    def mean_drafts(side: str) -> float | None:
        listed = [r[side]["drafts"] for r in records if "drafts" in r[side]]  # older runs did not list them
        return round(sum(map(len, listed)) / len(listed), 2) if listed else None

    if not records:
        return {"n": 0}
    return {
        "latency_ratio": round(total("with", "latency_s") / total("without", "latency_s"), 3),
        "token_ratio": round(total("with", "completion_tokens") / total("without", "completion_tokens"), 3),
        "n": len(records),
        "seconds_with": round(total("with", "latency_s"), 1),
        "seconds_without": round(total("without", "latency_s"), 1),
        "tokens_with": int(total("with", "completion_tokens")),
        "tokens_without": int(total("without", "completion_tokens")),
        "good_with": int(total("with", "good")),
        "good_without": int(total("without", "good")),
        "good_only_with": sum(r["with"]["good"] and not r["without"]["good"] for r in records),
        "good_only_without": sum(r["without"]["good"] and not r["with"]["good"] for r in records),
        "aborted": int(total("with", "aborted")),
        "problems_with_aborts": sum(bool(r["with"]["aborted"]) for r in records),
        "cancelled": int(total("with", "cancelled")),
        "low_confidence": sum(r["with"].get("low_confidence", 0) for r in records),  # older runs did not count it
        "quorum_reached": int(total("with", "quorum_reached")),
        "mean_drafts_with": mean_drafts("with"),
        "mean_drafts_without": mean_drafts("without"),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=50, help="GSM8K questions (default 50)")
    parser.add_argument("--ads", type=int, default=None, help="ad-selection instances (default 10; fewer with --limit)")
    parser.add_argument(
        "--program-drafts",
        type=int,
        default=0,
        help="programs of N on the with side (SolveRequest.program_drafts; default 0: the Scheduler's mix)",
    )
    parser.add_argument("--drafts", type=int, default=5)
    parser.add_argument("--model", default="", help="the Drafter's and Refiner's model (default: the services')")
    parser.add_argument("--max-new-tokens", type=int, default=0, help="draft budget (default: the Drafter's)")
    parser.add_argument("--timeout", type=float, default=900.0, help="deadline of each solve, seconds")
    parser.add_argument("--runs", type=Path, default=None, help="per-problem records (default: by --out)")
    parser.add_argument("--out", default="", help="result name (early_stop, early_stop_aa)")
    parser.add_argument(
        "--compare",
        choices=["early_stop", "adaptive", "previous", "confidence"],
        default="early_stop",
        help="what the with side changes: early stopping on against off (default); adaptive draft counts "
        "(SolveRequest.draft_count) against the default round, all drafts at once with early stopping; or today's "
        "default round against the one before issue 25 (1 program, early stopping off); or the confidence stop "
        "(SolveRequest.confidence_stop) on top of the default round against the default round",
    )
    parser.add_argument(
        "--same-both-sides", action="store_true", help="control: the without side on both sides (the noise)"
    )
    parser.add_argument(
        "--summarize-only",
        action="store_true",
        help="write the figures of the problems already in the runs file (a run stopped part way), solve nothing",
    )
    add_data_argument(parser)
    args = parser.parse_args(argv)
    names = {
        "early_stop": "early_stop",
        "adaptive": "adaptive",
        "previous": "default_round",
        "confidence": "confidence_stop_live",
    }
    args.out = args.out or names[args.compare] + ("_aa" if args.same_both_sides else "")
    args.runs = args.runs or LAB_FILES / f"{args.out}.runs.jsonl"

    chosen = problems(args)
    done = read_runs_by_id(args.runs)
    if args.summarize_only:
        chosen = [p for p in chosen if p["id"] in done]
    env = {"DELIBERATE_CONSENSUS_MIN_SUPPORT": "3"}
    if args.model:
        env["DELIBERATE_MODEL"] = args.model
    todo = [p for p in chosen if p["id"] not in done]
    if todo:
        with Stack(ports=Ports.free(), env=env) as stack, DeliberateClient(stack.address) as client:
            for problem in todo:
                # Alternating which goes first keeps a warm cache or a busy machine from favouring one side.
                order = (True, False) if len(done) % 2 == 0 else (False, True)
                sides = {early: solve_once(client, problem, args, early) for early in order}
                record = {"id": problem["id"], "task": problem["task"], "with": sides[True], "without": sides[False]}
                append_run(args.runs, record)
                done[problem["id"]] = record
                print(
                    f"{problem['id']}: {sides[True]['latency_s']:.1f}s/{sides[False]['latency_s']:.1f}s, "
                    f"{sides[True]['completion_tokens']}/{sides[False]['completion_tokens']} tokens",
                    flush=True,
                )
    records = [done[p["id"]] for p in chosen]
    planned = {"gsm8k": args.limit, "ads": sum(p["task"] == "ads" for p in problems(args))}
    complete = len(records) == sum(planned.values())
    result = {**figures(records), "complete": complete, "planned": planned}
    settings = {
        "compare": args.compare,
        "drafts": args.drafts,
        "model": args.model or "default",
        "same_both_sides": args.same_both_sides,
    }
    path = write_result(args.out, {**result, **settings})
    print(path.read_text())


if __name__ == "__main__":
    main()
