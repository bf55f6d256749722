"""The evaluation's headline: a mixed-draft evaluation's recorded drafts (`make eval-200`) read as the default
request runs them — N = 5 drafts, `--program-drafts` of them programs, ranked by the default selection policy —
beside the single passes, the plain vote and the oracle, with the figures the project holds itself to.

    deliberate bench headline bench/studies/gsm8k-headline/eval-gsm8k-200.runs.jsonl   # → eval-gsm8k.*

Every `pipeline@5` row is the selection replayed on the recorded drafts (`replay.py`): the answer of the draft the
Scheduler would select and the status it would earn. The live pipeline of the recording (its own N, refinement
included) is the `pipeline@<N>:live` row.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from deliberate.scheduler.verdicts import PLAN_EVIDENCE
from deliberate.selection import DEFAULT_POLICY, POLICIES, Candidate, same_answer
from deliberate_bench.eval.outcomes import Outcome, model_name, peak_memory, rounded
from deliberate_bench.eval.replay import DEFAULT_MIX, MIX_SIZE, PROGRAM_DRAFTS, first_of_kinds, mix_suffix, replay
from deliberate_bench.eval.report import markdown, plot
from deliberate_bench.eval.stats import paired_bootstrap
from deliberate_bench.eval.summary import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    config_summary,
    learned_configurations,
    per_configuration,
)
from deliberate_bench.results import LAB_FILES, read_runs, write_json


def headline_rows(size: int = MIX_SIZE, programs: int = PROGRAM_DRAFTS) -> dict[str, str]:
    """Headline name → the replay's name for the default round of `size` drafts with `programs` programs."""
    suffix = mix_suffix(size - programs, programs)
    rows = {
        "single": "single",
        "single:program": "single:program",
        f"majority@{size}": f"majority{suffix}",
        f"pipeline@{size}": f"{DEFAULT_POLICY}{suffix}",
    }
    for policy in POLICIES:
        if policy not in (DEFAULT_POLICY, "majority"):
            rows[f"pipeline@{size}:{policy}"] = f"{policy}{suffix}"
    rows[f"pipeline@{size}:learned_cv"] = f"learned_cv{suffix}"
    rows[f"pass@{size}"] = f"pass{suffix}"
    return rows


def paired(better: list[Outcome], worse: list[Outcome]) -> dict:
    diff, low, high = paired_bootstrap(
        [o.correct for o in better], [o.correct for o in worse], seed=BOOTSTRAP_SEED, resamples=BOOTSTRAP_RESAMPLES
    )
    return {"points": rounded(100 * diff, 1), "ci_low": rounded(100 * low, 1), "ci_high": rounded(100 * high, 1)}


def targets(by_name: dict[str, dict], per: dict[str, list[Outcome]], size: int) -> list[dict]:
    """Issue [2/5]'s figures, each with the value reached and whether it is met."""
    pipeline, oracle = by_name[f"pipeline@{size}"], by_name[f"pass@{size}"]
    single_name = max(("single", "single:program"), key=lambda name: by_name[name]["accuracy"])
    single = by_name[single_name]
    vs_majority = paired(per[f"pipeline@{size}"], per[f"majority@{size}"])
    vs_single = paired(per[f"pipeline@{size}"], per[single_name])
    room = oracle["accuracy"] - single["accuracy"]
    headroom = (pipeline["accuracy"] - single["accuracy"]) / room if room > 0 else None
    precision, rest = pipeline["verified_precision"], pipeline["unverified_accuracy"]
    return [
        {
            "target": f"pipeline@{size} ≥ majority@{size} + 8 points, paired interval above 0",
            "value": vs_majority,
            "met": vs_majority["points"] >= 8 and vs_majority["ci_low"] > 0,
        },
        {
            "target": f"pipeline@{size} ≥ the better single pass ({single_name}) + 12 points, paired interval above 0",
            "value": vs_single,
            "met": vs_single["points"] >= 12 and vs_single["ci_low"] > 0,
        },
        {
            "target": f"headroom taken: (pipeline@{size} − {single_name}) ÷ (pass@{size} − {single_name}) ≥ 0.5",
            "value": rounded(headroom, 3),
            "met": headroom is not None and headroom >= 0.5,
        },
        {
            "target": "precision of VERIFIED ≥ 60 % and ≥ 2× the accuracy of the rest",
            "value": {"verified_precision": precision, "rest_accuracy": rest},
            "met": precision is not None and precision >= 0.6 and (not rest or precision >= 2 * rest),
        },
    ]


def refinement_effect(records: list[dict]) -> dict:
    """What the recording's live Refiner did to the answer of the best draft the Scheduler selected: kept it, or
    changed it — and then whether a right answer turned wrong or a wrong one right. `program_best` counts the
    changes where the best draft was a program (its answer, before with_computed_answer, was code)."""
    effect = {"problems": 0, "kept": 0, "changed": 0, "right_to_wrong": 0, "wrong_to_right": 0, "program_best": 0}
    for record in records:
        selected = [d for d in record["solve"].get("drafts", ()) if d.get("selected")]
        if not selected:
            continue
        best = max(selected, key=lambda d: (d.get("components") or {}).get("final", 0.0))
        answer = record["solve"].get("answer")
        effect["problems"] += 1
        if same_answer(best["answer"], answer):
            effect["kept"] += 1
            continue
        was_right, is_right = same_answer(best["answer"], record["gold"]), same_answer(answer, record["gold"])
        effect["changed"] += 1
        effect["right_to_wrong"] += was_right and not is_right
        effect["wrong_to_right"] += is_right and not was_right
        effect["program_best"] += best.get("kind") == "program"
    return effect


DefaultPick = tuple[dict, list[dict], Candidate]  # a record, its default round's drafts, the pick among them


def default_picks(records: list[dict]) -> list[DefaultPick]:
    """Each record whose round can serve the default mix, with those drafts and the default policy's pick."""
    picks = []
    for record in records:
        drafts = first_of_kinds(record["solve"], *DEFAULT_MIX)
        if drafts:
            picks.append((record, drafts, replay(drafts, DEFAULT_POLICY).selected[0]))
    return picks


def verified_by_evidence(picks: list[DefaultPick]) -> dict[str, dict]:
    """The default round's pick, grouped by the strongest evidence behind it — `cross_check` (a program and a prose
    draft reached the answer apart), `program` (its own program ran), any other substantive check, none — with how
    many of each are right: which evidence a `VERIFIED` that promises a right answer could rest on."""
    groups = {kind: {"problems": 0, "right": 0} for kind in ("cross_check", "program", "other", "none")}
    for record, _, best in picks:
        evidence = set(best.evidence) if best.valid else set()
        kind = next((k for k in ("cross_check", "program") if k in evidence), "other" if evidence else "none")
        groups[kind]["problems"] += 1
        groups[kind]["right"] += same_answer(best.answer, record["gold"])
    for group in groups.values():
        group["precision"] = rounded(group["right"] / group["problems"] if group["problems"] else None)
    return groups


def missed_by_selection(picks: list[DefaultPick]) -> dict:
    """The problems where some draft of the default round is right and its pick is not, by what a selector would
    have had to do to pick the right answer: follow a vote it led (`right_led`), break a tie it shared
    (`right_tied`), back a minority answer held by 2+ drafts (`right_minority`) or a lone draft (`right_alone`);
    and how many of those right drafts were valid, had a program behind them (`program` or `cross_check`
    evidence), or were programs themselves."""
    missed = {"problems": 0, "right_led": 0, "right_tied": 0, "right_minority": 0, "right_alone": 0}
    right_drafts = {"valid": 0, "program_evidence": 0, "programs": 0}
    for record, drafts, best in picks:
        right = [d for d in drafts if same_answer(d.get("answer") or "", record["gold"])]
        if not right or same_answer(best.answer, record["gold"]):
            continue
        wrong = [d["answer"] for d in drafts if d.get("answer") and not same_answer(d["answer"], record["gold"])]
        strongest_wrong = max((sum(same_answer(a, b) for b in wrong) for a in wrong), default=0)
        if len(right) == strongest_wrong:
            shape = "right_tied"
        elif len(right) > strongest_wrong:
            shape = "right_led"
        else:
            shape = "right_minority" if len(right) > 1 else "right_alone"
        missed["problems"] += 1
        missed[shape] += 1
        right_drafts["valid"] += any(d["valid"] for d in right)
        right_drafts["program_evidence"] += any(PLAN_EVIDENCE & set(d.get("evidence") or ()) for d in right)
        right_drafts["programs"] += any(d.get("kind") == "program" for d in right)
    return {**missed, "with_a_right_draft_that_is": right_drafts}


def headline(records: list[dict], source: str) -> dict:
    gsm8k = [r for r in records if r.get("task") == "gsm8k"]
    settings = gsm8k[0]["settings"]
    sizes = settings["sizes"]
    memory = peak_memory(gsm8k)
    per = per_configuration(gsm8k, sizes, learned_configurations(gsm8k, sizes))
    named = {name: per[source_name] for name, source_name in headline_rows().items() if source_name in per}
    named[f"pipeline@{max(sizes)}:live"] = per[f"pipeline@{max(sizes)}"]
    single = named["single"]
    configs = [config_summary(name, outcomes, single, memory, MIX_SIZE) for name, outcomes in named.items()]
    by_name = {c["name"]: c for c in configs}
    picks = default_picks(gsm8k)
    return {
        "problems": len(gsm8k),
        "model": model_name(settings.get("model")),
        "engine": settings.get("engine"),
        "seed": settings.get("seed"),
        "source": source,
        "default_round": {"drafts": MIX_SIZE, "programs": PROGRAM_DRAFTS, "policy": DEFAULT_POLICY},
        "configs": configs,
        "targets": targets(by_name, named, MIX_SIZE),
        "refinement": refinement_effect(gsm8k),
        "verified_by_evidence": verified_by_evidence(picks),
        "missed_by_selection": missed_by_selection(picks),
        "bootstrap": {"seed": BOOTSTRAP_SEED, "resamples": BOOTSTRAP_RESAMPLES},
        "summarized_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def headline_markdown(result: dict) -> str:
    round_, refined = result["default_round"], result["refinement"]
    groups = result["verified_by_evidence"].items()
    by_evidence = "; ".join(f"`{kind}` {g['right']}/{g['problems']}" for kind, g in groups if g["problems"])
    lines = [
        markdown(result).rstrip("\n"),
        "",
        f"The `pipeline@{round_['drafts']}` rows are the default round ({round_['drafts']} drafts, "
        f"{round_['programs']} of them programs, policy `{round_['policy']}` unless the row names another) replayed "
        f"on the drafts recorded in `{result['source']}`; `pass@{round_['drafts']}` is an oracle.",
        "",
        f"The recording's live Refiner kept the answer of the best selected draft on {refined['kept']} of "
        f"{refined['problems']} problems and changed it on {refined['changed']} ({refined['program_best']} of them "
        f"with a program as the best draft): a right answer turned wrong {refined['right_to_wrong']} times, a wrong "
        f"one right {refined['wrong_to_right']} times.",
        "",
        f"The default round's pick by the strongest evidence behind it (right ÷ problems): {by_evidence}.",
        "",
        missed_sentence(result["missed_by_selection"]),
        "",
        *targets_table(result["targets"]),
    ]
    return "\n".join(lines) + "\n"


def targets_table(targets: list[dict]) -> list[str]:
    """The figures a headline is held to, as Markdown rows: the target, the value reached, whether it is met."""
    rows = ["| target | reached | met |", "|---|---|---|"]
    for target in targets:
        rows.append(f"| {target['target']} | `{json.dumps(target['value'], ensure_ascii=False)}` | "
                    f"{'yes' if target['met'] else 'no'} |")  # fmt: skip
    return rows


def missed_sentence(missed: dict) -> str:
    drafts = missed["with_a_right_draft_that_is"]
    return (
        f"Where a draft was right and the pick was not ({missed['problems']} problems), the right answer led the vote "
        f"on {missed['right_led']}, tied for the lead on {missed['right_tied']}, was held by a minority of 2+ drafts "
        f"on {missed['right_minority']} and by a lone draft on {missed['right_alone']}; a right draft was valid on "
        f"{drafts['valid']}, had a program behind it on {drafts['program_evidence']}, and was a program on "
        f"{drafts['programs']}."
    )


def main(argv: list[str] | None = None) -> int:
    return run_headline(argv, __doc__, "a runs file of a mixed-draft evaluation (make eval-200)", "eval-gsm8k-0.5b",
                        headline, headline_markdown)  # fmt: skip


def run_headline(argv, doc: str, runs_help: str, name: str, summarize, write_markdown, draw=plot) -> int:
    """A headline command: a runs file in, `<results-dir>/<name>.{json,md,png}` out, each target printed."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("runs", type=Path, help=runs_help)
    parser.add_argument("--name", default=name, help="writes <results-dir>/<name>.{json,md,png}")
    parser.add_argument("--results-dir", type=Path, default=LAB_FILES)
    args = parser.parse_args(argv)
    records = read_runs(args.runs)
    if not any(r.get("task") == "gsm8k" for r in records):
        parser.error(f"{args.runs}: no GSM8K problems recorded")
    result = summarize(records, args.runs.name)
    args.results_dir.mkdir(parents=True, exist_ok=True)
    write_json(args.results_dir / f"{args.name}.json", result)  # each file by its own name: its study's folder
    (args.results_dir / f"{args.name}.md").write_text(write_markdown(result))
    draw(result, args.results_dir / f"{args.name}.png")
    for target in result["targets"]:
        print(f"{'met   ' if target['met'] else 'missed'}  {target['target']}: {target['value']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
