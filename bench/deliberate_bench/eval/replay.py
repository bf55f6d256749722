"""Draft once, select many: every selection configuration ranked again on the drafts a runs file recorded.

A live evaluation never draws the same drafts twice (llama.cpp's sampling follows the batch's layout) and costs
hours; a replay ranks the recorded drafts of `deliberate bench eval` with the selection package itself — the same
code the Scheduler runs — so policies are compared paired and exactly, without a model, in seconds.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from deliberate.scheduler.settings import SchedulerSettings
from deliberate.scheduler.solve import ROUND_STRIDE  # as the Scheduler orders drafts: earlier rounds first
from deliberate.selection import DEFAULT_WEIGHTS, Candidate, Selection, select, signals
from deliberate.selection.confidence import ConfidenceSummary

# Drafts the Scheduler sends to the Refiner: its --max-selected default, read from its settings.
MAX_SELECTED = SchedulerSettings.model_fields["max_selected"].default
# The seed's ablation, term by term: each a subset of the weighted policy's weights (docs/eval.md).
ABLATIONS: dict[str, tuple[str, ...]] = {
    "select:score": ("score",),
    "select:score+stddev": ("score", "agreement"),
    "select:score+stddev+latency": ("score", "agreement", "latency"),
    "select:score+stddev+latency+agreement": ("score", "agreement", "latency", "answer_share"),
}


def draft_id(draft: Mapping) -> str:
    """A recorded draft's identity within its problem: round and index (runs files keep no draft ids)."""
    return f"{draft['round']}:{draft['index']}"


def candidates_of(drafts: list[Mapping]) -> list[Candidate]:
    """Selection candidates from the draft records of a runs file (`deliberate bench eval`'s `solve.drafts`)."""
    return [
        Candidate(
            draft_id=draft_id(d),
            index=d["index"] + ROUND_STRIDE * d["round"],
            valid=d["valid"],
            score=d["score"],
            latency=(d.get("components") or {}).get("latency", 0.0),
            answer=d.get("answer") or "",
            evidence=tuple(d.get("evidence") or ()),
            text=d.get("text", ""),
            completion_tokens=d.get("completion_tokens", 0),
            finish_reason=d.get("finish_reason", ""),
            kind=d.get("kind") or "prose",
            confidence=recorded_confidence(d),
        )
        for d in drafts
    ]


def recorded_confidence(draft: Mapping) -> ConfidenceSummary | None:
    """A draft record's confidence numbers (`evaluation.confidence_of`); None in runs recorded without them."""
    c = draft.get("confidence")
    if not c:
        return None
    numbers = ("tokens", "mean_logprob", "min_window", "last_window", "answer", "window_tokens")
    return ConfidenceSummary(*(c[name] for name in numbers))


def recorded_weights(drafts: list[Mapping]) -> dict[str, float]:
    """The weighted policy's weights as the Scheduler reported them in the drafts' components (the defaults
    when none were reported); a Scheduler older than the weights map reports α, β, γ, δ."""
    components = next((d["components"] for d in drafts if d.get("components")), None)
    if components is None:
        return {"score": 1.0, "agreement": 0.3, "answer_share": 0.3, "latency": -0.02}
    return {
        "score": components.get("alpha", 1.0),
        "agreement": components.get("beta", 0.3),
        "answer_share": components.get("delta", 0.3),
        "latency": -components.get("gamma", 0.02),
    }


def recorded_shares(drafts: list[Mapping]) -> dict[str, dict[str, float]]:
    """The answer shares the Scheduler reported (with the answer identity it had then), as signal overrides."""
    return {
        draft_id(d): {"answer_share": d["components"].get("answer_share", 0.0)} for d in drafts if d.get("components")
    }


def replay(
    drafts: list[Mapping],
    policy: str,
    weights: Mapping[str, float] | None = None,
    overrides: Mapping[str, Mapping[str, float]] | None = None,
) -> Selection:
    """The selection `policy` makes on recorded drafts (weights: the recorded ones unless given)."""
    weights = recorded_weights(drafts) if weights is None else weights
    return select(candidates_of(drafts), policy=policy, weights=weights, max_selected=MAX_SELECTED, overrides=overrides)


def selected_live(drafts: list[Mapping]) -> set[str]:
    """The drafts the live Scheduler sent to the Refiner."""
    return {draft_id(d) for d in drafts if d.get("selected")}


def live_check(records: list[Mapping]) -> dict:
    """Whether the replay of the live policy on every recorded draft selects what the live Scheduler selected,
    problem by problem (the pipeline row's refinement started from those drafts). Runs recorded before the
    signals map are ranked with the answer shares the Scheduler reported then."""
    checked = same = 0
    differing = []
    for record in records:
        drafts = record.get("solve", {}).get("drafts") or []
        if not selected_live(drafts):
            continue
        with_signals = any("signals" in (d.get("components") or {}) for d in drafts)
        policy = record["solve"].get("selection_policy") or "weighted"
        selection = replay(drafts, policy, overrides=None if with_signals else recorded_shares(drafts))
        checked += 1
        if {c.draft_id for c in selection.selected} == selected_live(drafts):
            same += 1
        else:
            differing.append(record.get("id"))
    return {"problems": checked, "same_selection": same, "differing": differing}


def identity_effect(records: list[Mapping], n: int, gold_check) -> dict:
    """What the one answer identity changes for the default policy on the first `n` drafts: the weighted
    policy with the answer shares the Scheduler reported, against the same policy with shares recomputed."""
    changed = gained = lost = 0
    for record in records:
        drafts = [d for d in record.get("solve", {}).get("drafts") or [] if d["round"] == 0 and d["index"] < n]
        if not drafts:
            continue
        before = replay(drafts, "weighted", overrides=recorded_shares(drafts)).selected[0]
        after = replay(drafts, "weighted").selected[0]
        if before.draft_id == after.draft_id:
            continue
        changed += 1
        right_before, right_after = gold_check(before.answer, record["gold"]), gold_check(after.answer, record["gold"])
        gained += right_after and not right_before
        lost += right_before and not right_after
    return {"n": n, "changed": changed, "now_right": gained, "now_wrong": lost}


# --------------------------------------------------------------------------------------------------
# A learned policy, scored by cross-validation over problems
# --------------------------------------------------------------------------------------------------

# What a learned weighting may read. Left out: `agreement` (one value per request, it cannot reorder drafts) and
# `latency` (a cost the deployment sets from load, not evidence of a right answer: fitted, its weight swung from
# −152 to +196 between folds of the committed runs — noise). A signal that never varies in the training drafts
# (the confidence signals of runs recorded without token probabilities) is left out of that fit.
LEARNED_SIGNALS = (
    "score", "answer_share", "vote_share", "evidence", "kind_share", "cross_check", "program", "cut_off", "length",
    "confidence", "tail_confidence", "answer_confidence", "mean_logprob",
)  # fmt: skip
FOLDS = 5
# Drafts per request of the mixed rows: every split of 5 into prose drafts and programs that a round holds.
MIX_SIZE = 5
# The default round of that size: its programs (the Scheduler's --program-drafts default), the rest prose.
PROGRAM_DRAFTS = SchedulerSettings.model_fields["program_drafts"].default
DEFAULT_MIX = (MIX_SIZE - PROGRAM_DRAFTS, PROGRAM_DRAFTS)

DraftChooser = Callable[[Mapping], list[Mapping]]  # a record → the drafts a configuration ranks


def first_drafts(solve: Mapping, n: int) -> list[Mapping]:
    """The first n drafts of round 0 — what a request with num_drafts = n would have drafted (same prompts and
    strategies; the batch was sampled once, with N = the largest size)."""
    return sorted((d for d in solve.get("drafts", []) if d["round"] == 0 and d["index"] < n), key=lambda d: d["index"])


def drafts_of_kind(solve: Mapping, kind: str) -> list[Mapping]:
    """Round 0's drafts of one kind ("prose" or "program"), in drafting order."""
    drafts = (d for d in solve.get("drafts", ()) if d["round"] == 0 and (d.get("kind") or "prose") == kind)
    return sorted(drafts, key=lambda d: d["index"])


def first_of_kinds(solve: Mapping, prose: int, programs: int) -> list[Mapping]:
    """The first `prose` prose drafts and the first `programs` programs of round 0: a round of that mix."""
    chosen = drafts_of_kind(solve, "prose")[:prose] + drafts_of_kind(solve, "program")[:programs]
    return sorted(chosen, key=lambda d: d["index"])


def mixes(solve: Mapping, size: int = MIX_SIZE) -> list[tuple[int, int]]:
    """The (prose, programs) splits of `size` drafts that the recorded round can serve, both kinds present."""
    kinds = [d.get("kind") or "prose" for d in solve.get("drafts", []) if d["round"] == 0]
    prose, programs = kinds.count("prose"), kinds.count("program")
    return [(p, size - p) for p in range(size - 1, 0, -1) if p <= prose and size - p <= programs]


def drafts_chooser(size: int, mix: tuple[int, int] | None = None) -> DraftChooser:
    """How a request of `size` drafts picks a record's drafts: the first `size` of round 0, or with `mix`
    (prose, programs) the first of each kind."""
    if mix is None:
        return lambda record: first_drafts(record["solve"], size)
    prose, programs = mix
    if prose + programs != size:
        raise ValueError(f"a mix of {prose} + {programs} drafts is not {size}")
    return lambda record: first_of_kinds(record["solve"], prose, programs)


def parse_drafts(spec: str) -> tuple[int, tuple[int, int] | None]:
    """`5` → (5, None); `5:3+2` → (5, (3, 2)): 3 prose drafts and 2 programs."""
    size, _, mix = spec.partition(":")
    if not mix:
        return int(size), None
    prose, programs = (int(part) for part in mix.split("+"))
    return int(size), (prose, programs)


def mix_suffix(prose: int, programs: int) -> str:
    """A mixed configuration's row suffix: `@5:3+2` is 3 prose drafts and 2 programs."""
    return f"@{prose + programs}:{prose}+{programs}"


Overrides = Mapping[str, Mapping[str, float]]  # draft id → signal name → value (a signal the replay adds)


def fit_weights(
    problems: list[tuple[list[Mapping], str]],
    gold_check,
    names: tuple[str, ...] = LEARNED_SIGNALS,
    overrides: list[Overrides] | None = None,
) -> dict[str, float] | None:
    """Weights for the `weighted` policy fitted on labelled drafts: a logistic regression of "this valid draft's
    answer is right" on the signals `names` (the Scheduler's own fitting code, `logistic_coefficients`), its
    coefficients used as weights; `overrides`, one per problem, adds or replaces signal values. Signals that
    never varied are left out; None when nothing can be fitted."""
    from deliberate.scheduler.learning.weights import logistic_coefficients

    rows, labels = [], []
    for k, (drafts, gold) in enumerate(problems):
        candidates = candidates_of(drafts)
        table = signals.compute(candidates, overrides[k] if overrides else None)
        for candidate in candidates:
            if candidate.valid:
                rows.append([table[candidate.draft_id][name] for name in names])
                labels.append(1.0 if gold_check(candidate.answer, gold) else 0.0)
    if not rows or min(labels) == max(labels):
        return None
    varied = [j for j in range(len(names)) if len({row[j] for row in rows}) > 1]
    coefficients = logistic_coefficients([tuple(row[j] for j in varied) for row in rows], labels)
    if coefficients is None:
        return None
    return {names[j]: c for j, c in zip(varied, coefficients, strict=True)}


def cross_validated(
    records: list[Mapping],
    choose: DraftChooser | int,
    gold_check,
    folds: int = FOLDS,
    names: tuple[str, ...] = LEARNED_SIGNALS,
    overrides_of: Callable[[Mapping], Overrides] | None = None,
) -> tuple[list, list[dict]]:
    """The `weighted` policy with weights fitted on the other folds, for each problem's drafts as `choose` picks
    them (an int n: the first n): problem i is in fold i mod `folds` (the records' order is the evaluation's
    random sample), and its drafts are ranked with weights fitted on the problems of every other fold only.
    `overrides_of` gives a record's added signal values. Returns the best candidate per record (None without
    drafts) and the weights of each fold."""
    if isinstance(choose, int):
        choose = drafts_chooser(choose)
    drafts_of = [list(choose(r)) for r in records]
    added = [overrides_of(r) if overrides_of else None for r in records]
    best: list = [None] * len(records)
    fitted = []
    for fold in range(folds):
        training = [i for i in range(len(records)) if i % folds != fold and drafts_of[i]]
        problems = [(drafts_of[i], records[i]["gold"]) for i in training]
        overrides = [added[i] or {} for i in training] if overrides_of else None
        weights = fit_weights(problems, gold_check, names, overrides) or dict(DEFAULT_WEIGHTS)
        fitted.append({name: round(value, 4) for name, value in weights.items()})
        for i in range(fold, len(records), folds):
            if drafts_of[i]:
                best[i] = replay(drafts_of[i], "weighted", weights=weights, overrides=added[i]).selected[0]
    return best, fitted


def learned_ablation(records: list[Mapping], choose: DraftChooser, gold_check) -> dict[str, int]:
    """Problems right under the cross-validated learned policy with all its signals (`all`) and with each signal
    left out in turn: what each signal adds."""

    def right(names: tuple[str, ...]) -> int:
        best, _ = cross_validated(records, choose, gold_check, names=names)
        return sum(b is not None and gold_check(b.answer, r["gold"]) for b, r in zip(best, records, strict=True))

    found = {"all": right(LEARNED_SIGNALS)}
    for name in LEARNED_SIGNALS:
        found[f"-{name}"] = right(tuple(n for n in LEARNED_SIGNALS if n != name))
    return found
