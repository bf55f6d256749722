"""`deliberate bench <name> [options]`: the evaluation lab, one command; every program by name, each a module with
`main(argv)`. `deliberate bench --help` lists them from the registry below.

A new program is one module in a room (`speed/`, `replays/`, `live/`, `eval/`) and one line in BENCHMARKS; its
`make` target (bench/bench.mk) calls `deliberate bench <name>`.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import NamedTuple

PURPOSE = "the evaluation lab: evaluations, benchmarks, replays and judge training by name (docs/development.md)"


class Program(NamedTuple):
    module: str  # its main(argv) runs it
    purpose: str  # one line of `deliberate bench --help`


ROOMS = {
    "eval": "evaluations, and what reads their runs",
    "speed": "one engine, service or path timed against another on the same work",
    "replays": "recorded drafts decided again on paper, no model",
    "live": "side by side on the real stack, the soak, the load curve, lm-eval through the gateway",
    "lab": "the lab's own files",
}
BENCHMARKS = {
    "eval": Program("deliberate_bench.eval.evaluation", "single pass, self-consistency and the pipeline on GSM8K"),
    "business-eval": Program("deliberate_bench.eval.business_eval", "the business cases, pipeline against rows"),
    "dataset": Program("deliberate_bench.eval.dataset", "the judge's training records from real drafts"),
    "train-judge": Program("deliberate_bench.eval.train_judge", "fine-tune SmolLM2 into the Verifier's judge"),
    "headline": Program("deliberate_bench.eval.headline", "the 200-problem evaluation's headline from its runs"),
    "default-headline": Program("deliberate_bench.eval.default_headline", "the default deployment's table"),
    "cascade-headline": Program("deliberate_bench.eval.cascade_headline", "the cascade evaluation's table"),
    "frontier": Program("deliberate_bench.eval.frontier", "the embedded models' accuracy-latency frontier"),
    "fit-policy": Program("deliberate_bench.eval.fit_policy", "fit the learned selection policy on tuning drafts"),
    "judge-signal": Program("deliberate_bench.eval.judge_signal", "the trained judge as a selection signal"),
    "engines": Program("deliberate_bench.speed.engines", "the Drafter over gRPC against llama.cpp called directly"),
    "fanout": Program("deliberate_bench.speed.fanout", "N drafts in one batched generation against one draft"),
    "e2e": Program("deliberate_bench.speed.e2e", "end-to-end latency of a solve, per stage"),
    "verifier": Program("deliberate_bench.speed.verifier", "rules-only verification speed on ad-selection drafts"),
    "overhead": Program("deliberate_bench.speed.overhead", "the four processes against the same stages in one"),
    "confidence-cost": Program("deliberate_bench.speed.confidence_cost", "decoding with and without confidences"),
    "prompt-budget": Program("deliberate_bench.speed.prompt_budget", "draft lengths under two prompts"),
    "prompt-cache-memory": Program("deliberate_bench.speed.prompt_cache_memory", "the prompt cache's memory"),
    "program-check": Program("deliberate_bench.speed.program_check", "the program check's latency per program"),
    "scale": Program("deliberate_bench.speed.scale", "the same requests on 1 and 2 Drafter replicas"),
    "early-stop-bound": Program("deliberate_bench.replays.early_stop_bound", "what early stopping can save, at most"),
    "adaptive-stop": Program("deliberate_bench.replays.adaptive_stop", "adaptive counts and agreement stops"),
    "cascade": Program("deliberate_bench.replays.cascade", "cascade policies replayed on recorded drafts"),
    "confidence-stop": Program("deliberate_bench.replays.confidence_stop", "stopping on confidence, replayed"),
    "early-stop": Program("deliberate_bench.live.early_stop", "early stopping on and off on the live stack"),
    "consensus": Program("deliberate_bench.live.consensus", "refinement with and without the consensus prefix"),
    "stream-prefix": Program("deliberate_bench.live.stream_prefix", "the consensus prefix for a streaming caller"),
    "refine-ways": Program("deliberate_bench.live.refine_ways", "three ways to the final text, on equal terms"),
    "soak": Program("deliberate_bench.live.soak", "hours of traffic with faults injected; nothing lost"),
    "load": Program("deliberate_bench.live.load", "goodput as clients multiply, against one program"),
    "reconnect": Program("deliberate_bench.live.reconnect", "reconnect backoff after a peer serves again"),
    "lm-eval-gateway": Program("deliberate_bench.live.lm_eval_gateway", "lm-evaluation-harness through the gateway"),
    "index": Program("deliberate_bench.index", "the studies' indexes (bench/studies/README.md and each study's)"),
    "figures": Program("deliberate_bench.figures", "check every figure in the docs against its results file"),
    "compress-runs": Program("deliberate_bench.compress_runs", "compress finished runs files in place (.gz)"),
}


def room(program: Program) -> str:
    """The room a program lives in: its module's package (the index is the lab's own)."""
    parts = program.module.split(".")
    return parts[1] if len(parts) > 2 else "lab"


def listing() -> str:
    """`deliberate bench --help`'s list of programs, room by room, from the registry."""
    lines = ["programs:"]
    for name_of_room, about in ROOMS.items():
        lines.append(f"  {name_of_room}: {about}")
        lines += [f"    {name:<20} {p.purpose}" for name, p in BENCHMARKS.items() if room(p) == name_of_room]
    return "\n".join(lines)


def parser_for(name: str, doc: str | None) -> argparse.ArgumentParser:
    """A lab program's own parser: `deliberate bench <name>`, its module's docstring as the description."""
    return argparse.ArgumentParser(prog=f"deliberate bench {name}", description=doc,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip


def add_command(commands: argparse._SubParsersAction) -> None:
    """Registered in the entry-point group `deliberate.commands` (bench/pyproject.toml)."""
    bench = commands.add_parser("bench", help=PURPOSE, description=__doc__, epilog=listing(),
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    bench.add_argument("name", choices=sorted(BENCHMARKS), metavar="NAME", help="a program listed below")
    bench.add_argument("options", nargs=argparse.REMAINDER, help="the program's own (deliberate bench NAME --help)")
    bench.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    return run_benchmark(args.name, args.options)


def run_benchmark(name: str, argv: list[str]) -> int:
    """The program's main(argv); its usage line and any `sys.argv` it records name `deliberate bench <name>`."""
    module = importlib.import_module(BENCHMARKS[name].module)
    sys.argv = [f"deliberate bench {name}", *argv]
    return module.main(argv) or 0
