"""The headline on the default deployment (issue 40): a live run of the default round on the evaluation's 200
problems (`make eval-default`: the default Drafter and Refiner, early stopping and re-drafts as served), with the
greedy single passes of every embedded model beside it — what a user would pick instead — and the figures the
default is held to.

    deliberate bench default-headline bench/studies/gsm8k-headline/eval-gsm8k-200-default.runs.jsonl  # → <name>.*

Rows: `single:<model>` and `single:program:<model>` (one greedy prose draft, one greedy program, each model),
`majority@5` (a plain vote over the round's drafts, replayed), `pipeline@3` (the Scheduler's selection among the
first 3 drafts refined, no re-draft), `pipeline@5` (the live Solve: the default row), `pass@5` (an oracle).

Where the live round's quorum stopped drafts before their answer, the vote and the oracle saw only the drafts that
finished: they are named for it (`majority@5(after-stop)`, `pass@5(after-stop)`), with the count of stopped drafts
beside them, and `pipeline@3` — the round's first three drafts, all prose, so it can never be `VERIFIED` by a
program's cross-check — is named `pipeline@3(prose-only)`. A vote over five complete drafts is `make eval-cascade`'s.
"""

from __future__ import annotations

import time

from deliberate_bench.eval.headline import paired, run_headline, targets_table
from deliberate_bench.eval.outcomes import (
    Outcome,
    live_drafts,
    named_after_stop,
    outcome_of,
    outcomes,
    peak_memory,
    stopped_drafts,
)
from deliberate_bench.eval.report import markdown
from deliberate_bench.eval.summary import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, config_summary

SIZE = 5
DEFAULT_ROW = f"pipeline@{SIZE}"
REPLAYED_ROWS = ("majority@5", "pipeline@3", DEFAULT_ROW, "pass@5")
TARGET_ACCURACY = 0.65
MARGIN_OVER_SINGLE = 0.08
TARGET_PRECISION = 0.80
MEMORY_LIMIT_MB = 6 * 1024
# pipeline@3 replays the round's first three drafts, all prose: never cross-checked by a program.
PROSE_ONLY = {"pipeline@3": "pipeline@3(prose-only)"}


def rows_of(records: list[dict]) -> dict[str, list[Outcome]]:
    """Each row's outcome per problem, on the problems every row has."""
    settings = records[0]["settings"]
    model, other = settings["model"], settings.get("cross_drafter_model")
    rows: dict[str, list[Outcome]] = {}
    for record in records:
        found = outcomes(record, settings["sizes"])
        named = {f"single:{model}": found["single"], f"single:program:{model}": found["single:program"]}
        if other:
            for kind, field in (("single", "cross_single"), ("single:program", "cross_single_program")):
                one = record.get(field) or {}
                named[f"{kind}:{other}"] = outcome_of(
                    one.get("answer"), record["gold"], one.get("latency_s"), one.get("completion_tokens", 0),
                    cut=one.get("finish_reason") == "LENGTH",
                )  # fmt: skip
        named |= {name: found[name] for name in REPLAYED_ROWS if name in found}
        for name, outcome in named.items():
            rows.setdefault(name, []).append(outcome)
    return rows


def targets(by_name: dict[str, dict], rows: dict[str, list[Outcome]], memory_mb: float | None) -> list[dict]:
    """Issue 40's figures, each with the value reached and whether it is met."""
    default = by_name[DEFAULT_ROW]
    singles = [c for name, c in by_name.items() if name.startswith("single")]
    best_single = max(singles, key=lambda c: c["accuracy"])
    vs_single = paired(rows[DEFAULT_ROW], rows[best_single["name"]])
    faster_and_better = [
        c["name"] for c in singles
        if c["latency_p50_s"] is not None and c["latency_p50_s"] <= default["latency_p50_s"]
        and c["accuracy"] > default["accuracy"]
    ]  # fmt: skip
    precision, rest = default["verified_precision"], default["unverified_accuracy"]
    return [
        {
            "target": f"{DEFAULT_ROW} ≥ {TARGET_ACCURACY:.0%}",
            "value": default["accuracy"],
            "met": default["accuracy"] >= TARGET_ACCURACY,
        },
        {
            "target": f"{DEFAULT_ROW} ≥ the best single pass ({best_single['name']}) + 8 points, paired interval "
            "above 0",
            "value": vs_single,
            "met": vs_single["points"] >= 100 * MARGIN_OVER_SINGLE and vs_single["ci_low"] > 0,
        },
        {
            "target": f"no single pass at {DEFAULT_ROW}'s median latency or less is more accurate",
            "value": faster_and_better,
            "met": not faster_and_better,
        },
        {
            "target": f"VERIFIED ≥ {TARGET_PRECISION:.0%} right and ≥ 2× the accuracy of the rest",
            "value": {"verified_precision": precision, "rest_accuracy": rest},
            "met": precision is not None and precision >= TARGET_PRECISION and (not rest or precision >= 2 * rest),
        },
        {
            "target": "peak resident memory of the default stack ≤ 6 GB",
            "value": memory_mb,
            "met": memory_mb is not None and memory_mb <= MEMORY_LIMIT_MB,
        },
    ]


def default_headline(records: list[dict], source: str) -> dict:
    gsm8k = [r for r in records if r.get("task") == "gsm8k"]
    settings = gsm8k[0]["settings"]
    memory = peak_memory(gsm8k)
    rows = rows_of(gsm8k)
    single = rows[f"single:{settings['model']}"]
    configs = [config_summary(name, per, single, memory, SIZE) for name, per in rows.items()]
    other = settings.get("cross_drafter_model")
    for config in configs:
        if other and config["name"].endswith(f":{other}"):
            config["peak_rss_mb"] = None  # its Drafter ran beside the stack, not measured
    by_name = {c["name"]: c for c in configs}
    stack_mb = by_name[DEFAULT_ROW]["peak_rss_mb"]
    found_targets = targets(by_name, rows, stack_mb)
    named_after_stop(configs, gsm8k)
    for config in configs:
        config["name"] = PROSE_ONLY.get(config["name"], config["name"])
    return {
        "problems": len(gsm8k),
        "model": settings["model"],
        "refiner_model": settings.get("refiner_model", settings["model"]),
        "engine": settings.get("engine"),
        "seed": settings.get("seed"),
        "source": source,
        "default_row": DEFAULT_ROW,
        "configs": configs,
        "drafts_recorded": len(live_drafts(gsm8k)),
        "drafts_stopped_by_the_quorum": stopped_drafts(gsm8k),
        "targets": found_targets,
        "bootstrap": {"seed": BOOTSTRAP_SEED, "resamples": BOOTSTRAP_RESAMPLES},
        "summarized_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def default_markdown(result: dict) -> str:
    lines = [
        markdown(result).rstrip("\n"),
        "",
        f"{result['problems']} problems of GSM8K's train split outside every tuning block. Drafts by "
        f"`{result['model']}`, the final answer by `{result['refiner_model']}` (the Refiner call is in every "
        f"pipeline row's latency); `{DEFAULT_ROW}` is the live Solve of the default round recorded in "
        f"`{result['source']}` (the default row), `pass@{SIZE}` an oracle.",
        *after_stop_note(result),
        "",
        *targets_table(result["targets"]),
    ]
    return "\n".join(lines) + "\n"


def after_stop_note(result: dict) -> list[str]:
    stopped = result.get("drafts_stopped_by_the_quorum")
    if not stopped:
        return []
    return [
        "",
        f"The round's quorum stopped {stopped} of its {result['drafts_recorded']} drafts before their answer, so "
        f"`majority@{SIZE}(after-stop)` votes and `pass@{SIZE}(after-stop)` looks among the drafts that finished "
        "(as few as 2 on some problems); `pipeline@3(prose-only)` is the round's first three drafts, all prose. "
        "Five complete drafts: `make eval-cascade` (bench/studies/cascade/cascade.md).",
    ]


def main(argv: list[str] | None = None) -> int:
    return run_headline(argv, __doc__, "a runs file of the default round (make eval-default)", "eval-gsm8k",
                        default_headline, default_markdown)  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
