"""From the raw runs of `deliberate bench eval` to the committed results: every configuration's answers derived per
problem, then accuracy with a Wilson interval, the paired bootstrap difference to the single pass, latency
percentiles, tokens and memory — written as JSON, a Markdown table and a PNG plot. Pure apart from writing
the three files; what each configuration means is in docs/eval.md.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from deliberate.selection import COMPUTATION_EVIDENCE, same_answer
from deliberate_bench.eval.outcomes import (
    SERVICES_USED,
    Outcome,
    kind_of,
    model_name,
    named_after_stop,
    order_key,
    outcomes,
    peak_memory,
    rounded,
    stopped_drafts,
    wrong_because,
)
from deliberate_bench.eval.replay import (
    cross_validated,
    drafts_chooser,
    first_drafts,
    identity_effect,
    learned_ablation,
    live_check,
    mix_suffix,
    mixes,
)
from deliberate_bench.eval.report import markdown, plot
from deliberate_bench.eval.stats import paired_bootstrap, percentile, wilson
from deliberate_bench.results import read_runs, write_json
from deliberate_bench.studies import LAB_FILES, LabFiles

BOOTSTRAP_SEED = 2026


BOOTSTRAP_RESAMPLES = 10_000


def add_file_arguments(parser: argparse.ArgumentParser) -> None:
    """Where a resumable evaluation keeps its runs and summaries (`Paths`), and `--fresh`."""
    parser.add_argument("--results-dir", type=Path, default=LAB_FILES, help="the summaries (default: their study's)")
    parser.add_argument("--runs-dir", type=Path, help="the recorded runs (default: beside the summaries)")
    parser.add_argument("--fresh", action="store_true", help="discard the runs file and start over")


@dataclass(frozen=True)
class Paths:
    """A run's files: its recorded runs in `runs_directory`, the summaries read from them in `directory`; both in
    `directory` unless told (by default `LAB_FILES`: the folder of the study that declares them)."""

    directory: Path | LabFiles
    name: str
    runs_directory: Path | LabFiles | None = None

    @property
    def runs(self) -> Path:
        return (self.runs_directory or self.directory) / f"{self.name}.runs.jsonl"

    @property
    def json(self) -> Path:
        return self.directory / f"{self.name}.json"

    @property
    def markdown(self) -> Path:
        return self.directory / f"{self.name}.md"

    @property
    def png(self) -> Path:
        return self.directory / f"{self.name}.png"


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
    configs = summarize_gsm8k(gsm8k, sizes, memory, learned)
    named_after_stop(configs, gsm8k)
    return {
        "problems": len(gsm8k),
        "model": model_name(settings.get("model")),
        "engine": settings.get("engine"),
        "seed": settings.get("seed"),
        "sizes": sizes,
        "settings": settings,
        "errors": sum(1 for r in gsm8k if "error" in r["single"] or "error" in r["solve"]),
        "peak_rss_mb_by_service": memory,
        "configs": configs,
        "drafts_stopped_by_the_quorum": stopped_drafts(gsm8k),
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


def write_all(paths: Paths, quiet: bool = False) -> dict:
    result = summary(read_runs(paths.runs))
    paths.json.parent.mkdir(parents=True, exist_ok=True)
    write_json(paths.json, result)
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
