"""The accuracy-latency frontier of the embedded models (issue 40, docs/models.md#the-frontier).

`make frontier-runs` records, per embedded model as Drafter, one `deliberate bench eval` run on the same tuning
problems: a greedy prose pass, a greedy program pass, the pipeline at N = 5 (and N = 3 by refining the first 3 drafts),
and the same selected drafts refined again by the other model's Refiner (`cross_refine`: the mixed deployments). This
reads those runs (bench/studies/frontier/frontier-<model>.runs.jsonl) and writes frontier.{json,md,png} beside them: one
row per configuration with accuracy (Wilson interval), median and p95 latency per solve, tokens and peak memory; the
frontier (no configuration is both faster and more accurate); and the default chosen by RULE, which was fixed before any
run was scored.

    deliberate bench frontier      (make frontier)
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import dataclass
from pathlib import Path

from deliberate_bench.eval.outcomes import (
    AFTER_STOP,
    SERVICES_USED,
    Outcome,
    outcome_of,
    outcomes,
    peak_memory,
    stopped_drafts,
)
from deliberate_bench.eval.stats import percentile, wilson
from deliberate_bench.results import LAB_FILES, read_runs, write_json

MODELS = ("qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b")
TODAY = "pipeline@5:0.5b"  # the shipped default when the frontier was measured: 0.5B drafts (3 prose + 2 programs)
LATENCY_BUDGET = 2.5  # the chosen default's median solve may take at most this multiple of TODAY's
RULE = (
    f"Among the pipeline deployments (pipeline@3 and @5, either embedded model as Drafter, either as Refiner), the "
    f"most accurate on these tuning problems whose median solve latency is at most {LATENCY_BUDGET}x the median of "
    f"today's default ({TODAY}, measured in the same runs); a tie goes to the lower median latency. Fixed before "
    "any run was scored."
)
# The rows read from each run's outcomes (eval_summary.outcomes), by their names there.
FROM_OUTCOMES = ("single", "single:program", "majority@3", "majority@5", "pipeline@3", "pipeline@5", "pass@5")


def short(model: str) -> str:
    return model.removeprefix("qwen2.5-coder-")


@dataclass
class Row:
    name: str
    drafter_model: str
    refiner_model: str | None  # None: no Refiner call
    drafts: int
    outcomes: list[Outcome]
    peak_rss_mb: float | None
    replayed: bool = False  # selected from recorded drafts: no model time of its own


def rows_of(model: str, records: list[dict], memory: dict, other_refiner_mb: float | None) -> list[Row]:
    """Every configuration one run measured, its Drafter being `model`."""
    other = next(m for m in MODELS if m != model)
    per_name: dict[str, list[Outcome]] = {}
    for record in records:
        found = outcomes(record, [3, 5])
        for name in FROM_OUTCOMES:
            per_name.setdefault(name, []).append(found[name])
        cross = record.get("cross_refine") or {}
        per_name.setdefault("cross", []).append(
            outcome_of(cross.get("answer"), record["gold"], cross.get("latency_s"), cross.get("completion_tokens", 0))
        )

    def mb(kind: str) -> float:
        return round(sum(memory.get(service, 0.0) for service in SERVICES_USED[kind]), 1)

    tag = short(model)
    # Where the quorum stopped drafts before their answer, the vote and the oracle saw only the drafts that finished.
    seen = AFTER_STOP if stopped_drafts(records) else ""
    stack = mb("pipeline")
    mixed = None if other_refiner_mb is None else round(stack - memory.get("refiner", 0.0) + other_refiner_mb, 1)
    return [
        Row(f"single:{tag}", model, None, 1, per_name["single"], mb("single")),
        Row(f"single:program:{tag}", model, None, 1, per_name["single:program"], mb("single")),
        Row(f"majority@3{seen}:{tag}", model, None, 3, per_name["majority@3"], mb("majority"), replayed=True),
        Row(f"majority@5{seen}:{tag}", model, None, 5, per_name["majority@5"], mb("majority"), replayed=True),
        Row(f"pipeline@3:{tag}", model, model, 3, per_name["pipeline@3"], stack),
        Row(f"pipeline@5:{tag}", model, model, 5, per_name["pipeline@5"], stack),
        Row(f"pipeline@5:{tag}/{short(other)}", model, other, 5, per_name["cross"], mixed),
        Row(f"pass@5{seen}:{tag}", model, None, 5, per_name["pass@5"], stack, replayed=True),
    ]


def summary_of(row: Row) -> dict:
    n = len(row.outcomes)
    correct = sum(o.correct for o in row.outcomes)
    low, high = wilson(correct, n)
    latencies = [o.latency_s for o in row.outcomes if o.latency_s is not None]
    return {
        "name": row.name,
        "drafter_model": row.drafter_model,
        "refiner_model": row.refiner_model,
        "drafts": row.drafts,
        "problems": n,
        "correct": correct,
        "accuracy": round(correct / n, 4) if n else None,
        "ci_low": round(low, 4),
        "ci_high": round(high, 4),
        "latency_p50_s": round(percentile(latencies, 0.50), 2) if latencies else None,
        "latency_p95_s": round(percentile(latencies, 0.95), 2) if latencies else None,
        "tokens_mean": round(statistics.fmean(o.tokens for o in row.outcomes), 1) if n else None,
        "peak_rss_mb": row.peak_rss_mb,
        "replayed": row.replayed,
        "oracle": row.name.startswith("pass@"),
    }


def on_frontier(configs: list[dict]) -> list[str]:
    """The configurations no other beats on both accuracy and median latency (oracles left out: nothing can
    deploy them)."""
    real = sorted(
        (c for c in configs if not c["oracle"] and c["latency_p50_s"] is not None),
        key=lambda c: (c["latency_p50_s"], -c["accuracy"]),
    )
    frontier, best = [], -1.0
    for c in real:
        if c["accuracy"] > best:
            frontier.append(c["name"])
            best = c["accuracy"]
    return frontier


def chosen_default(configs: list[dict]) -> tuple[str, float]:
    """RULE applied: the default's name and the latency limit it was chosen under."""
    by_name = {c["name"]: c for c in configs}
    limit = LATENCY_BUDGET * by_name[TODAY]["latency_p50_s"]
    pipelines = [
        c for c in configs if c["name"].startswith("pipeline@") and c["latency_p50_s"] is not None
        and c["latency_p50_s"] <= limit
    ]  # fmt: skip
    best = max(pipelines, key=lambda c: (c["accuracy"], -c["latency_p50_s"]))
    return best["name"], round(limit, 2)


def frontier(runs_dir: Path) -> dict:
    runs = {model: read_runs(runs_dir / f"frontier-{model}.runs.jsonl") for model in MODELS}
    memory = {model: peak_memory(records) or {} for model, records in runs.items()}
    ids = [{r["id"] for r in records if r.get("task") == "gsm8k"} for records in runs.values()]
    common = set.intersection(*ids)  # the same problems for every row
    configs = []
    for model, records in runs.items():
        other = next(m for m in MODELS if m != model)
        paired = sorted((r for r in records if r["id"] in common), key=lambda r: r["id"])
        configs += [summary_of(row) for row in rows_of(model, paired, memory[model], memory[other].get("refiner"))]
    default, limit = chosen_default(configs)
    return {
        "problems": len(common),
        "data": "GSM8K train, the tuning block (lines 0-49), the first problems of `deliberate bench eval`'s sample "
        "(seed 2026) — never an evaluation problem",
        "commands": ["make frontier-runs", "make frontier"],
        "today": TODAY,
        "rule": RULE,
        "latency_limit_s": limit,
        "default": default,
        "frontier": on_frontier(configs),
        "configs": configs,
    }


def markdown(result: dict) -> str:
    lines = [
        f"# The accuracy-latency frontier: {result['problems']} tuning problems, 2 cores",
        "",
        f"Commands: `{'`, `'.join(result['commands'])}`. Problems: {result['data']}.",
        "",
        f"Rule: {result['rule']}",
        "",
        f"Today's default median: {next(c for c in result['configs'] if c['name'] == result['today'])['latency_p50_s']}"
        f" s, so the limit is {result['latency_limit_s']} s. **Chosen: `{result['default']}`.**",
        "",
        "| configuration | drafts | Refiner | accuracy | 95 % interval | p50 s | p95 s | tokens | peak RSS MB "
        "| frontier |",
        "|---|---:|---|---:|---|---:|---:|---:|---:|:---:|",
    ]
    for c in sorted(result["configs"], key=lambda c: c["latency_p50_s"] or 0):
        refiner = short(c["refiner_model"]) if c["refiner_model"] else "—"
        name = f"**{c['name']}**" if c["name"] == result["default"] else c["name"]
        note = " (oracle)" if c["oracle"] else " (replayed)" if c["replayed"] else ""
        lines.append(
            f"| {name}{note} | {c['drafts']} | {refiner} | {100 * c['accuracy']:.1f} % "
            f"| {100 * c['ci_low']:.0f}–{100 * c['ci_high']:.0f} % | {c['latency_p50_s']} | {c['latency_p95_s']} "
            f"| {c['tokens_mean']} | {c['peak_rss_mb']} | {'●' if c['name'] in result['frontier'] else ''} |"
        )
    lines += [
        "",
        "Latency is per solve on the stack the row needs, measured in the run: single passes alone on the Drafter; "
        "pipeline@5 the whole Solve (one re-draft round allowed); pipeline@3 and the mixed rows the drafting time of "
        "their drafts inside the 5-draft round plus a Refiner call of their own (so pipeline@3 is an upper bound: its "
        "3 drafts shared the cores with 2 more). Replayed rows select among the recorded drafts; their latency is the "
        "drafting time. Peak RSS: the services the row needs, summed (VmHWM).",
        "",
    ]
    return "\n".join(lines)


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    configs = [c for c in result["configs"] if not c["oracle"] and c["latency_p50_s"] is not None]
    figure, axes = plt.subplots(figsize=(9, 6))
    colours = {MODELS[0]: "tab:blue", MODELS[1]: "tab:red"}
    for c in configs:
        y = 100 * c["accuracy"]
        marker = "o" if c["name"].startswith("pipeline") else "s" if c["name"].startswith("single") else "^"
        axes.errorbar(
            c["latency_p50_s"], y, yerr=[[y - 100 * c["ci_low"]], [100 * c["ci_high"] - y]], fmt=marker,
            color=colours[c["drafter_model"]], capsize=3, alpha=0.8,
        )  # fmt: skip
        label = c["name"] + (" (default)" if c["name"] == result["default"] else "")
        axes.annotate(label, (c["latency_p50_s"], y), textcoords="offset points", xytext=(5, 3), fontsize=7.5)
    front = sorted((c for c in configs if c["name"] in result["frontier"]), key=lambda c: c["latency_p50_s"])
    axes.step([c["latency_p50_s"] for c in front], [100 * c["accuracy"] for c in front], where="post",
              color="grey", linestyle="--", label="frontier")  # fmt: skip
    axes.axvline(result["latency_limit_s"], color="grey", linestyle=":", label="2.5x today's median")
    axes.set_xlabel("median latency per solve (s), 2 cores")
    axes.set_ylabel("accuracy (%), 95 % Wilson interval")
    axes.set_title(f"GSM8K tuning problems ({result['problems']}): blue 0.5B drafts, red 1.5B drafts", fontsize=10)
    axes.grid(alpha=0.3)
    axes.legend(loc="lower right")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs-dir", type=Path, default=LAB_FILES, help="make frontier-runs' runs (the study's)")
    parser.add_argument("--results-dir", type=Path, default=LAB_FILES, help="frontier.{json,md,png} (the study's)")
    args = parser.parse_args(argv)
    result = frontier(args.runs_dir)
    write_json(args.results_dir / "frontier.json", result)
    (args.results_dir / "frontier.md").write_text(markdown(result))
    plot(result, args.results_dir / "frontier.png")
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
