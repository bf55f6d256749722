"""The business evaluation's summary: each row's feasibility and objective per case, written as JSON, a Markdown
table and a plot (docs/business-cases.md)."""

from __future__ import annotations

import re
import statistics
from collections import Counter
from pathlib import Path

from deliberate_bench.eval import business_instances as bi
from deliberate_bench.eval.outcomes import model_name
from deliberate_bench.eval.stats import percentile, wilson
from deliberate_bench.eval.summary import Paths
from deliberate_bench.results import read_runs, write_json

ROWS = ("single", "single:program", "template", "pipeline", "cascade", "reference")
OBJECTIVE_NAMES = {"ads": "total CTR", "credit": "total amount offered", "promotion": "gross profit"}


def latest(records: list[dict], split: str) -> dict[tuple[str, str, str], dict]:
    """The last record of each (case, instance, row) of the split: a retried failure replaces the failure."""
    return {(r["case"], r["id"], r["row"]): r for r in records if r.get("split") == split}


def row_summary(records: list[dict]) -> dict:
    """Feasibility and objective over the instances some plan solves; on the varied split, beside them, the
    instances none does (`solvable` false), where an answer must not be `VERIFIED`."""
    unsolvable = [r for r in records if r.get("solvable") is False]
    records = [r for r in records if r.get("solvable") is not False]
    judged_records = [r for r in records if r.get("feasible") is not None]
    n = len(judged_records)
    feasible = sum(bool(r["feasible"]) for r in judged_records)
    low, high = wilson(feasible, n)
    ratios = [r["objective_ratio"] for r in judged_records if r.get("objective_ratio") is not None]
    objectives = [r["objective"] for r in judged_records if r["feasible"] and r.get("objective") is not None]
    latencies = [r["latency_s"] for r in records if r.get("latency_s") is not None]
    tokens = [r["tokens"] for r in records if r.get("tokens") is not None]
    return {
        "instances": n,
        "feasible": feasible,
        "feasible_share": rounded(feasible / n) if n else None,
        "feasible_ci_low": rounded(low) if n else None,
        "feasible_ci_high": rounded(high) if n else None,
        "objective_ratio_mean": rounded(statistics.fmean(ratios)) if ratios else None,
        "objective_ratio_p10": rounded(percentile(ratios, 0.10)),
        "objective_mean_of_feasible": rounded(statistics.fmean(objectives)) if objectives else None,
        "verified_infeasible": sum(
            r.get("status") == "VERIFIED" and r.get("feasible") is False for r in records + unsolvable
        ),  # fmt: skip
        "unsolvable": len(unsolvable),
        "unsolvable_unverified": sum(r.get("status") == "UNVERIFIED" for r in unsolvable)
        if any(r.get("status") for r in unsolvable)
        else None,  # a row without a model has no status
        "statuses": dict(sorted(Counter(r.get("status") or "none" for r in records).items())),
        "errors": sum(bool(r.get("error")) for r in records),
        "latency_p50_s": rounded(percentile(latencies, 0.50), 3),
        "latency_p95_s": rounded(percentile(latencies, 0.95), 3),
        "tokens_mean": rounded(statistics.fmean(tokens), 1) if tokens else None,
    }


def by_rule_kind(records: list[dict]) -> dict:
    """Per rule kind of the varied split: the solvable instances that state it, and the share of them each row that
    ran answered with a feasible plan."""
    kinds = sorted({kind for r in records for kind in r.get("rule_kinds", ())})
    result = {}
    for kind in kinds:
        stating = [r for r in records if kind in r.get("rule_kinds", ()) and r.get("solvable") is not False]
        shares = {}
        for row in ROWS:
            judged_records = [r for r in stating if r["row"] == row and r.get("feasible") is not None]
            if judged_records:
                shares[row] = rounded(sum(bool(r["feasible"]) for r in judged_records) / len(judged_records))
        result[kind] = {"instances": len({r["id"] for r in stating}), "feasible_share": shares}
    return result


def first_rule_broken(record: dict) -> str:
    """The rule an infeasible answer broke first, as the judge names it: a rule of the request by its kind (its CEL
    ids are `<kind>_<n>`), the pack's own rule id, `output schema`, or `no plan` (no JSON, no answer)."""
    head = (record.get("check") or "").split(":")[0]
    return "no plan" if head.startswith(("no JSON", "no answer")) else re.sub(r"_\d+$", "", head)


def misses_by_rule(records: list[dict]) -> dict:
    """Per row, the solvable instances it answered infeasibly, counted by the rule each answer broke first: which
    rule kind a missed target failed on."""
    result = {}
    solvable_missed = [r for r in records if r.get("solvable") is not False and r.get("feasible") is False]
    for row in ROWS:
        if missed := [r for r in solvable_missed if r["row"] == row]:
            result[row] = dict(Counter(first_rule_broken(r) for r in missed).most_common())
    return result


def add_latency_ratios(rows: dict[str, dict], baseline: str = "single:program") -> None:
    """Each model row's median latency over one decision program's (`latency_p50_vs_single_program`): what a
    user pays for deliberating, on the same instances."""
    base = rows.get(baseline, {}).get("latency_p50_s")
    for row in rows.values():
        p50 = row.get("latency_p50_s")
        row["latency_p50_vs_single_program"] = rounded(p50 / base, 3) if base and p50 and row["tokens_mean"] else None


def rounded(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def summary(records: list[dict], split: str = "scored") -> dict:
    chosen = latest(records, split)
    result: dict = {}
    for case in bi.CASES:
        of_case = [r for (c, _, _), r in chosen.items() if c == case]
        if not of_case:
            continue
        rows = {row: row_summary([r for r in of_case if r["row"] == row]) for row in ROWS}
        add_latency_ratios(rows)
        result[case] = {"instances": len({r["id"] for r in of_case}), "objective": OBJECTIVE_NAMES[case],
                        "rows": rows}  # fmt: skip
        if kinds := by_rule_kind(of_case):
            result[case]["rule_kinds"] = kinds
            result[case]["misses_by_first_rule"] = misses_by_rule(of_case)
    settings = [r["settings"] for r in records if "settings" in r]
    result["split"] = split
    result["commands"] = list(dict.fromkeys(r["command"] for r in records if r.get("command")))
    result["model"] = model_name(settings[-1]["model"]) if settings else None
    result["engine"] = settings[-1]["engine"] if settings else None
    result["settings"] = settings[-1] if settings else None
    return result


def markdown(result: dict) -> str:
    varied = (result.get("settings") or {}).get("instances") == "varied"
    bound = (
        "the evaluation's own optimum of the request's rules (`varied_references`; for an ad request with a CTR "
        "floor, the least cost over the plan's cost), 0 for an infeasible answer; instances no plan solves are "
        "counted apart, below"
        if varied
        else "the exact optimum, 0 for an infeasible answer (ads only: credit and promotion have no bound)"
    )
    lines = [
        f"Business cases ({'the varied split, ' if varied else ''}{result['split']} instances), engine "
        f"`{result['engine']}`, model `{result['model']}`. Feasible: every constraint of the request holds, checked "
        f"by the evaluation (schema, CEL, the rule pack in process); 95 % Wilson interval. Objective ratio: the "
        f"plan's objective over {bound}.",
        "",
        "| case | row | n | feasible (95 % CI) | VERIFIED but infeasible | objective ratio mean / p10 "
        "| mean objective of feasible | latency p50 / p95 | tokens | errors |",
        "|---|---|---:|---|---:|---|---:|---|---:|---:|",
    ]
    for case in bi.CASES:
        if case not in result:
            continue
        for row, x in result[case]["rows"].items():
            if not x["instances"]:
                lines.append(f"| {case} | `{row}` | 0 | — | — | — | — | — | — | {x['errors']} |")
                continue
            low, high = 100 * x["feasible_ci_low"], 100 * x["feasible_ci_high"]
            feasible = f"{100 * x['feasible_share']:.1f} % ({low:.1f}–{high:.1f} %)"
            ratio = "—"
            if x["objective_ratio_mean"] is not None:
                ratio = f"{x['objective_ratio_mean']:.3f} / {x['objective_ratio_p10']:.3f}"
            objective = "—" if x["objective_mean_of_feasible"] is None else f"{x['objective_mean_of_feasible']:.4g}"
            tokens = "—" if x["tokens_mean"] is None else f"{x['tokens_mean']:.0f}"
            lines.append(
                f"| {case} | `{row}` | {x['instances']} | {feasible} | {x['verified_infeasible']} | {ratio} "
                f"| {objective} | {x['latency_p50_s']} s / {x['latency_p95_s']} s | {tokens} | {x['errors']} |"
            )
    lines += latency_ratio_lines(result) + unsolvable_lines(result) + rule_kind_lines(result) + miss_lines(result)
    lines += ["", "Objectives: " + "; ".join(f"{c}: {OBJECTIVE_NAMES[c]}" for c in bi.CASES if c in result) + "."]
    lines += ["", *(f"`{command}`" for command in result["commands"])]
    return "\n".join(lines) + "\n"


def latency_ratio_lines(result: dict) -> list[str]:
    """The deliberating rows' median latency over one decision program's, per case."""
    said = [
        f"{case} `{row}` {x['latency_p50_vs_single_program']}×"
        for case in bi.CASES
        for row, x in result.get(case, {}).get("rows", {}).items()
        if row in ("pipeline", "cascade") and x.get("latency_p50_vs_single_program")
    ]
    return ["", "Median latency over `single:program`'s: " + "; ".join(said) + "."] if said else []


def unsolvable_lines(result: dict) -> list[str]:
    """The varied split's instances no plan solves: each row's answers there, and how many ended UNVERIFIED."""
    lines = []
    for case in bi.CASES:
        for row, x in result.get(case, {}).get("rows", {}).items():
            if x.get("unsolvable"):
                unverified = "—" if x["unsolvable_unverified"] is None else x["unsolvable_unverified"]
                lines.append(f"| {case} | `{row}` | {x['unsolvable']} | {unverified} |")
    if not lines:
        return []
    header = ["", "Instances no plan solves (the rules contradict each other): every answer must end UNVERIFIED.", "",
              "| case | row | instances | UNVERIFIED |", "|---|---|---:|---:|"]  # fmt: skip
    return header + lines


def rule_kind_lines(result: dict) -> list[str]:
    """Per rule kind of the varied split, each row's feasible share on the solvable instances that state it."""
    lines = []
    for case in bi.CASES:
        for kind, x in result.get(case, {}).get("rule_kinds", {}).items():
            shares = " | ".join("—" if row not in x["feasible_share"] else f"{100 * x['feasible_share'][row]:.0f} %"
                                for row in ROWS)  # fmt: skip
            lines.append(f"| {case} | {kind} | {x['instances']} | {shares} |")
    if not lines:
        return []
    columns = " | ".join(f"`{row}`" for row in ROWS)
    header = f"| case | rule kind | instances | {columns} |"
    return ["", "Feasible share per rule kind (solvable instances stating it):", "", header,
            "|---|---|---:|" + "---:|" * len(ROWS), *lines]  # fmt: skip


def miss_lines(result: dict) -> list[str]:
    """Per row of the varied split, its infeasible answers on solvable instances by the rule each broke first."""
    lines = [
        f"| {case} | `{row}` | {sum(counts.values())} | "
        + ", ".join(f"{rule} {count}" for rule, count in counts.items())
        + " |"
        for case in bi.CASES
        for row, counts in result.get(case, {}).get("misses_by_first_rule", {}).items()
    ]
    if not lines:
        return []
    return ["", "Infeasible answers on solvable instances, by the rule each broke first (the judge's first failed "
            "check; a request's own rules by kind, else the pack's rule or the output schema):", "",
            "| case | row | infeasible | first rule broken |", "|---|---|---:|---|", *lines]  # fmt: skip


FEASIBLE_COLOUR, RATIO_COLOUR = "tab:green", "tab:blue"


def plot(result: dict, path: Path) -> bool:
    """Per case, each row's feasible share with its Wilson interval beside its mean objective ratio."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError:
        return False
    cases = [case for case in bi.CASES if case in result]
    if not cases:
        return False
    figure, axes = plt.subplots(1, len(cases), figsize=(4.5 * len(cases), 4.5), sharey=True, squeeze=False)
    width = 0.38
    for axis, case in zip(axes[0], cases, strict=True):
        rows = result[case]["rows"]
        for k, x in enumerate(rows.values()):
            if x["feasible_share"] is not None:
                share = x["feasible_share"]
                error = [[share - x["feasible_ci_low"]], [x["feasible_ci_high"] - share]]
                axis.bar(k - width / 2, share, width, yerr=error, capsize=3, color=FEASIBLE_COLOUR)
            if x["objective_ratio_mean"] is not None:
                axis.bar(k + width / 2, x["objective_ratio_mean"], width, color=RATIO_COLOUR, hatch="//")
        axis.set_xticks(range(len(rows)), list(rows), rotation=20, fontsize=8)
        axis.set_title(f"{case} ({result[case]['instances']} instances)", fontsize=10)
        axis.set_ylim(0, 1.05)
        axis.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("share; 95 % Wilson interval")
    legend = [Patch(color=FEASIBLE_COLOUR, label="feasible share"),
              Patch(facecolor=RATIO_COLOUR, hatch="//", label="objective ratio (mean)")]  # fmt: skip
    axes[0][0].legend(handles=legend, fontsize=8, loc="upper left")
    figure.suptitle(f"Business cases — {result['engine']}, {result['model']}".replace("$", ""), fontsize=10)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return True


def write_summaries(paths: Paths, split: str) -> dict:
    result = summary(read_runs(paths.runs), split)
    paths.json.parent.mkdir(parents=True, exist_ok=True)
    write_json(paths.json, result)
    paths.markdown.write_text(markdown(result))
    plot(result, paths.png)
    return result
