"""The READMEs of bench/runs/ (recorded inputs) and bench/results/ (the summaries read from them): every file, the
command that writes it and the page that cites it, from one declaration (FILES).

    deliberate bench index [--write]     # prints the differences, or writes both READMEs (make bench-index)

tests/bench/test_index.py fails when a file is not declared, a declared file is missing, or a README is out of date.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from deliberate_bench.results import RESULTS, RUNS


@dataclass(frozen=True)
class Entry:
    files: tuple[str, ...]  # names in the directory (a folder counts as one)
    command: str  # what writes them
    cited: str  # the docs page and section that cite them, relative to docs/


def summaries(*names: str, replay: bool = False) -> tuple[str, ...]:
    """`deliberate bench eval`'s summaries of a run: <name>.json, .md, .png (and its replay's .json, .md)."""
    found = [f"{name}.{suffix}" for name in names for suffix in ("json", "md", "png")]
    return tuple(found + [f"{name}.replay.{suffix}" for name in names if replay for suffix in ("json", "md")])


EVAL_200 = "eval.md#the-200-problem-evaluation"
EVAL_DEFAULT = "eval.md#the-default-deployment-15b-drafts-the-05b-refiner"
EARLY_STOP = "experiments/early-stopping.md#early-stopping-live-and-replayed"
CHEAPER_ROUND = "experiments/early-stopping.md#a-cheaper-round-more-programs-chosen-on-the-tuning-blocks"
BUSINESS = "business-cases.md#results-on-the-05b-model-far-from-the-targets"
BUSINESS_DEFAULT_COMMAND = "deliberate bench business-eval --limit 3 --max-new-tokens 320 --name business-default"
BUSINESS_TUNING_DEFAULT_COMMAND = (
    "deliberate bench business-eval --split tuning --limit 4 --rows single,single:program --max-new-tokens 320 "
    "--name business-tuning-default"
)
BUSINESS_TUNING_SWAP_COMMAND = BUSINESS_TUNING_DEFAULT_COMMAND.replace(
    "business-tuning-default", "business-tuning-swap"
)
BUSINESS_TUNING_SOLVER_COMMAND = BUSINESS_TUNING_DEFAULT_COMMAND.replace(
    "business-tuning-default", "business-tuning-solver"
)
BUSINESS_FEEDBACK = "business-cases.md#feedback-that-shows-the-plan-tuning-instances-measured-not-kept"
FEEDBACK_RUNS = ("business-tuning-feedback-before", "business-tuning-feedback-hint", "business-tuning-feedback-revise")
FEEDBACK_COMMAND = (
    "deliberate bench business-eval --split tuning --cases credit,promotion --rows single "
    "--name business-tuning-feedback-{before,hint,revise} (the deployed feedback; at b7713c7, credit only; at b7eae2c)"
)
BUSINESS_REPAIR = "business-cases.md#feedback-that-says-the-repair"
REPAIR_RUNS = ("business-tuning-headroom", "business-tuning-headroom-offers", "business-tuning-repair-items")
REPAIR_COMMAND = (
    "deliberate bench business-eval --split tuning --cases credit --rows single --name business-tuning-headroom "
    "(at 2105fc4), … --name business-tuning-headroom-offers (at a4b7e27), both reverted; … --cases promotion … "
    "--name business-tuning-repair-items (at 656777a, kept)"
)
REPAIR_SCORED_COMMAND = (
    "deliberate bench business-eval --cases promotion --rows pipeline --name business-repair (at 656777a: the 17 "
    "solves that had re-drafted in business.runs.jsonl first, then the other 13)"
)
BUSINESS_SIMULATOR = "business-cases.md#the-risk-model-as-the-programs-simulator-credit"
SIMULATOR_RUNS = (
    "business-tuning-credit-programs-before",
    "business-tuning-credit-programs-score-offer",
    "business-tuning-credit-programs-sizes",
)
SIMULATOR_COMMAND = (
    "deliberate bench business-eval --split tuning --cases credit --rows single:program "
    "--name business-tuning-credit-programs-{before,score-offer,sizes} (at 6b73e87; score_offer, at 6be5cdc; the "
    "list sizes and the fill-up, at a8c72fe)"
)
SIMULATOR_TWO_TERMS_COMMAND = (
    "deliberate bench business-eval --split tuning --cases credit --rows single:program "
    "--name business-tuning-credit-programs-score-offer (at c567f66, stopped after 2 applicants; the file renamed)"
)
SIMULATOR_SCORED_COMMAND = "deliberate bench business-eval --cases credit --rows pipeline --name business-score-offer"
BUSINESS_PROMOTION_PROGRAMS = "business-cases.md#a-worked-program-for-promotions"
PROMOTION_PROMPT_RUNS = ("business-tuning-promotion-prompt", "business-tuning-promotion-prompt-floor")
PROMOTION_PROMPT_COMMAND = (
    "deliberate bench business-eval --split tuning --cases promotion --rows single:program "
    "--name business-tuning-promotion-prompt{,-floor} (at 7950a8b; the example opened as the Drafter opens a "
    "program, at 698394f)"
)
PROMOTION_SCORED_COMMAND = (
    "deliberate bench business-eval --cases promotion --rows pipeline --name business-promotion-programs (at 698394f)"
)
ADS_PROGRAMS = (
    "ads-programs-baseline", "ads-programs-prefill", "ads-programs-size", "ads-programs-picks", "ads-programs-swap",
    "ads-programs-solver", "ads-programs-solver-pool",
)  # fmt: skip
ADS_PROGRAMS_COMMAND = (
    "deliberate bench business-eval --split tuning --cases ads --rows single:program --max-new-tokens 320 "
    "--name ads-programs-{baseline,prefill,size,picks,swap,solver,solver-pool} (the program's opening lines before "
    "and after; the plan's size shown; the rule's numbers in ctx; a plan that fits, then swaps; the exact engine "
    "best_rows; its example filtering allowed ids)"
)
ADS_PIPELINE = (
    "ads-pipeline-swap", "ads-pipeline-ranked", "ads-pipeline-solver", "ads-pipeline-bound", "ads-pipeline-programs",
)  # fmt: skip
ADS_PIPELINE_COMMAND = (
    "deliberate bench business-eval --split tuning --cases ads --rows pipeline --max-new-tokens 320 "
    "--name ads-pipeline-{swap,ranked,solver,bound,programs} (the default round before and after: no quorum for a "
    "decision whose pack scores plans, swaps by value per cost; programs calling best_rows (stopped after 8 "
    "catalogs); with the stop at the bound and duplicates by text; 4 programs of 5 where the pack solves the question)"
)
BUSINESS_FULL = "business-cases.md#the-full-evaluation-make-eval-business"
BUSINESS_ONE_PROGRAM_COMMAND = (
    "make eval-business, the pipeline rows of its first 24 ad catalogs run with one decision program a round "
    "(before --bounded-decision-program-drafts), moved out of business.runs.jsonl"
)
BUSINESS_ENGINE = "business-cases.md#an-exact-engine-for-decision-programs"
BUSINESS_DEFAULT = (
    "business-cases.md#results-on-the-new-default-15b-drafts-the-05b-refiner-better-still-far-from-the-targets"
)
JUDGE = "judge.md#results"
EVAL_100 = "eval.md#the-100-problem-run-prose-drafts-only-the-previous-round"
LEARNED = "selection.md#the-learned-policy"
ADAPTIVE_LIVE = "experiments/adaptive-draft-counts.md#adaptive-draft-counts-live"
ADAPTIVE_REPLAYED = (
    "experiments/adaptive-draft-counts.md#fewer-drafts-where-they-agree-adaptive-counts-and-confidence-stops-replayed"
)
CONFIDENCE_STOP = "scheduler.md#the-confidence-stop-deepconf-live"
SPEED = "models.md#speed-where-the-time-goes"
PROGRAM_DRAFTS = "scheduler.md#program-drafts"
ONE_PROBLEM = "eval.md#what-one-problem-costs"
BUDGETS = "models.md#prompts-and-budgets-measured-on-the-05b-model"
REFINE_WAYS = "refiner.md#three-ways-to-the-final-text"
FRONTIER = "models.md#the-frontier-which-model-where"
CASCADE = "eval.md#the-cascade"
FRONTIER_RUNS = tuple(f"frontier-qwen2.5-coder-{size}" for size in ("0.5b", "1.5b"))

FILES: dict[Path, tuple[Entry, ...]] = {
    RUNS: (
        Entry(("eval-gsm8k-100.runs.jsonl",), "make eval", EVAL_100),
        Entry(("eval-gsm8k-200.runs.jsonl",), "make eval-200", EVAL_200),
        Entry(("eval-gsm8k-200-default.runs.jsonl",), "make eval-default", EVAL_DEFAULT),
        Entry(("cascade-tuning.runs.jsonl",), "make cascade-tuning", CASCADE),
        Entry(("eval-cascade.runs.jsonl",), "make eval-cascade", CASCADE),
        Entry(("eval-tuning.runs.jsonl",), "make eval-tuning (the learned policy's drafts)", LEARNED),
        Entry(("eval-tuning-2.runs.jsonl", "eval-tuning-3.runs.jsonl"), "make eval-tuning-2, eval-tuning-3",
              CHEAPER_ROUND),
        Entry(("eval-early-stop.runs.jsonl",), 'make eval-quick EVAL_ARGS="--early-stop both --name eval-early-stop"',
              ONE_PROBLEM),
        Entry(("eval-budget256.runs.jsonl",), "deliberate bench eval --name eval-budget256 (kept as that measurement)",
              BUDGETS),
        Entry(tuple(f"judge-compare-{label}.runs.jsonl" for label in ("rules", "trained", "untrained")),
              "make eval-judges", JUDGE),
        Entry(("judge-dataset", "judge-dataset-qwen"), "make dataset", "judge.md#the-records-deliberate-dataset"),
        Entry(("business.runs.jsonl",), "make eval-business", BUSINESS_FULL),
        Entry(("business-pipeline-one-program.runs.jsonl",), BUSINESS_ONE_PROGRAM_COMMAND, BUSINESS_FULL),
        Entry(("business-05b.runs.jsonl", "business-tuning.runs.jsonl"),
              'deliberate bench business-eval --limit 3 --max-new-tokens 320 --name business (renamed business-05b); '
              'make eval-business (EVAL_ARGS="--split tuning")', BUSINESS),
        Entry(("business-default.runs.jsonl",), BUSINESS_DEFAULT_COMMAND, BUSINESS_DEFAULT),
        Entry(("business-tuning-default.runs.jsonl",), BUSINESS_TUNING_DEFAULT_COMMAND, BUSINESS_DEFAULT),
        Entry(("business-tuning-swap.runs.jsonl",), BUSINESS_TUNING_SWAP_COMMAND, BUSINESS_DEFAULT),
        Entry(("business-tuning-solver.runs.jsonl",), BUSINESS_TUNING_SOLVER_COMMAND, BUSINESS_ENGINE),
        Entry(tuple(f"{name}.runs.jsonl" for name in FEEDBACK_RUNS), FEEDBACK_COMMAND, BUSINESS_FEEDBACK),
        Entry(tuple(f"{name}.runs.jsonl" for name in REPAIR_RUNS), REPAIR_COMMAND, BUSINESS_REPAIR),
        Entry(("business-repair.runs.jsonl",), REPAIR_SCORED_COMMAND, BUSINESS_REPAIR),
        Entry(tuple(f"{name}.runs.jsonl" for name in SIMULATOR_RUNS), SIMULATOR_COMMAND, BUSINESS_SIMULATOR),
        Entry(
            ("business-tuning-credit-programs-two-terms.runs.jsonl",), SIMULATOR_TWO_TERMS_COMMAND, BUSINESS_SIMULATOR
        ),
        Entry(("business-score-offer.runs.jsonl",), SIMULATOR_SCORED_COMMAND, BUSINESS_SIMULATOR),
        Entry(tuple(f"{name}.runs.jsonl" for name in PROMOTION_PROMPT_RUNS), PROMOTION_PROMPT_COMMAND,
              BUSINESS_PROMOTION_PROGRAMS),
        Entry(("business-promotion-programs.runs.jsonl",), PROMOTION_SCORED_COMMAND, BUSINESS_PROMOTION_PROGRAMS),
        Entry(tuple(f"{name}.runs.jsonl" for name in ADS_PROGRAMS), ADS_PROGRAMS_COMMAND, BUSINESS_DEFAULT),
        Entry(tuple(f"{name}.runs.jsonl" for name in ADS_PIPELINE), ADS_PIPELINE_COMMAND, BUSINESS_DEFAULT),
        Entry(("early_stop.runs.jsonl", "early_stop_cross_modal.runs.jsonl"), "make bench-early-stop", EARLY_STOP),
        Entry(("early_stop_aa.runs.jsonl",), "deliberate bench early-stop --same-both-sides", EARLY_STOP),
        Entry(("adaptive.runs.jsonl",), "make bench-adaptive", ADAPTIVE_LIVE),
        Entry(("default_round_3p2.runs.jsonl", "early_stop_programs4.runs.jsonl"),
              "deliberate bench early-stop --compare previous", CHEAPER_ROUND),
        Entry(("confidence_stop_live.runs.jsonl",), "deliberate bench early-stop --compare confidence",
              "experiments/early-stopping.md#the-confidence-stop-replayed-and-live"),
        Entry(tuple(f"{name}.runs.jsonl" for name in FRONTIER_RUNS), "make frontier-runs", FRONTIER),
        Entry(("refine-drafts.runs.jsonl",), "make refine-drafts", REFINE_WAYS),
        Entry(("refine.runs.jsonl",), "make refine-ways", REFINE_WAYS),
        Entry(("consensus.runs.jsonl",), "make bench-consensus", "refiner.md#consensus-benchmark"),
        Entry(("stream_prefix.runs.jsonl",), "make bench-stream-prefix", "refiner.md#consensus-benchmark"),
    ),
    RESULTS: (
        Entry(summaries("eval-gsm8k-100", replay=True), "make eval; make replay",
              EVAL_100),
        Entry(summaries("eval-gsm8k-200", replay=True), "make eval-200; deliberate bench eval --replay", EVAL_200),
        Entry(summaries("eval-gsm8k-0.5b"), "make eval-headline", EVAL_200),
        Entry(summaries("eval-gsm8k-200-default", "eval-gsm8k"), "make eval-default", EVAL_DEFAULT),
        Entry(summaries("cascade-tuning"), "make cascade-tuning", CASCADE),
        Entry(("cascade_replay.json",), "make bench-cascade", CASCADE),
        Entry(summaries("eval-cascade", "cascade"), "make eval-cascade", CASCADE),
        Entry(summaries("eval-tuning", replay=True), "make eval-tuning; deliberate bench eval --replay",
              PROGRAM_DRAFTS),
        Entry(summaries("eval-tuning-2", "eval-tuning-3"), "make eval-tuning-2, eval-tuning-3", CHEAPER_ROUND),
        Entry(summaries("eval-early-stop", replay=True), "make eval-quick (as above); make replay",
              ONE_PROBLEM),
        Entry(summaries("eval-budget256"), "deliberate bench eval --name eval-budget256",
              BUDGETS),
        Entry(summaries("judge-compare-rules", "judge-compare-trained", "judge-compare-untrained")
              + ("judge-compare.json", "judge-compare.md"), "make eval-judges", JUDGE),
        Entry(summaries(*FRONTIER_RUNS), "make frontier-runs", FRONTIER),
        Entry(("frontier.json", "frontier.md", "frontier.png"), "make frontier", FRONTIER),
        Entry(summaries("refine-drafts"), "make refine-drafts", REFINE_WAYS),
        Entry(("refine.json", "refine.md"), "make refine-ways", REFINE_WAYS),
        Entry(("judge-training.json",), "make train-judge", JUDGE),
        Entry(("judge-signal",), "make judge-signal", "judge.md#the-judge-as-a-selection-signal"),
        Entry(summaries("business"), "make eval-business", BUSINESS_FULL),
        Entry(summaries("business-05b", "business-tuning"),
              "deliberate bench business-eval --limit 3 --max-new-tokens 320 --name business (renamed business-05b); "
              'make eval-business (EVAL_ARGS="--split tuning")', BUSINESS),
        Entry(summaries("business-default"), BUSINESS_DEFAULT_COMMAND, BUSINESS_DEFAULT),
        Entry(summaries("business-tuning-default"), BUSINESS_TUNING_DEFAULT_COMMAND, BUSINESS_DEFAULT),
        Entry(summaries("business-tuning-swap"), BUSINESS_TUNING_SWAP_COMMAND, BUSINESS_DEFAULT),
        Entry(summaries("business-tuning-solver"), BUSINESS_TUNING_SOLVER_COMMAND, BUSINESS_ENGINE),
        Entry(summaries(*FEEDBACK_RUNS), FEEDBACK_COMMAND, BUSINESS_FEEDBACK),
        Entry(summaries(*REPAIR_RUNS), REPAIR_COMMAND, BUSINESS_REPAIR),
        Entry(summaries("business-repair"), REPAIR_SCORED_COMMAND, BUSINESS_REPAIR),
        Entry(summaries(*SIMULATOR_RUNS), SIMULATOR_COMMAND, BUSINESS_SIMULATOR),
        Entry(summaries("business-score-offer"), SIMULATOR_SCORED_COMMAND, BUSINESS_SIMULATOR),
        Entry(summaries(*PROMOTION_PROMPT_RUNS), PROMOTION_PROMPT_COMMAND, BUSINESS_PROMOTION_PROGRAMS),
        Entry(summaries("business-promotion-programs"), PROMOTION_SCORED_COMMAND, BUSINESS_PROMOTION_PROGRAMS),
        Entry(summaries(*ADS_PROGRAMS), ADS_PROGRAMS_COMMAND, BUSINESS_DEFAULT),
        Entry(summaries(*ADS_PIPELINE), ADS_PIPELINE_COMMAND, BUSINESS_DEFAULT),
        Entry(("early_stop.json", "early_stop_cross_modal.json"), "make bench-early-stop", EARLY_STOP),
        Entry(("early_stop_aa.json",), "deliberate bench early-stop --same-both-sides", EARLY_STOP),
        Entry(("adaptive.json",), "make bench-adaptive", ADAPTIVE_LIVE),
        Entry(("default_round_3p2.json", "early_stop_programs4.json"), "deliberate bench early-stop --compare previous",
              CHEAPER_ROUND),
        Entry(("confidence_stop_live.json",), "deliberate bench early-stop --compare confidence",
              "experiments/early-stopping.md#the-confidence-stop-replayed-and-live"),
        Entry(("early_stop_bound.json",), "make bench-early-stop-bound", CONFIDENCE_STOP),
        Entry(("early_stop_bound_smollm2.json",),
              "deliberate bench early-stop-bound --model smollm2-135m --out early_stop_bound_smollm2", EARLY_STOP),
        Entry(("adaptive_stop.json",), "make bench-adaptive-stop",
              ADAPTIVE_REPLAYED),
        Entry(("consensus.json",), "make bench-consensus", "refiner.md#consensus-benchmark"),
        Entry(("stream_prefix.json",), "make bench-stream-prefix", "refiner.md#consensus-benchmark"),
        Entry(("engines.json", "fanout.json"), "make bench-engines, bench-fanout", SPEED),
        Entry(("e2e.json",), "make bench-e2e", "development.md#make-targets"),
        Entry(("verifier.json",), "make bench-verifier", "verifier.md#speed"),
        Entry(("program_check.json",), "deliberate bench program-check",
              "verifier.md#decision-programs-a-structured-requests-program"),
        Entry(("overhead.json",), "make bench-overhead", "scheduler.md#orchestration-overhead"),
        Entry(("confidence_cost.json",), "make bench-confidence", "selection.md#token-confidence"),
        Entry(("prompt_cache_memory.json",), "deliberate bench prompt-cache-memory",
              "eval.md#why-the-pipeline-does-not-gain-more-100-problem-run"),
        Entry(("scale.json",), "make bench-scale", "deploy.md#load-balancing"),
        Entry(("soak.json", "soak-quick.json"), "make soak, soak-quick", "reliability.md#soak"),
        Entry(summaries("load", "load-quick"), "make bench-load, bench-load-quick", "scaling.md#the-curve-on-one-node"),
        Entry(summaries("load-without-deadline-admission"), "make bench-load at 860d18f (before --admit-by-deadline)",
              "scaling.md#admission"),
    ),
}  # fmt: skip

TITLES = {
    RUNS: "Recorded runs: the inputs every summary and replay is read from (resumable; no summary rewrites them).",
    RESULTS: "The summaries (JSON, Markdown, plots) read from the recorded runs in [bench/runs](../runs/README.md).",
}


def readme(directory: Path) -> str:
    lines = [f"# bench/{directory.name}", "", TITLES[directory], "",
             "Written by `deliberate bench index --write` (`make bench-index`) from",
             "`bench/deliberate_bench/index.py`; a test fails when it is out of date.", "",
             "| file | written by | cited in |", "|---|---|---|"]  # fmt: skip
    for entry in FILES[directory]:
        names = "<br>".join(f"`{name}`" for name in entry.files)
        page = entry.cited.partition("#")[0]
        lines.append(
            f"| {names} | `{entry.command}` | [{entry.cited}](../../docs/{page}#{entry.cited.partition('#')[2]}) |"
        )
    return "\n".join(lines) + "\n"


def undeclared(directory: Path) -> list[str]:
    """Files in the directory that no entry names (README.md and .gitkeep aside)."""
    declared = {name for entry in FILES[directory] for name in entry.files}
    present = {path.name for path in directory.iterdir()} - {"README.md", ".gitkeep"}
    return sorted(present - declared)


def missing(directory: Path) -> list[str]:
    return sorted(name for entry in FILES[directory] for name in entry.files if not (directory / name).exists())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help="write bench/runs/README.md and bench/results/README.md")
    args = parser.parse_args(argv)
    stale = []
    for directory in FILES:
        path = directory / "README.md"
        for name in undeclared(directory):
            print(f"{directory.name}/{name}: not declared in deliberate_bench/index.py", file=sys.stderr)
        if args.write:
            path.write_text(readme(directory))
        elif not path.exists() or path.read_text() != readme(directory):
            stale.append(str(path))
    if stale:
        print(f"out of date: {', '.join(stale)} (deliberate bench index --write)", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    raise SystemExit(main())
