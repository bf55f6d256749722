"""What the retrained judge's verdicts (`judge_signal.py`) do to selection, replayed on eval-200's default round.

- `discrimination`: how well each signal ranks right above wrong drafts among the default round's drafts that
  passed every hard rule (the only ones a judge is asked about): the area under the ROC curve (0.5 is chance),
  the judge's beside every signal the learned policy reads;
- `verdicts`: the judge's greedy verdict (valid when P(valid) > ½, as the live Verifier reads its reply) against
  the gold label;
- `rows`: the default round ranked as today, with the judge as the live Verifier would blend it into the score
  (`judge_soft`), with the judge alone (`judge`), and with the judge as one more signal of the learned policy
  (`learned_cv+judge`, cross-validated by problem like `learned_cv`), each paired against `pipeline@5`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from deliberate.selection import DEFAULT_POLICY, same_answer, signals
from deliberate.verifier.judge import JUDGE_WEIGHT
from deliberate_bench.eval.replay import (
    DEFAULT_MIX,
    LEARNED_SIGNALS,
    MIX_SIZE,
    Overrides,
    candidates_of,
    cross_validated,
    draft_id,
    drafts_chooser,
    replay,
)
from deliberate_bench.eval.stats import paired_bootstrap, wilson
from deliberate_bench.eval.summary import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED
from deliberate_bench.results import read_runs, runs_present


def draft_key(record: Mapping, draft: Mapping) -> str:
    """A recorded draft's name across files: the problem, the round and the draft's index."""
    return f"{record['id']}/{draft['round']}:{draft['index']}"


def summarize(scored: list[dict], out: Path, folds: int) -> dict:
    """The judge's verdicts, each signal's discrimination and the replayed rows, over the problems of `scored`
    (eval-200's records) whose drafts some fold in `out` has judged."""
    by_fold = read_scores(out, folds)
    rows = [verdict for fold in by_fold for verdict in fold]
    scores = {row["key"]: row["p_valid"] for row in rows}
    judged_problems = {key.rsplit("/", 1)[0] for key in scores}
    choose = drafts_chooser(MIX_SIZE, DEFAULT_MIX)
    rounds = [(r, choose(r)) for r in scored if r["id"] in judged_problems]
    rounds = [(r, drafts) for r, drafts in rounds if drafts]
    records = [r for r, _ in rounds]

    def outcome(picks) -> list[bool]:
        return [same_answer(best.answer, r["gold"]) if best else False for r, best in zip(records, picks, strict=True)]

    default = outcome([replay(d, DEFAULT_POLICY).selected[0] for _, d in rounds])
    soft = outcome([replay(d, DEFAULT_POLICY, overrides=soft_overrides(r, d, scores)).selected[0] for r, d in rounds])
    alone = outcome(
        [replay(d, "weighted", weights={"judge": 1.0}, overrides=judge_overrides(r, d, scores)).selected[0]
         for r, d in rounds]
    )  # fmt: skip

    def overrides_of(record: Mapping) -> Overrides:
        return judge_overrides(record, choose(record), scores)

    learned, _ = cross_validated(records, choose, same_answer)
    with_judge, fitted = cross_validated(records, choose, same_answer, names=("judge", *LEARNED_SIGNALS),
                                         overrides_of=overrides_of)  # fmt: skip
    oracle = [any(same_answer(d.get("answer") or "", r["gold"]) for d in drafts) for r, drafts in rounds]
    reports = [json.loads(path.read_text()) for path in (out / f"fold{f}.json" for f in range(folds)) if path.exists()]
    seconds_per_draft = [rep["judged"]["seconds_per_draft"] for rep in reports]
    return {
        "problems": len(records),
        "folds": folds,
        "fold_reports": reports,
        "judge_seconds_per_draft": round(sum(seconds_per_draft) / len(seconds_per_draft), 3) if reports else None,
        "verdicts": verdicts(rows),
        "verdicts_by_fold": [verdicts(fold) for fold in by_fold],  # each fold's judge is calibrated apart
        "discrimination": discrimination(rounds, scores),
        "rows": [
            row("pipeline@5", default, default),
            row("pipeline@5:judge_soft", soft, default),
            row("pipeline@5:judge", alone, default),
            row("pipeline@5:learned_cv", outcome(learned), default),
            row("pipeline@5:learned_cv+judge", outcome(with_judge), default),
            row("pass@5", oracle, default),
        ],
        "learned_cv+judge_weights": fitted,
    }


def row(name: str, outcomes: list[bool], baseline: list[bool]) -> dict:
    low, high = wilson(sum(outcomes), len(outcomes))
    diff, d_low, d_high = paired_bootstrap(outcomes, baseline, seed=BOOTSTRAP_SEED, resamples=BOOTSTRAP_RESAMPLES)
    return {
        "name": name,
        "right": sum(outcomes),
        "accuracy": round(sum(outcomes) / len(outcomes), 4),
        "wilson_95": [round(low, 4), round(high, 4)],
        "vs_pipeline_points": [round(100 * diff, 1), round(100 * d_low, 1), round(100 * d_high, 1)],
    }


def discrimination(rounds: Sequence[tuple[Mapping, list[Mapping]]], scores: Mapping[str, float]) -> dict:
    """Each signal's AUC over the rounds' valid drafts (signals computed within each round, as selection does):
    pooled over every problem (`auc`), and over pairs of a right and a wrong draft of the same round only
    (`auc_within_round`) — what selection needs, since it only ever compares drafts of one round; a signal can
    tell easy problems from hard ones and still not rank a round's drafts."""
    names = ("judge", *LEARNED_SIGNALS)
    values: dict[str, list[float]] = {name: [] for name in names}
    right: list[bool] = []
    wins = dict.fromkeys(names, 0.0)
    pairs = 0
    for record, drafts in rounds:
        table = signals.compute(candidates_of(drafts), judge_overrides(record, drafts, scores))
        valid = [d for d in drafts if d["valid"]]
        labels = [same_answer(d.get("answer") or "", record["gold"]) for d in valid]
        right += labels
        for name, column in values.items():
            round_values = [table[draft_id(d)][name] for d in valid]
            column += round_values
            good = [v for v, r in zip(round_values, labels, strict=True) if r]
            bad = [v for v, r in zip(round_values, labels, strict=True) if not r]
            wins[name] += sum((g > b) + 0.5 * (g == b) for g in good for b in bad)
        pairs += labels.count(True) * labels.count(False)
    return {
        "drafts": len(right),
        "right": sum(right),
        "auc": {name: area_under_curve(column, right) for name, column in values.items()},
        "pairs_within_round": pairs,
        "auc_within_round": {name: round(wins[name] / pairs, 4) if pairs else None for name in names},
    }


def verdicts(rows: Sequence[Mapping]) -> dict:
    """The judge's greedy verdicts on every draft it judged, against the gold label."""
    said_valid = [r for r in rows if r["p_valid"] > 0.5]
    right = [r for r in rows if r["right"]]
    hits = sum(r["right"] for r in said_valid)
    return {
        "drafts": len(rows),
        "right": len(right),
        "said_valid": len(said_valid),
        "accuracy": round(sum((r["p_valid"] > 0.5) == r["right"] for r in rows) / len(rows), 4) if rows else None,
        "always_invalid_accuracy": round(1 - len(right) / len(rows), 4) if rows else None,
        "precision_valid": round(hits / len(said_valid), 4) if said_valid else None,
        "recall_valid": round(hits / len(right), 4) if right else None,
        "auc": area_under_curve([r["p_valid"] for r in rows], [r["right"] for r in rows]),
        "by_kind": {
            kind: area_under_curve(
                [r["p_valid"] for r in rows if r["kind"] == kind], [r["right"] for r in rows if r["kind"] == kind]
            )
            for kind in ("prose", "program")
        },  # fmt: skip
    }


def judge_overrides(record: Mapping, drafts: Sequence[Mapping], scores: Mapping[str, float]) -> Overrides:
    """The judge's P(valid) as the signal `judge`, for the drafts it judged."""
    return {draft_id(d): {"judge": scores[draft_key(record, d)]} for d in drafts if draft_key(record, d) in scores}


def soft_overrides(record: Mapping, drafts: Sequence[Mapping], scores: Mapping[str, float]) -> Overrides:
    """The Verifier's score as a soft judge leaves it (`JudgeResult.blend`): the trained judge's reply scores 1
    when it says valid, else 0."""
    blended = {}
    for d in drafts:
        p = scores.get(draft_key(record, d))
        if p is not None:
            blended[draft_id(d)] = {"score": (1 - JUDGE_WEIGHT) * d["score"] + JUDGE_WEIGHT * float(p > 0.5)}
    return blended


def area_under_curve(values: Sequence[float], right: Sequence[bool]) -> float | None:
    """P(a right draft's value > a wrong draft's), ties counted half (Mann–Whitney); None without both."""
    positives = [v for v, r in zip(values, right, strict=True) if r]
    negatives = [v for v, r in zip(values, right, strict=True) if not r]
    if not positives or not negatives:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in positives for n in negatives)
    return round(wins / (len(positives) * len(negatives)), 4)


def read_scores(out: Path, folds: int) -> list[list[dict]]:
    """Every judged draft's row (key, kind, right, p_valid), fold by fold, of the folds judged so far."""
    paths = (out / f"fold{fold}.scores.jsonl" for fold in range(folds))
    return [read_runs(path) for path in paths if runs_present(path)]
