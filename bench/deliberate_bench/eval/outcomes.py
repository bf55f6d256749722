"""Every configuration's outcome on one recorded problem of `deliberate bench eval`: the live single pass and pipeline,
and every vote, best-of and selection policy read again from the recorded drafts (docs/eval.md). Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass

from deliberate.selection import POLICIES, same_answer
from deliberate_bench.eval.replay import (
    ABLATIONS,
    first_drafts,
    first_of_kinds,
    mix_suffix,
    mixes,
    recorded_shares,
    recorded_weights,
    replay,
)

# What DELIBERATE_MODEL=embedded named when the committed runs recording it were made (before issue 40 changed
# deliberate.engines.models.DEFAULT_EMBEDDED; runs since record the model by name).
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


AFTER_STOP = "(after-stop)"
VOTES_AND_ORACLES = re.compile(r"^((?:majority|pass)@\d+)")


def live_drafts(records: list[dict]) -> list[dict]:
    """Every draft of the records' live solves."""
    return [draft for r in records for draft in (r.get("solve") or {}).get("drafts", [])]


def stopped_drafts(records: list[dict]) -> int:
    """Drafts the round's quorum stopped before their answer (`ABORTED`), over the records' live solves."""
    return sum(draft.get("finish_reason") == "ABORTED" for draft in live_drafts(records))


def named_after_stop(configs: list[dict], records: list[dict]) -> None:
    """Where drafts were stopped, a vote or an oracle saw only the drafts that finished: says so in its name
    (`majority@5(after-stop)`), after the configurations were summarized and ordered."""
    if stopped_drafts(records):
        for config in configs:
            config["name"] = VOTES_AND_ORACLES.sub(lambda m: m[1] + AFTER_STOP, config["name"])


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
