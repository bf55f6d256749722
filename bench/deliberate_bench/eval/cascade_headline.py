"""Does deliberation pay for itself (issue 54)? The cascade — the default round — against what a user would run
instead, all live on the same problems in one run (`make eval-cascade`: eval-200's 200 and 200 more, no tuning line).

    deliberate bench cascade-headline bench/studies/cascade/eval-cascade.runs.jsonl   # → cascade.{json,md,png}

Rows: `single:program:<model>` (one greedy program: the baseline), `single:<model>` (one greedy prose draft),
`round@5` (five drafts at once, three prose and two programs, every draft to its end, the Scheduler's selection),
`majority@5` and `pass@5` read from those complete drafts (a plain vote over every answered draft; an oracle), and
`cascade` (the live default Solve). Each row: accuracy with its 95 % Wilson interval, the paired difference to the
baseline with a bootstrap interval over problems, latency p50/p95, mean tokens; the cascade's share of problems
settled at its first stage and its `VERIFIED` precision against the accuracy of the rest. Where a target is missed,
`by_stop_rule` says why from the same records: per rule that ended the cascade, its problems, and on them the
cascade's, the greedy program's, the vote's and the oracle's accuracy (what stopping there cost, or saved).
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from deliberate.selection import answer_key, same_answer
from deliberate_bench.eval.headline import run_headline
from deliberate_bench.eval.stats import paired_bootstrap, percentile, wilson
from deliberate_bench.results import code_version

DEFAULT_ROW = "cascade"
BOOTSTRAP = {"seed": 2026, "resamples": 10_000}
# The figures: the default against the baseline.
MARGIN_POINTS = 5.0
MAX_P50_RATIO, MAX_P95_RATIO, MAX_TOKEN_RATIO = 2.0, 4.0, 2.5
MIN_PRECISION, MIN_PRECISION_RATIO = 0.85, 2.5


def vote(drafts: list[Mapping]) -> str | None:
    """A plain vote over every answered draft (the first answer of a tie)."""
    keys = [answer_key(d["answer"]) for d in drafts if d.get("answer")]
    return Counter(keys).most_common(1)[0][0] if keys else None


def rows_of(records: list[Mapping], model: str) -> dict[str, list[dict]]:
    """Each row's outcome per problem: right, latency, tokens, and (the pipelines) status and first-stage stop."""
    rows: dict[str, list[dict]] = {}

    def add(name: str, answer, gold: str, latency, tokens: int, status=None, first_stage=None) -> None:
        rows.setdefault(name, []).append({"right": same_answer(answer, gold), "latency_s": latency, "tokens": tokens,
                                          "status": status, "first_stage": first_stage})  # fmt: skip

    for r in records:
        gold, complete, cascade = r["gold"], r["round_complete"], r["solve"]
        for name, one in ((f"single:program:{model}", r["single_program"]), (f"single:{model}", r["single"])):
            add(name, one.get("answer"), gold, one.get("latency_s"), one.get("completion_tokens", 0))
        drafts = [d for d in complete.get("drafts", []) if d["round"] == 0]
        tokens = complete.get("completion_tokens", 0)
        add("round@5", complete.get("answer"), gold, complete.get("latency_s"), tokens, complete.get("status"))
        add("majority@5", vote(drafts), gold, max((d["generation_latency_s"] for d in drafts), default=None), tokens)
        oracle = next((d["answer"] for d in drafts if same_answer(d.get("answer"), gold)), None)
        add("pass@5", oracle, gold, None, tokens)
        plan = cascade.get("round_plan") or {}
        first = (
            plan.get("stages") == 1 and cascade.get("rounds") == 1 and plan.get("stop_reason", "").startswith("settled")
        )
        add(DEFAULT_ROW, cascade.get("answer"), gold, cascade.get("latency_s"), cascade.get("completion_tokens", 0),
            cascade.get("status"), first)  # fmt: skip
    return rows


def stop_rule(stop_reason: str) -> str:
    """The rule that ended a cascade, without the numbers it saw ("settled: 2 valid drafts agree on 40" → "settled: 2
    valid drafts agree")."""
    rule = re.sub(r" agree on \S+$", " agree", stop_reason or "unrecorded")
    return re.sub(r"confidence [\d.]+ ≥", "confidence ≥", rule)


def by_stop_rule(records: list[Mapping], rows: Mapping[str, list[dict]], baseline_row: str) -> list[dict]:
    """Per rule that ended the cascade: how many problems, and on those the rows' accuracy (the baseline's under
    `baseline`: a model's name holds dots, which a figure's path would split)."""
    rules = [stop_rule((r["solve"].get("round_plan") or {}).get("stop_reason", "")) for r in records]
    shown = {DEFAULT_ROW: DEFAULT_ROW, "baseline": baseline_row, "majority@5": "majority@5", "pass@5": "pass@5"}
    table = []
    for rule, count in Counter(rules).most_common():
        at = [i for i, one in enumerate(rules) if one == rule]
        accuracy = {key: round(sum(rows[row][i]["right"] for i in at) / count, 3) for key, row in shown.items()}
        table.append({"rule": rule, "problems": count, "accuracy": accuracy})
    return table


def summary(name: str, per: list[dict], baseline: list[dict]) -> dict:
    n, right = len(per), sum(o["right"] for o in per)
    low, high = wilson(right, n)
    diff, d_low, d_high = paired_bootstrap([o["right"] for o in per], [o["right"] for o in baseline], **BOOTSTRAP)
    latencies = [o["latency_s"] for o in per if o["latency_s"] is not None]
    verified = [o["right"] for o in per if o["status"] == "VERIFIED"]
    rest = [o["right"] for o in per if o["status"] is not None and o["status"] != "VERIFIED"]
    stages = [o["first_stage"] for o in per if o["first_stage"] is not None]
    return {
        "name": name,
        "problems": n,
        "accuracy": round(right / n, 4),
        "ci_low": round(low, 4),
        "ci_high": round(high, 4),
        "paired_vs_baseline_points": round(100 * diff, 1),
        "paired_ci_low": round(100 * d_low, 1),
        "paired_ci_high": round(100 * d_high, 1),
        "latency_p50_s": round(percentile(latencies, 0.5), 2) if latencies else None,
        "latency_p95_s": round(percentile(latencies, 0.95), 2) if latencies else None,
        "tokens_mean": round(statistics.fmean(o["tokens"] for o in per), 1),
        "first_stage_share": round(sum(stages) / len(stages), 3) if stages else None,
        "verified": len(verified) if verified or rest else None,
        "verified_precision": round(sum(verified) / len(verified), 3) if verified else None,
        "rest_accuracy": round(sum(rest) / len(rest), 3) if rest else None,
    }


def targets(by_name: Mapping[str, dict], baseline_row: str) -> list[dict]:
    c, b, vote_row = by_name[DEFAULT_ROW], by_name[baseline_row], by_name["majority@5"]
    ratio = lambda key: round(c[key] / b[key], 2) if c[key] and b[key] else None  # noqa: E731
    precision, rest = c["verified_precision"], c["rest_accuracy"]
    return [
        {"target": f"cascade ≥ {baseline_row} + {MARGIN_POINTS:g} points, paired interval above 0",
         "value": [c["paired_vs_baseline_points"], c["paired_ci_low"], c["paired_ci_high"]],
         "met": c["paired_vs_baseline_points"] >= MARGIN_POINTS and c["paired_ci_low"] > 0},
        {"target": f"cascade p50 ≤ {MAX_P50_RATIO:g}× the baseline's", "value": ratio("latency_p50_s"),
         "met": (ratio("latency_p50_s") or 99) <= MAX_P50_RATIO},
        {"target": f"cascade p95 ≤ {MAX_P95_RATIO:g}× the baseline's", "value": ratio("latency_p95_s"),
         "met": (ratio("latency_p95_s") or 99) <= MAX_P95_RATIO},
        {"target": f"cascade mean tokens ≤ {MAX_TOKEN_RATIO:g}× the baseline's", "value": ratio("tokens_mean"),
         "met": (ratio("tokens_mean") or 99) <= MAX_TOKEN_RATIO},
        {"target": "cascade ≥ majority@5 over complete drafts", "value": [c["accuracy"], vote_row["accuracy"]],
         "met": c["accuracy"] >= vote_row["accuracy"]},
        {"target": f"VERIFIED ≥ {MIN_PRECISION:.0%} right and ≥ {MIN_PRECISION_RATIO:g}× the accuracy of the rest",
         "value": {"verified_precision": precision, "rest_accuracy": rest},
         "met": precision is not None and precision >= MIN_PRECISION
                and (not rest or precision >= MIN_PRECISION_RATIO * rest)},
    ]  # fmt: skip


def headline(records: list[Mapping], source: str) -> dict:
    done = [r for r in records if r.get("task") == "gsm8k" and r.get("round_complete") and r.get("solve")]
    if not done:
        raise SystemExit(f"{source}: no problem recorded with --complete-round (make eval-cascade)")
    model = done[0]["settings"]["model"]
    baseline_row = f"single:program:{model}"
    rows = rows_of(done, model)
    configs = [summary(name, per, rows[baseline_row]) for name, per in rows.items()]
    by_name = {c["name"]: c for c in configs}
    return {
        "problems": len(done),
        "source": source,
        "model": model,
        "default_row": DEFAULT_ROW,
        "baseline_row": baseline_row,
        "configs": configs,
        "targets": targets(by_name, baseline_row),
        "stop_reasons": dict(
            Counter(
                (r["solve"].get("round_plan") or {}).get("stop_reason", "").split(":")[0] for r in done
            ).most_common()
        ),  # fmt: skip
        "by_stop_rule": by_stop_rule(done, rows, baseline_row),
        "commits": sorted({(r.get("code") or {}).get("commit", "unrecorded") for r in done}),
        "bootstrap": BOOTSTRAP,
        "code": code_version(),
    }


def markdown(result: dict) -> str:
    lines = [
        f"# The cascade against one greedy program — {result['problems']} GSM8K train problems (no tuning line)",
        "",
        f"Model `{result['model']}`, 2 cores; from `{result['source']}` (commits {', '.join(result['commits'])}).",
        "",
        "| row | accuracy (95 % CI) | vs baseline, points (95 % CI) | p50 s | p95 s | tokens | first stage | "
        "VERIFIED right |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in result["configs"]:

        def show(value, fmt="{}"):
            return "–" if value is None else fmt.format(value)

        lines.append(
            f"| `{c['name']}` | {c['accuracy']:.1%} ({c['ci_low']:.1%}–{c['ci_high']:.1%}) | "
            f"{c['paired_vs_baseline_points']:+.1f} ({c['paired_ci_low']:+.1f} to {c['paired_ci_high']:+.1f}) | "
            f"{show(c['latency_p50_s'])} | {show(c['latency_p95_s'])} | {c['tokens_mean']} | "
            f"{show(c['first_stage_share'], '{:.0%}')} | {show(c['verified_precision'], '{:.1%}')} |"
        )
    lines += ["", "| target | value | met |", "|---|---|---|"]
    lines += [f"| {t['target']} | {t['value']} | {'yes' if t['met'] else 'no'} |" for t in result["targets"]]
    lines += ["", "Why, per rule that ended the cascade (accuracy of each row on those problems):", "",
              "| rule | problems | cascade | one greedy program | majority@5 | pass@5 |",
              "|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for r in result["by_stop_rule"]:
        a = r["accuracy"]
        lines.append(f"| {r['rule']} | {r['problems']} | {a[DEFAULT_ROW]:.1%} | {a['baseline']:.1%} | "
                     f"{a['majority@5']:.1%} | {a['pass@5']:.1%} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for c in result["configs"]:
        if c["latency_p50_s"] is None:
            continue
        ax.errorbar(c["latency_p50_s"], 100 * c["accuracy"], fmt="o",
                    yerr=[[100 * (c["accuracy"] - c["ci_low"])], [100 * (c["ci_high"] - c["accuracy"])]])  # fmt: skip
        ax.annotate(c["name"], (c["latency_p50_s"], 100 * c["accuracy"]), textcoords="offset points", xytext=(5, 5))
    ax.set_xlabel("median latency, s (2 cores)")
    ax.set_ylabel("accuracy, % (95 % CI)")
    ax.set_title(f"The cascade and what a user would run instead ({result['problems']} problems)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    return run_headline(argv, __doc__, "make eval-cascade's runs file", "cascade", headline, markdown, draw=plot)


if __name__ == "__main__":
    raise SystemExit(main())
