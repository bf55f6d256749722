"""From the raw runs of `deliberate eval` to the committed results: every configuration's answers derived per
problem, then accuracy with a Wilson interval, the paired bootstrap difference to the single pass, latency
percentiles, tokens and memory — written as JSON, a Markdown table and a PNG plot. Pure apart from writing
the three files; what each configuration means is in docs/eval.md.
"""

from __future__ import annotations

import json
import statistics
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from deliberate.selection import COMPUTATION_EVIDENCE, POLICIES, same_answer
from deliberate.selection.learned import shipped
from deliberate_bench.eval_stats import paired_bootstrap, percentile, wilson
from deliberate_bench.replay import (
    ABLATIONS,
    FOLDS,
    cross_validated,
    drafts_chooser,
    first_drafts,
    first_of_kinds,
    identity_effect,
    learned_ablation,
    live_check,
    mix_suffix,
    mixes,
    recorded_shares,
    recorded_weights,
    replay,
)

# What DELIBERATE_MODEL=embedded named when the runs were made (deliberate.engines.models.DEFAULT_EMBEDDED).
EMBEDDED_MODEL = "qwen2.5-coder-0.5b"


def model_name(model: str | None) -> str | None:
    """The model as results should name it: `embedded` spelled out, since its meaning can change."""
    return f"{EMBEDDED_MODEL} (embedded)" if model == "embedded" else model


STAGES = ("draft", "verify", "select", "refine", "total")
ABLATION_NAMES = list(ABLATIONS)
# Which service processes each kind of configuration runs on (for its memory figure).
SERVICES_USED = {
    "single": ("drafter",),
    "majority": ("drafter",),
    "best_of": ("drafter", "verifier"),
    "weighted": ("drafter", "verifier"),
    "pass": ("drafter", "verifier"),
    "learned": ("drafter", "verifier"),
    "learned_cv": ("drafter", "verifier"),
    "select": ("drafter", "verifier"),
    "pipeline": ("drafter", "verifier", "refiner", "scheduler"),
}
BOOTSTRAP_SEED = 2026
BOOTSTRAP_RESAMPLES = 10_000


@dataclass(frozen=True)
class Paths:
    directory: Path
    name: str

    @property
    def runs(self) -> Path:
        return self.directory / f"{self.name}.runs.jsonl"

    @property
    def json(self) -> Path:
        return self.directory / f"{self.name}.json"

    @property
    def markdown(self) -> Path:
        return self.directory / f"{self.name}.md"

    @property
    def png(self) -> Path:
        return self.directory / f"{self.name}.png"


@dataclass
class Outcome:
    """One configuration's result on one problem."""

    answer: str | None
    correct: bool
    latency_s: float | None
    tokens: int
    status: str | None = None  # pipeline: VERIFIED, UNVERIFIED, …
    failure: str | None = None  # for wrong answers: no_answer, cut_off, flagged, unflagged, wrong


def wrong_because(answer: str | None, cut: bool, status: str | None = None) -> str:
    if answer is None:
        return "no_answer"
    if cut:
        return "cut_off"
    if status is None:
        return "wrong"
    return {"VERIFIED": "unflagged", "COMPUTATION_CHECKED": "computation_checked", "UNCHECKED": "unchecked"}.get(
        status, "flagged"
    )


def outcomes(record: dict, sizes: list[int]) -> dict[str, Outcome]:
    """Every configuration's outcome on one GSM8K problem: the live single pass and pipeline, and every
    selection configuration replayed on the recorded drafts (`replay.py`): each registered policy @n, and the
    seed's ablation ranked with the answer shares the Scheduler reported at the time."""
    gold = record["gold"]
    found: dict[str, Outcome] = {}

    def add(name, answer, latency, tokens, status=None, cut=False):
        found[name] = outcome_of(answer, gold, latency, tokens, status, cut)

    single = record["single"]
    add(
        "single",
        single.get("answer"),
        single.get("latency_s"),
        single.get("completion_tokens", 0),
        cut=single.get("finish_reason") == "LENGTH",
    )
    solve = record["solve"]
    largest = max(sizes)
    for n in sorted(sizes):
        drafts = first_drafts(solve, n)
        tokens = sum(d["completion_tokens"] for d in drafts)
        verified_s = max((d["generation_latency_s"] + d["verify_latency_s"] for d in drafts), default=None)
        found.update(policy_outcomes(drafts, f"@{n}", gold))
        kinds = sorted({d.get("kind") or "prose" for d in drafts})
        if len(kinds) > 1:  # a mixed round: each kind alone too, on the same drafts
            for kind in kinds:
                alone = [d for d in drafts if (d.get("kind") or "prose") == kind]
                found.update(policy_outcomes(alone, f"@{len(alone)}:{kind}", gold))
        if n == largest:
            for prose, programs in mixes(solve):  # every split of 5 drafts into kinds the round can serve
                mixed = first_of_kinds(solve, prose, programs)
                found.update(policy_outcomes(mixed, mix_suffix(prose, programs), gold))
            program = record.get("single_program") or next((d for d in drafts if d.get("kind") == "program"), None)
            if program is not None:  # one greedy program alone (older runs: the first sampled one), beside the prose
                latency = program.get("latency_s", program.get("generation_latency_s"))
                add("single:program", program.get("answer"), latency, program.get("completion_tokens", 0),
                    cut=program.get("finish_reason") == "LENGTH")  # fmt: skip
            budget = solve.get("refine_token_budget", 0)
            cut = budget > 0 and solve.get("refine_tokens", 0) >= budget
            add(
                f"pipeline@{n}",
                solve.get("answer"),
                solve.get("latency_s"),
                solve.get("completion_tokens", 0),
                status=solve.get("status", "FAILED"),
                cut=cut,
            )
            if drafts:
                weights, shares = recorded_weights(drafts), recorded_shares(drafts)
                for name, terms in ABLATIONS.items():
                    subset = {signal: w for signal, w in weights.items() if signal in terms}
                    best = replay(drafts, "weighted", weights=subset, overrides=shares).selected[0]
                    add(name, best.answer or None, verified_s, tokens)
        else:
            subset = record.get("subsets", {}).get(str(n))
            if subset is not None:
                add(
                    f"pipeline@{n}",
                    subset.get("answer"),
                    subset.get("latency_s"),
                    subset.get("completion_tokens", 0),
                    status=subset.get("status", "FAILED"),
                    cut=subset.get("finish_reason") == "LENGTH",
                )
    return found


def policy_outcomes(drafts: list[dict], suffix: str, gold: str) -> dict[str, Outcome]:
    """Each registered policy's pick among `drafts` (rows `<policy><suffix>`), and `pass<suffix>`: whether any of
    them is right — an oracle, what a perfect selector could reach."""
    found = {}
    tokens = sum(d["completion_tokens"] for d in drafts)
    draft_s = max((d["generation_latency_s"] for d in drafts), default=None)
    verified_s = max((d["generation_latency_s"] + d["verify_latency_s"] for d in drafts), default=None)
    for policy in POLICIES:
        if not drafts:
            found[f"{policy}{suffix}"] = outcome_of(None, gold, None, 0)
            continue
        selection = replay(drafts, policy)
        best = selection.selected[0]
        if POLICIES[policy].competitors == "answered":  # a plain vote: no verification to wait for
            found[f"{policy}{suffix}"] = outcome_of(best.answer or None, gold, draft_s, tokens)
        else:
            cut = best.finish_reason == "LENGTH"
            status = selection.status.upper()  # what the Scheduler would answer with: VERIFIED, …
            found[f"{policy}{suffix}"] = outcome_of(best.answer or None, gold, verified_s, tokens, status, cut)
    right = next((d["answer"] for d in drafts if same_answer(d["answer"], gold)), None)
    found[f"pass{suffix}"] = outcome_of(right, gold, verified_s, tokens)
    return found


def outcome_of(answer, gold: str, latency, tokens: int, status=None, cut=False) -> Outcome:
    correct = same_answer(answer, gold)
    return Outcome(answer, correct, latency, tokens, status, None if correct else wrong_because(answer, cut, status))


def kind_of(name: str) -> str:
    return name.split("@")[0].split(":")[0]


def order_key(name: str) -> tuple:
    kinds = ["single", "majority", "best_of", "weighted", "learned", "learned_cv", "pipeline", "pass", "select"]
    n, _, draft_kind = name.split("@")[1].partition(":") if "@" in name else ("0", "", "")
    ablation = ABLATION_NAMES.index(name) if name in ABLATION_NAMES else -1
    return (kinds.index(kind_of(name)), draft_kind, int(n), ablation)


def peak_memory(records: list[dict]) -> dict[str, float] | None:
    """The highest VmHWM seen per service over all records; None when no record has one."""
    peaks: dict[str, float] = {}
    for record in records:
        for service, mb in (record.get("rss_mb") or {}).items():
            peaks[service] = max(peaks.get(service, 0.0), mb)
    return peaks or None


def rounded(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def config_summary(
    name: str, per_problem: list[Outcome], single: list[Outcome], memory: dict | None, largest: int
) -> dict:
    n_problems = len(per_problem)
    correct = sum(o.correct for o in per_problem)
    low, high = wilson(correct, n_problems)
    latencies = [o.latency_s for o in per_problem if o.latency_s is not None]
    entry = {
        "name": name,
        "n": 1 if kind_of(name) == "single" else int(name.split("@")[1].split(":")[0]) if "@" in name else largest,
        "problems": n_problems,
        "correct": correct,
        "accuracy": rounded(correct / n_problems if n_problems else None),
        "ci_low": rounded(low),
        "ci_high": rounded(high),
        "diff_vs_single": None,
        "diff_ci_low": None,
        "diff_ci_high": None,
        "latency_mean_s": rounded(statistics.fmean(latencies) if latencies else None, 3),
        "latency_p50_s": rounded(percentile(latencies, 0.50), 3),
        "latency_p95_s": rounded(percentile(latencies, 0.95), 3),
        "latency_p99_s": rounded(percentile(latencies, 0.99), 3),
        "tokens_per_problem": rounded(statistics.fmean(o.tokens for o in per_problem) if per_problem else None, 1),
        "peak_rss_mb": rounded(sum(memory.get(s, 0.0) for s in SERVICES_USED[kind_of(name)]), 1) if memory else None,
    }
    if name != "single" and len(single) == n_problems and n_problems:
        diff, d_low, d_high = paired_bootstrap(
            [o.correct for o in per_problem],
            [o.correct for o in single],
            seed=BOOTSTRAP_SEED,
            resamples=BOOTSTRAP_RESAMPLES,
        )
        entry |= {"diff_vs_single": rounded(diff), "diff_ci_low": rounded(d_low), "diff_ci_high": rounded(d_high)}
    wrong = [o for o in per_problem if not o.correct]
    entry["failures"] = dict(sorted(Counter(o.failure for o in wrong).items()))
    if kind_of(name) == "pipeline":
        verified = [o for o in per_problem if o.status == "VERIFIED"]
        rest = [o for o in per_problem if o.status != "VERIFIED"]
        entry["verified"] = len(verified)
        entry["verified_precision"] = rounded(sum(o.correct for o in verified) / len(verified) if verified else None)
        entry["unverified_accuracy"] = rounded(sum(o.correct for o in rest) / len(rest) if rest else None)
        entry["statuses"] = dict(sorted(Counter(o.status for o in per_problem).items()))
    return entry


def per_configuration(records: list[dict], sizes: list[int], learned: dict) -> dict[str, list[Outcome]]:
    """Every configuration's outcomes, one per problem (a configuration some problems lack has fewer)."""
    per_config: dict[str, list[Outcome]] = {}
    for record in records:
        for name, outcome in outcomes(record, sizes).items():
            per_config.setdefault(name, []).append(outcome)
    for suffix, (choose, (best, _)) in learned.items():
        per_config[f"learned_cv{suffix}"] = learned_outcomes(records, choose, best)
    return per_config


def summarize_gsm8k(records: list[dict], sizes: list[int], memory: dict | None, learned: dict) -> list[dict]:
    per_config = per_configuration(records, sizes, learned)
    single = per_config.get("single", [])
    configs = []
    for name in sorted(per_config, key=order_key):
        # A configuration missing on some problems (a pipeline@n skipped in an earlier run) is not paired.
        paired = single if len(per_config[name]) == len(records) else []
        configs.append(config_summary(name, per_config[name], paired, memory, max(sizes)))
    return configs


def learned_outcomes(records: list[dict], choose, best: list) -> list[Outcome]:
    """The weighted policy with weights learned from labelled drafts, each problem scored with weights fitted on
    the other folds' problems only: `best` is `replay.cross_validated`'s choice per record among `choose(record)`."""
    found = []
    for record, candidate in zip(records, best, strict=True):
        drafts = choose(record)
        answer = candidate.answer or None if candidate is not None else None
        correct = same_answer(answer, record["gold"])
        cut = candidate is not None and candidate.finish_reason == "LENGTH"
        latency = max((d["generation_latency_s"] + d["verify_latency_s"] for d in drafts), default=None)
        tokens = sum(d["completion_tokens"] for d in drafts)
        status = status_of(candidate)
        failure = None if correct else wrong_because(answer, cut, status)
        found.append(Outcome(answer, correct, latency, tokens, status, failure))
    return found


def status_of(best) -> str | None:
    """The status a selected candidate earns (`selection.verdict_of`'s rule, read from the candidate alone: a
    program that an agreeing prose draft vouched for carries `cross_check` itself); None without one."""
    if best is None:
        return None
    if not best.valid:
        return "UNVERIFIED"
    if not best.evidence:
        return "UNCHECKED"
    return "COMPUTATION_CHECKED" if set(best.evidence) <= COMPUTATION_EVIDENCE else "VERIFIED"


# The mix whose learned policy is ablated signal by signal (each ablation is 14 cross-validations, so one mix):
# declared before any 200-problem result was seen, not chosen by them.
ABLATION_MIX = (3, 2)


def learned_configurations(records: list[dict], sizes: list[int]) -> dict[str, tuple]:
    """Row suffix → (how its drafts are chosen, `cross_validated`'s result): each size's first n drafts, and each
    mix of 5 that every record's round can serve."""
    choosers = {f"@{n}": drafts_chooser(n) for n in sorted(sizes)}
    common = set.intersection(*(set(mixes(r["solve"])) for r in records)) if records else set()
    for prose, programs in sorted(common, reverse=True):
        choosers[mix_suffix(prose, programs)] = drafts_chooser(prose + programs, (prose, programs))
    return {suffix: (choose, cross_validated(records, choose, same_answer)) for suffix, choose in choosers.items()}


def learned_ablation_of(records: list[dict]) -> dict | None:
    """`replay.learned_ablation` on ABLATION_MIX, when every record's round can serve it."""
    if not records or not all(ABLATION_MIX in mixes(r["solve"]) for r in records):
        return None
    prose, programs = ABLATION_MIX
    found = learned_ablation(records, drafts_chooser(prose + programs, ABLATION_MIX), same_answer)
    return {"drafts": mix_suffix(prose, programs), "problems": len(records), "right": found}


def summarize_ads(records: list[dict], memory: dict | None) -> dict | None:
    if not records:
        return None
    configs = []
    for name, part in (("single", "single"), (f"pipeline@{records[0]['settings']['sizes'][-1]}", "solve")):
        results = [r[part] for r in records]
        satisfied = sum(bool(x.get("satisfied")) for x in results)
        low, high = wilson(satisfied, len(results))
        latencies = [x["latency_s"] for x in results if x.get("latency_s") is not None]
        entry = {
            "name": name,
            "instances": len(results),
            "satisfied": satisfied,
            "satisfied_share": rounded(satisfied / len(results)),
            "ci_low": rounded(low),
            "ci_high": rounded(high),
            "latency_p50_s": rounded(percentile(latencies, 0.5), 3),
            "latency_p95_s": rounded(percentile(latencies, 0.95), 3),
            "tokens_per_problem": rounded(statistics.fmean(x.get("completion_tokens", 0) for x in results), 1),
            "peak_rss_mb": rounded(sum(memory.get(s, 0.0) for s in SERVICES_USED[kind_of(name)]), 1)
            if memory
            else None,
        }
        if part == "solve":
            verified = [x for x in results if x.get("status") == "VERIFIED"]
            entry["verified"] = len(verified)
            entry["verified_satisfied"] = sum(bool(x.get("satisfied")) for x in verified)
        configs.append(entry)
    return {"instances": len(records), "catalog_seeds": [r["catalog_seed"] for r in records], "configs": configs}


def draft_analysis(records: list[dict], n: int) -> dict | None:
    """Why the configurations land where they do: how often each first-round draft (one strategy hint per
    position, as the Drafter assigns them) is right, cut off, checked; and how often at least one of the n
    drafts is right (what a perfect selector could reach) against how often the pipeline is."""
    from deliberate.drafter.prompts import strategies_for

    if not records:
        return None
    positions = []
    for index, strategy in enumerate(strategies_for(n, [])):
        drafts_gold = [(d, r["gold"]) for r in records for d in first_drafts(r["solve"], n) if d["index"] == index]
        if not drafts_gold:
            continue
        drafts = [d for d, _ in drafts_gold]
        positions.append(
            {
                "index": index,
                "strategy": strategy,
                "drafts": len(drafts),
                "correct_share": rounded(sum(same_answer(d["answer"], g) for d, g in drafts_gold) / len(drafts)),
                "cut_off_share": rounded(sum(d["finish_reason"] == "LENGTH" for d in drafts) / len(drafts)),
                "valid_share": rounded(sum(d["valid"] for d in drafts) / len(drafts)),
                "checked_share": rounded(sum(bool(d.get("evidence")) for d in drafts) / len(drafts)),
                "mean_tokens": rounded(statistics.fmean(d["completion_tokens"] for d in drafts), 1),
            }
        )
    any_right = sum(any(same_answer(d["answer"], r["gold"]) for d in first_drafts(r["solve"], n)) for r in records)
    checked_right = sum(
        any(same_answer(d["answer"], r["gold"]) and d.get("evidence") for d in first_drafts(r["solve"], n))
        for r in records
    )
    return {
        "n": n,
        "by_position": positions,
        "any_draft_right_share": rounded(any_right / len(records)),
        "any_checked_draft_right_share": rounded(checked_right / len(records)),
    }


def early_stop_comparison(records: list[dict]) -> dict | None:
    """The pipeline with early stopping (streaming verification, abort, quorum) against without, on the records
    solved both ways (`--early-stop both`): ratios of the summed latency and completion tokens (with ÷ without),
    and the accuracy (GSM8K) or constraint-satisfied share (ad selection) of each side."""
    paired = [r for r in records if "solve_without_early_stop" in r]
    if not paired:
        return None

    def good(record: dict, side: str) -> bool:
        part = record[side]
        if record["task"] == "ads":
            return bool(part.get("satisfied"))
        return same_answer(part.get("answer"), record["gold"])

    def side_figures(side: str) -> dict:
        parts = [r[side] for r in paired]
        by_task = {task: [good(r, side) for r in paired if r["task"] == task] for task in ("gsm8k", "ads")}
        return {
            "latency_s": round(sum(x.get("latency_s", 0.0) for x in parts), 1),
            "completion_tokens": sum(x.get("completion_tokens", 0) for x in parts),
            "gsm8k_correct": sum(by_task["gsm8k"]),
            "ads_satisfied": sum(by_task["ads"]),
            "verified": sum(x.get("status") == "VERIFIED" for x in parts),
            "errors": sum(1 for x in parts if x.get("error")),
        }

    with_, without = side_figures("solve"), side_figures("solve_without_early_stop")
    done = [r["solve"].get("early_stop", {}) for r in paired]
    n_gsm8k = sum(r["task"] == "gsm8k" for r in paired)
    n_ads = len(paired) - n_gsm8k
    return {
        "n": len(paired),
        "n_gsm8k": n_gsm8k,
        "n_ads": n_ads,
        "latency_ratio": rounded(with_["latency_s"] / without["latency_s"] if without["latency_s"] else None, 3),
        "token_ratio": rounded(
            with_["completion_tokens"] / without["completion_tokens"] if without["completion_tokens"] else None, 3
        ),
        "accuracy_with": rounded(with_["gsm8k_correct"] / n_gsm8k if n_gsm8k else None),
        "accuracy_without": rounded(without["gsm8k_correct"] / n_gsm8k if n_gsm8k else None),
        "valid_rate_with": rounded(with_["ads_satisfied"] / n_ads if n_ads else None),
        "valid_rate_without": rounded(without["ads_satisfied"] / n_ads if n_ads else None),
        "with": with_,
        "without": without,
        "aborted": sum(e.get("aborted", 0) for e in done),
        "cancelled": sum(e.get("cancelled", 0) for e in done),
        "quorum_reached": sum(bool(e.get("reached")) for e in done),
    }


def summary(records: list[dict]) -> dict:
    gsm8k = [r for r in records if r.get("task") == "gsm8k"]
    ads = [r for r in records if r.get("task") == "ads"]
    settings = (records[0].get("settings") if records else None) or {}
    sizes = settings.get("sizes") or [5]
    memory = peak_memory(records)
    learned = learned_configurations(gsm8k, sizes)
    return {
        "problems": len(gsm8k),
        "model": model_name(settings.get("model")),
        "engine": settings.get("engine"),
        "seed": settings.get("seed"),
        "sizes": sizes,
        "settings": settings,
        "errors": sum(1 for r in gsm8k if "error" in r["single"] or "error" in r["solve"]),
        "peak_rss_mb_by_service": memory,
        "configs": summarize_gsm8k(gsm8k, sizes, memory, learned),
        "drafts": draft_analysis(gsm8k, max(sizes)),
        "ad_selection": summarize_ads(ads, memory),
        "early_stop": early_stop_comparison(records),
        "replay": {
            "live_check": live_check(gsm8k),
            "identity_effect": identity_effect(gsm8k, max(sizes), same_answer),
            "learned_weights": {suffix: fitted for suffix, (_, (_, fitted)) in learned.items()} if gsm8k else {},
            "learned_ablation": learned_ablation_of(gsm8k),
        },
        "bootstrap": {"seed": BOOTSTRAP_SEED, "resamples": BOOTSTRAP_RESAMPLES},
        "summarized_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


# --------------------------------------------------------------------------------------------------
# Presentation
# --------------------------------------------------------------------------------------------------


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
        f"Scheduler runs (`deliberate eval --replay`). The live policy, replayed on all recorded drafts, selects "
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


def read_runs(path: Path) -> list[dict]:
    """Every complete record; a last line cut short by an interrupted write is ignored."""
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records


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


def write_all(paths: Paths, quiet: bool = False) -> dict:
    result = summary(read_runs(paths.runs))
    paths.json.parent.mkdir(parents=True, exist_ok=True)
    paths.json.write_text(json.dumps(result, indent=2) + "\n")
    paths.markdown.write_text(markdown(result))
    if not plot(result, paths.png) and not quiet:
        print("note: matplotlib is not installed; no plot (pip install matplotlib)")
    return result


class Tally:
    """Running accuracy for the progress bar."""

    def __init__(self, records: list[dict]):
        self.records = [r for r in records if r.get("task") == "gsm8k"]
        self.ads = [r for r in records if r.get("task") == "ads"]

    def add(self, record: dict) -> None:
        (self.records if record.get("task") == "gsm8k" else self.ads).append(record)

    def note(self) -> str:
        if not self.records:
            return ""
        sizes = self.records[0]["settings"]["sizes"]
        n = len(self.records)
        right = Counter()
        for record in self.records:
            found = outcomes(record, sizes)
            for name in ("single", f"majority@{max(sizes)}", f"pipeline@{max(sizes)}"):
                right[name] += found[name].correct if name in found else 0
        text = " ".join(f"{name} {right[name]}/{n}" for name in right)
        if self.ads:
            text += f" ads {sum(bool(r['solve'].get('satisfied')) for r in self.ads)}/{len(self.ads)}"
        return text
