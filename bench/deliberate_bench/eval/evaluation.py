"""`deliberate bench eval`: does staged reasoning answer better than one pass? Measured on the real services.

Per GSM8K problem, two calls give every configuration, all on the same problems (paired):

* one greedy draft (temperature 0) straight from the Drafter — the single pass, no verification;
* one Scheduler `Solve` with N = the largest size — its draft reports (verdict, extracted answer, score
  components) give majority@n, best_of@n and the selection ablation for every n ≤ N offline, and its final
  answer is pipeline@N;
* for each smaller n, one Refiner call on the Scheduler's selection rule applied to the first n drafts
  (pipeline@n; `--no-refine-subsets` skips it);
* with `--early-stop both`, a second Solve of the same request with streaming verification and the quorum
  switched off, so the pipeline is reported both ways on the same problems in one run.

Each finished problem is appended to `<name>.runs.jsonl` (in the folder of the study that declares it) at once, so a
rerun resumes where it stopped; the summary (`<name>.json`, `.md`, `.png`, beside it) is always rebuilt from that file
(`--summarize-only` does only that).
Method and fields: docs/eval.md.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

from deliberate_bench.command import parser_for
from deliberate_bench.eval.ads import run_ads
from deliberate_bench.eval.calls import Settings, run_problem
from deliberate_bench.eval.judges import judge_row, judges_markdown, parse_judges
from deliberate_bench.eval.problems import (
    DEFAULT_DATA,
    DEFAULT_EXCLUDE,
    DEFAULT_SEED,
    ROOT,
    Problem,
    load_problems,
    read_exclusions,
    tuning_block_lines,
    validation_problems,
)
from deliberate_bench.eval.progress import Progress, peak_rss
from deliberate_bench.eval.report import markdown
from deliberate_bench.eval.services import (
    Services,
    engine_and_models,
    interrupted,
    neighbour,
    started_alone,
    started_stack,
)
from deliberate_bench.eval.summary import Paths, Tally, add_file_arguments, summary, write_all
from deliberate_bench.results import (
    append_run,
    code_version,
    read_runs,
    remove_runs,
    runs_directory,
    runs_present,
    write_json,
)


def main(argv: list[str] | None = None) -> int:
    """`deliberate bench eval` (deliberate_bench.command)."""
    parser = parser_for("eval", __doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="JSONL of GSM8K-format problems")
    parser.add_argument(
        "--exclude",
        type=Path,
        help=f"line numbers never sampled (default for the default data: {DEFAULT_EXCLUDE.relative_to(ROOT)})",
    )
    parser.add_argument("--limit", type=int, default=100, help="problems sampled (default 100)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="sample and sampling seed (default 2026)")
    parser.add_argument("--sizes", default="3,5", help="draft counts compared, comma-separated (default 3,5)")
    parser.add_argument("--ads", type=int, default=20, help="ad-selection instances (0: none; default 20)")
    parser.add_argument("--ads-catalog-size", type=int, default=100, help="ads per catalog (default 100)")
    parser.add_argument("--max-new-tokens", type=int, help="per draft and single pass (default: the server's)")
    parser.add_argument("--refine-max-new-tokens", type=int, help="for the refined answer (default: the server's)")
    parser.add_argument("--temperature", type=float, help="of the pipeline's drafts (default: the server's)")
    parser.add_argument(
        "--no-check-arithmetic",
        dest="check_arithmetic",
        action="store_false",
        help="turn off the Scheduler's default arithmetic pack",
    )
    parser.add_argument(
        "--no-refine-subsets",
        dest="refine_subsets",
        action="store_false",
        help="skip pipeline@n for n below the largest size (one Refiner call per n and problem)",
    )
    parser.add_argument(
        "--name",
        default="eval",
        help="<runs-dir>/<name>.runs.jsonl, summarized into <results-dir>/<name>.{json,md,png}",
    )
    add_file_arguments(parser)
    parser.add_argument("--summarize-only", action="store_true", help="rebuild the summary from the runs file")
    parser.add_argument(
        "--replay",
        type=Path,
        metavar="RUNS",
        help="draft once, select many: rank the recorded drafts of a runs file again with every selection policy and "
        "ablation, without a model (seconds); writes <results-dir>/<RUNS name>.replay.{json,md} (docs/eval.md#replay)",
    )
    parser.add_argument("--address", help="a running Scheduler's host:port (default: start the stack here)")
    parser.add_argument("--drafter-address", help="with --address (default: the Scheduler's port + 1)")
    parser.add_argument("--refiner-address", help="with --address (default: the Scheduler's port + 3)")
    parser.add_argument("--timeout", type=float, default=900.0, help="deadline per call in seconds")
    parser.add_argument("--log-dir", type=Path, default=Path(".deliberate/eval-logs"), help="service logs")
    parser.add_argument(
        "--judges",
        help="compare the Verifier's judges: label=setting pairs, comma-separated, each a --judge value, e.g. "
        "rules=off,untrained=transformers,trained=.deliberate/judges/smollm2-135m-judge; one stack and runs file "
        "<name>-<label> each, on the same problems, and <name>.json/.md comparing them (docs/judge.md)",
    )
    parser.add_argument("--judge-model", default="smollm2-135m", help="with --judges: an engine judge's model")
    parser.add_argument("--judge-timeout", type=float, default=60.0, help="with --judges: seconds per verdict")
    parser.add_argument(
        "--early-stop",
        choices=("on", "off", "both"),
        default="on",
        help="the pipeline's early stopping (streaming verification, abort of failed drafts, quorum): on as the "
        "Scheduler defaults, off per request, or both — each problem solved both ways, reported side by side "
        "(default on)",
    )
    parser.add_argument(
        "--cross-drafter-model",
        default="",
        help="also start a Drafter on this model and record its greedy prose and program passes on each problem "
        "(records `cross_single`, `cross_single_program`): the single passes of another model on the same problems",
    )
    parser.add_argument(
        "--cross-refiner-model",
        default="",
        help="also start a Refiner on this model and refine each problem's selected drafts with it too "
        "(record `cross_refine`): the mixed deployment, drafts of one model and the final answer of the other, "
        "on the same drafts",
    )
    parser.add_argument(
        "--pass-over-tuning",
        action="store_true",
        help="skip the tuning blocks' lines in the sample (after the shuffle: a sample that never held them stays "
        "the same, a larger one fills up past them); make eval-cascade's 400 = eval-200's 200 and 200 more",
    )
    parser.add_argument(
        "--complete-round",
        type=int,
        default=0,
        metavar="N",
        help="the pipeline row is the Scheduler's default round (the cascade decides how many drafts), and a round of "
        "N drafts all at once, every draft to its end, is recorded beside it (`round_complete`: round@N, the vote "
        "and pass@N over complete drafts; make eval-cascade)",
    )
    parser.add_argument(
        "--problems-from",
        type=Path,
        help="a `deliberate bench dataset` directory: its GSM8K validation problems (the first --limit of them) "
        "instead of a sample, so a trained judge is measured on problems it never saw",
    )


def unavailable(record: dict) -> str | None:
    """The error of a call that found a service unreachable (not a result of the problem), if any."""
    parts = [record.get("single", {}), record.get("single_program", {}), record.get("solve", {}),
             record.get("solve_without_early_stop", {}), record.get("cross_refine", {}),
             record.get("cross_single", {}), record.get("cross_single_program", {}),
             *record.get("subsets", {}).values()]  # fmt: skip
    return next((p["error"] for p in parts if str(p.get("error", "")).startswith("UNAVAILABLE")), None)


def run(args: argparse.Namespace) -> int:
    if args.replay:
        return replay_runs(args.replay, args.results_dir)
    paths = Paths(args.results_dir, args.name, runs_directory(args.results_dir, args.runs_dir))
    sizes = sorted({int(n) for n in str(args.sizes).split(",") if n.strip()})
    if not sizes or min(sizes) < 1 or max(sizes) > 8:
        print("error: --sizes must be draft counts in 1..8", file=sys.stderr)
        return 2
    engine, model, refiner_model = engine_and_models()
    s = Settings(
        sizes=sizes,
        max_new_tokens=args.max_new_tokens,
        refine_max_new_tokens=args.refine_max_new_tokens,
        temperature=args.temperature,
        seed=args.seed,
        check_arithmetic=args.check_arithmetic,
        refine_subsets=args.refine_subsets,
        ads_catalog_size=args.ads_catalog_size,
        timeout_s=args.timeout,
        engine=engine,
        model=model,
        refiner_model=refiner_model,
        early_stop=args.early_stop,
        cross_refiner_model=args.cross_refiner_model,
        cross_drafter_model=args.cross_drafter_model,
        complete_round=args.complete_round,
    )
    if args.judges:
        return compare_judges(args, s)
    if args.summarize_only:
        return summarize(paths)
    return run_settings(args, s, paths)


def run_settings(args: argparse.Namespace, s: Settings, paths: Paths) -> int:
    if args.fresh:
        remove_runs(paths.runs)

    records = read_runs(paths.runs)
    for record in records:
        if record.get("settings") != s.fingerprint():
            print(
                f"error: {paths.runs} holds runs made with other settings ({record.get('settings')}); "
                "pass the same options, --fresh to start over, or another --name",
                file=sys.stderr,
            )
            return 2
    done = {r["id"] for r in records}
    if not args.data.exists():
        print(f"error: no problems at {args.data} (give a GSM8K-format JSONL with --data)", file=sys.stderr)
        return 2
    default_data = args.data.resolve() == DEFAULT_DATA.resolve()
    exclude = read_exclusions(args.exclude or (DEFAULT_EXCLUDE if default_data else None))
    if args.problems_from:
        problems = validation_problems(args.problems_from, args.data, args.limit)
    else:
        with args.data.open() as data:
            pass_over = tuning_block_lines(sum(1 for _ in data)) if args.pass_over_tuning else frozenset()
        problems = load_problems(args.data, args.limit, args.seed, exclude, pass_over)
    ad_seeds = [args.seed + k for k in range(1, args.ads + 1)]
    todo = [p for p in problems if p.id not in done]
    ads_todo = [seed for seed in ad_seeds if f"ads:{seed}" not in done]
    total = len(problems) + len(ad_seeds)
    print(
        f"eval: {len(problems)} problems from {args.data} (seed {args.seed}, {len(exclude)} lines excluded) and "
        f"{len(ad_seeds)} ad-selection instances; {total - len(todo) - len(ads_todo)} already in {paths.runs}",
        file=sys.stderr,
    )
    if not todo and not ads_todo:
        return summarize(paths)

    try:
        previous_handler = signal.signal(signal.SIGTERM, interrupted)  # `timeout`, `kill`: stop the services too
    except ValueError:  # not the main thread (embedded use): no handler
        previous_handler = None
    try:
        return evaluate(args, s, paths, records, todo, ads_todo, total)
    finally:
        if previous_handler is not None:
            signal.signal(signal.SIGTERM, previous_handler)


def evaluate(
    args: argparse.Namespace,
    s: Settings,
    paths: Paths,
    records: list[dict],
    todo: list[Problem],
    ads_todo: list[int],
    total: int,
) -> int:
    """Runs what is not done yet on the services (started here unless --address), then summarizes."""
    stack = None
    stopped = False
    if args.address:
        scheduler = args.address
        drafter = args.drafter_address or neighbour(scheduler, 1)
        refiner = args.refiner_address or neighbour(scheduler, 3)
    else:
        stack = started_stack(
            args.log_dir, "deliberate-eval-", f"the four services ({s.engine}, {s.model})", env=s.judge_env()
        )
        if stack is None:
            return 1
        scheduler, drafter, refiner = (stack.address_of(x) for x in ("scheduler", "drafter", "refiner"))
    crosses = {}
    for service, model in (("refiner", s.cross_refiner_model), ("drafter", s.cross_drafter_model)):
        if model:
            crosses[service] = started_alone(service, args.log_dir, model)
            if crosses[service] is None:
                for started in (stack, *crosses.values()):
                    if started is not None:
                        started.down()
                return 1
    cross_address = {service: started.address_of(service) for service, started in crosses.items()}

    services = Services(scheduler, drafter, refiner, cross_address.get("refiner"), cross_address.get("drafter"))
    progress = Progress(total, total - len(todo) - len(ads_todo))
    tally = Tally(records)
    try:
        jobs = [(p.id, lambda p=p: run_problem(services, s, p)) for p in todo]
        size = s.ads_catalog_size
        jobs += [(f"ads:{seed}", lambda seed=seed: run_ads(services, s, seed, size)) for seed in ads_todo]
        for count, (_, job) in enumerate(jobs, start=1):
            record = job()
            down = unavailable(record)
            if down:  # a service is gone: stop rather than record every remaining problem as failed
                print(f"\nerror: {down}; stopping — rerun to resume", file=sys.stderr)
                stopped = True
                break
            record["settings"] = s.fingerprint()
            record["rss_mb"] = peak_rss(stack)
            record["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            record["code"] = code_version()
            append_run(paths.runs, record)
            tally.add(record)
            progress.update(tally.note())
            if count % 10 == 0:
                write_all(paths, quiet=True)
    except KeyboardInterrupt:
        print(f"\ninterrupted; {paths.runs} keeps what finished — rerun to resume", file=sys.stderr)
    finally:
        progress.close()
        services.close()
        for started in (stack, *crosses.values()):
            if started is not None:
                started.down()
    code = summarize(paths) if runs_present(paths.runs) else 0
    return 1 if stopped else code


def compare_judges(args: argparse.Namespace, s: Settings) -> int:
    """One run per judge setting, each on its own stack, then a table of accuracy and latency per setting."""
    from dataclasses import replace

    if args.address:
        print("error: --judges starts a stack per judge; leave out --address", file=sys.stderr)
        return 2
    try:
        judges = parse_judges(args.judges)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    rows = []
    for label, judge in judges:
        engine_judge = judge in ("off", "llamacpp", "transformers", "vllm", "remote")
        setting = replace(s, judge=judge, judge_model=args.judge_model if engine_judge else "",
                          judge_timeout_s=args.judge_timeout)  # fmt: skip
        runs_dir = runs_directory(args.results_dir, args.runs_dir)
        paths = Paths(args.results_dir, f"{args.name}-{label}", runs_dir)
        print(f"\n== judge {label}: --judge {judge} ==", file=sys.stderr)
        code = run_settings(args, setting, paths)
        if code:
            return code
        rows.append(judge_row(label, judge, [r for r in read_runs(paths.runs) if r.get("task") == "gsm8k"]))
    for row in rows:
        row["accuracy"] = round(row["correct"] / row["problems"], 4) if row["problems"] else None
    environment = {k: v for k, v in sorted(os.environ.items()) if k.startswith("DELIBERATE_")}
    result = {
        "command": "deliberate bench eval " + " ".join(sys.argv[2:]),
        "environment": environment,  # what the services read besides the flags (the model, re-drafts)
        "settings": s.fingerprint(),
        "judges": rows,
    }
    args.results_dir.mkdir(parents=True, exist_ok=True)
    write_json(args.results_dir / f"{args.name}.json", result)
    table = judges_markdown(result)
    (args.results_dir / f"{args.name}.md").write_text(table)
    print(table)
    return 0


def summarize(paths: Paths) -> int:
    if not runs_present(paths.runs):
        print(f"error: no runs in {paths.runs}", file=sys.stderr)
        return 2
    result = write_all(paths)
    print(markdown(result))
    print(f"wrote {paths.json}, {paths.markdown}" + (f", {paths.png}" if paths.png.exists() else ""), file=sys.stderr)
    return 0


def replay_runs(runs: Path, results_dir: Path) -> int:
    """`--replay`: the summary of a runs file's recorded drafts, every selection row ranked again (replay.py)."""
    if not runs_present(runs):
        print(f"error: no runs file {runs}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    result = summary(read_runs(runs))
    paths = Paths(results_dir, runs.name.removesuffix(".jsonl").removesuffix(".runs") + ".replay")
    paths.json.parent.mkdir(parents=True, exist_ok=True)
    write_json(paths.json, result)
    paths.markdown.write_text(markdown(result))
    print(markdown(result))
    seconds_taken = time.perf_counter() - started
    print(f"replayed {runs} in {seconds_taken:.1f} s; wrote {paths.json}, {paths.markdown}", file=sys.stderr)
    return 0
