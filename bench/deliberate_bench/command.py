"""`deliberate bench <name> [options]`: every lab program by name, each a module with `main(argv)`.

A new benchmark is one module in a room (`speed/`, `replays/`, `live/`, `eval/`) and one line in BENCHMARKS; its
`make` target (bench/bench.mk) calls `deliberate bench <name>`. `deliberate eval`, `dataset` and `train-judge` are
commands of their own (bench/pyproject.toml).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from deliberate_client.cli import SERVER_COMMANDS

# name → the module whose main(argv) runs it.
BENCHMARKS = {
    # speed: one engine, service or path timed against another on the same work
    "engines": "deliberate_bench.speed.engines",
    "fanout": "deliberate_bench.speed.fanout",
    "e2e": "deliberate_bench.speed.e2e",
    "verifier": "deliberate_bench.speed.verifier",
    "overhead": "deliberate_bench.speed.overhead",
    "confidence-cost": "deliberate_bench.speed.confidence_cost",
    "prompt-budget": "deliberate_bench.speed.prompt_budget",
    "prompt-cache-memory": "deliberate_bench.speed.prompt_cache_memory",
    "program-check": "deliberate_bench.speed.program_check",
    "scale": "deliberate_bench.speed.scale",
    # replays: recorded drafts decided again on paper, no model
    "early-stop-bound": "deliberate_bench.replays.early_stop_bound",
    "adaptive-stop": "deliberate_bench.replays.adaptive_stop",
    "cascade": "deliberate_bench.replays.cascade",
    "confidence-stop": "deliberate_bench.replays.confidence_stop",
    # live: side by side on the real stack, the soak, lm-eval through the gateway
    "early-stop": "deliberate_bench.live.early_stop",
    "consensus": "deliberate_bench.live.consensus",
    "stream-prefix": "deliberate_bench.live.stream_prefix",
    "refine-ways": "deliberate_bench.live.refine_ways",
    "soak": "deliberate_bench.live.soak",
    "load": "deliberate_bench.live.load",
    "reconnect": "deliberate_bench.live.reconnect",
    "lm-eval-gateway": "deliberate_bench.live.lm_eval_gateway",
    # eval: what reads `deliberate eval`'s runs, and the business cases
    "headline": "deliberate_bench.eval.headline",
    "default-headline": "deliberate_bench.eval.default_headline",
    "cascade-headline": "deliberate_bench.eval.cascade_headline",
    "frontier": "deliberate_bench.eval.frontier",
    "fit-policy": "deliberate_bench.eval.fit_policy",
    "judge-signal": "deliberate_bench.eval.judge_signal",
    "business-eval": "deliberate_bench.eval.business_eval",
    # the lab's own files: the READMEs of bench/runs and bench/results
    "index": "deliberate_bench.index",
}


def add_command(commands: argparse._SubParsersAction) -> None:
    """Registered in the entry-point group `deliberate.commands` (bench/pyproject.toml)."""
    bench = commands.add_parser("bench", help=SERVER_COMMANDS["bench"], description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    bench.add_argument("name", choices=sorted(BENCHMARKS), metavar="NAME", help=", ".join(sorted(BENCHMARKS)))
    bench.add_argument("options", nargs=argparse.REMAINDER, help="the benchmark's own (deliberate bench NAME --help)")
    bench.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    return run_benchmark(args.name, args.options)


def run_benchmark(name: str, argv: list[str]) -> int:
    """The benchmark's main(argv); its usage line and any `sys.argv` it records name `deliberate bench <name>`."""
    module = importlib.import_module(BENCHMARKS[name])
    sys.argv = [f"deliberate bench {name}", *argv]
    return module.main(argv) or 0
