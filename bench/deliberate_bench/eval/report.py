"""An evaluation's summary as people read it: the Markdown table with its observations, and the accuracy-latency
plot (matplotlib, when installed)."""

from __future__ import annotations

from pathlib import Path

from deliberate.selection import POLICIES
from deliberate.selection.learned import shipped
from deliberate_bench.eval.outcomes import ABLATION_NAMES, kind_of
from deliberate_bench.eval.replay import (
    FOLDS,
)


def pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f} %"


def points(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:+.1f}"


def observation(config: dict, by_name: dict[str, dict]) -> str:
    name = config["name"]
    notes = []
    if name == "single":
        notes.append("one greedy draft, no verification")
    elif name == "single:program":
        notes.append("the round's first program (sampled, not greedy) alone, no verification")
    elif config["diff_vs_single"] is None:
        notes.append(f"run on {config['problems']} of the problems only: not paired with single pass")
    elif config["diff_ci_low"] is not None:
        if config["diff_ci_low"] > 0:
            notes.append("beats single pass (interval above 0)")
        elif config["diff_ci_high"] < 0:
            notes.append("worse than single pass (interval below 0)")
        else:
            notes.append("no clear difference to single pass")
    if config.get("verified_precision") is not None or config.get("unverified_accuracy") is not None:
        notes.append(
            f"VERIFIED {config['verified']}: {pct(config['verified_precision'])} right; "
            f"rest {pct(config['unverified_accuracy'])}"
        )
    if kind_of(name) == "pass":
        notes.append("an oracle, not a configuration: some draft is right")
    elif kind_of(name) == "learned":
        trained = shipped().trained_on
        runs, problems = trained.get("runs"), trained.get("problems")
        notes.append(f"weighted with the shipped learned weights (fitted on {runs}, {problems} problems)")
    elif kind_of(name) == "learned_cv":
        notes.append(f"weighted, its weights fitted on the other folds' labelled drafts ({FOLDS}-fold CV by problem)")
    elif name in ABLATION_NAMES:
        notes.append("answer shares as the Scheduler reported them")
    elif name.endswith("(after-stop)"):
        notes.append("a plain vote over the answers of the drafts the quorum let finish")
    elif kind_of(name) in POLICIES:
        description = POLICIES[kind_of(name)].description.rstrip(".")
        notes.append(description[0].lower() + description[1:])
    if name in ABLATION_NAMES[1:]:
        previous = by_name.get(ABLATION_NAMES[ABLATION_NAMES.index(name) - 1])
        if previous is not None and previous["correct"] == config["correct"]:
            notes.append("same accuracy as the row above")
    failures = config.get("failures") or {}
    if failures and (name == "single" or kind_of(name) == "pipeline"):
        notes.append("wrong: " + ", ".join(f"{k} {v}" for k, v in failures.items()))
    return "; ".join(notes)


def markdown(result: dict) -> str:
    by_name = {c["name"]: c for c in result["configs"]}
    lines = [
        f"GSM8K, {result['problems']} problems (seed {result['seed']}), engine `{result['engine']}`, "
        f"model `{result['model']}`; 95 % Wilson intervals, paired bootstrap for the difference to single pass.",
        "",
        "| configuration | drafts | mean latency | p95 latency | accuracy (95 % CI) | vs single, points (95 % CI) "
        "| tokens / problem | memory | observation |",
        "|---|---:|---:|---:|---|---|---:|---:|---|",
    ]
    for c in result["configs"]:
        ci = f"{pct(c['accuracy'])} ({pct(c['ci_low'])}–{pct(c['ci_high'])})"
        diff = (
            f"{points(c['diff_vs_single'])} ({points(c['diff_ci_low'])} to {points(c['diff_ci_high'])})"
            if c["diff_vs_single"] is not None
            else "—"
        )
        latency = "—" if c["latency_mean_s"] is None else f"{c['latency_mean_s']:.1f} s"
        p95 = "—" if c["latency_p95_s"] is None else f"{c['latency_p95_s']:.1f} s"
        memory = "—" if c["peak_rss_mb"] is None else f"{c['peak_rss_mb']:.0f} MB"
        lines.append(
            f"| `{c['name']}` | {c['n']} | {latency} | {p95} | {ci} | {diff} | {c['tokens_per_problem']} | {memory} "
            f"| {observation(c, by_name)} |"
        )
    lines += replay_markdown(result.get("replay"))
    drafts = result.get("drafts")
    if drafts:
        lines += [
            "",
            f"First-round drafts by position (each position has its own strategy hint); at least one of the "
            f"{drafts['n']} drafts is right on {pct(drafts['any_draft_right_share'])} of problems, a draft that is "
            f"right and checked on {pct(drafts['any_checked_draft_right_share'])}.",
            "",
            "| draft | strategy hint | right | cut off | valid | checked | mean tokens |",
            "|---:|---|---:|---:|---:|---:|---:|",
        ]
        for d in drafts["by_position"]:
            lines.append(
                f"| {d['index']} | {d['strategy']} | {pct(d['correct_share'])} | {pct(d['cut_off_share'])} "
                f"| {pct(d['valid_share'])} | {pct(d['checked_share'])} | {d['mean_tokens']} |"
            )
    ads = result.get("ad_selection")
    if ads:
        lines += [
            "",
            f"Ad selection, {ads['instances']} catalogs (`generate_catalog(seed)`, seeds "
            f"{ads['catalog_seeds'][0]}…{ads['catalog_seeds'][-1]}): share of final answers satisfying every "
            "constraint, checked from the catalog by the evaluation itself.",
            "",
            "| configuration | satisfied (95 % CI) | p50 latency | tokens / instance | VERIFIED (of them satisfied) |",
            "|---|---|---:|---:|---|",
        ]
        for c in ads["configs"]:
            verified = f"{c['verified']} ({c['verified_satisfied']})" if "verified" in c else "—"
            p50 = "—" if c["latency_p50_s"] is None else f"{c['latency_p50_s']:.1f} s"
            lines.append(
                f"| `{c['name']}` | {c['satisfied']}/{c['instances']} = {pct(c['satisfied_share'])} "
                f"({pct(c['ci_low'])}–{pct(c['ci_high'])}) | {p50} | {c['tokens_per_problem']} | {verified} |"
            )
    lines += early_stop_markdown(result.get("early_stop"))
    return "\n".join(lines) + "\n"


def replay_markdown(replay: dict | None) -> list[str]:
    """How far the replayed rows can be trusted, and what the one answer identity changed."""
    if not replay:
        return []
    check, effect = replay["live_check"], replay["identity_effect"]
    lines = [
        "",
        "Every row but `single` and `pipeline@N` is replayed on the recorded drafts by the selection package the "
        f"Scheduler runs (`deliberate bench eval --replay`). The live policy, replayed on all recorded drafts, selects "
        f"what the live Scheduler sent to the Refiner on {check['same_selection']} of {check['problems']} problems.",
    ]
    if effect["changed"]:
        lines.append(
            f"The one answer identity (`weighted@{effect['n']}`, shares recomputed) against the shares the Scheduler "
            f"reported (the last `select:` row) changes the chosen draft on {effect['changed']} problems: "
            f"{effect['now_right']} now right, {effect['now_wrong']} now wrong."
        )
    for suffix, folds in (replay.get("learned_weights") or {}).items():
        suffix = suffix if str(suffix).startswith("@") else f"@{suffix}"  # older summaries keyed them by n
        shown = "; ".join(", ".join(f"{name} {value:+.2f}" for name, value in fold.items()) for fold in folds)
        lines.append(f"Weights `learned_cv{suffix}` fitted, fold by fold: {shown}.")
    ablation = replay.get("learned_ablation")
    if ablation:
        right = ablation["right"]
        shown = ", ".join(f"without `{name[1:]}` {count}" for name, count in right.items() if name != "all")
        lines.append(
            f"The learned policy on {ablation['drafts']} ({ablation['problems']} problems) is right on {right['all']} "
            f"with every signal; each signal left out in turn (cross-validated again): {shown}."
        )
    return lines


def early_stop_markdown(comparison: dict | None) -> list[str]:
    if not comparison:
        return []
    w, wo = comparison["with"], comparison["without"]
    return [
        "",
        f"The pipeline both ways (`--early-stop both`), the same request solved with and without early stopping "
        f"on {comparison['n_gsm8k']} GSM8K problems and {comparison['n_ads']} ad catalogs: latency ratio "
        f"{comparison['latency_ratio']}, token ratio {comparison['token_ratio']} (with ÷ without); "
        f"{comparison['aborted']} drafts aborted, {comparison['cancelled']} cancelled, quorum reached "
        f"{comparison['quorum_reached']} times.",
        "",
        "| early stopping | GSM8K right | ads satisfied | VERIFIED | total latency | completion tokens | errors |",
        "|---|---:|---:|---:|---:|---:|---:|",
        *(
            f"| {label} | {x['gsm8k_correct']}/{comparison['n_gsm8k']} | {x['ads_satisfied']}/{comparison['n_ads']} "
            f"| {x['verified']} | {x['latency_s']:.1f} s | {x['completion_tokens']} | {x['errors']} |"
            for label, x in (("on", w), ("off", wo))
        ),
    ]


def plot(result: dict, path: Path) -> bool:
    """Accuracy against mean latency, one point per configuration with its Wilson interval. False (and no
    file) when matplotlib is not installed or there is nothing to plot."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    configs = [c for c in result["configs"] if c["latency_mean_s"] is not None and c["accuracy"] is not None]
    if not configs:
        return False
    colours = {"single": "black", "majority": "tab:blue", "best_of": "tab:orange", "pipeline": "tab:green"}
    figure, axes = plt.subplots(figsize=(9, 6))
    for c in configs:
        kind = kind_of(c["name"])
        y = 100 * c["accuracy"]
        error = [[y - 100 * c["ci_low"]], [100 * c["ci_high"] - y]]
        axes.errorbar(
            c["latency_mean_s"],
            y,
            yerr=error,
            fmt="s" if kind == "select" else "o",
            color=colours.get(kind, "tab:purple"),
            capsize=3,
            alpha=0.8,
        )
    for (x, y), names in label_groups(configs).items():
        axes.annotate("\n".join(names), (x, y), textcoords="offset points", xytext=(6, 3), fontsize=7.5)
    axes.set_xlabel("mean latency per problem (s)")
    axes.set_ylabel("accuracy (%), 95 % Wilson interval")
    axes.set_title(
        f"GSM8K, {result['problems']} problems — {result['engine']}, {result['model']}".replace("$", ""), fontsize=10
    )
    axes.grid(alpha=0.3)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return True


def label_groups(configs: list[dict]) -> dict[tuple[float, float], list[str]]:
    """Configurations at about the same spot (same accuracy, latency within 3 % of the plotted range) share
    one label, so names do not print over each other."""
    xs = [c["latency_mean_s"] for c in configs]
    close = 0.03 * ((max(xs) - min(xs)) or 1.0)
    groups: dict[tuple[float, float], list[str]] = {}
    for c in sorted(configs, key=lambda c: (c["accuracy"], c["latency_mean_s"])):
        x, y = c["latency_mean_s"], 100 * c["accuracy"]
        spot = next((k for k in groups if abs(k[1] - y) < 0.05 and abs(k[0] - x) <= close), (x, y))
        groups.setdefault(spot, []).append(c["name"])
    return groups
