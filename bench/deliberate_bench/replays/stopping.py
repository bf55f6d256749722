"""Adaptive draft counts and confidence stops, replayed on recorded mixed rounds (issue 25, items 1–3, offline).

A runs file of `deliberate bench eval` recorded with prose and program drafts (`make eval-tuning`, `make eval-200`: 4 of
each per problem, every draft run to its end, each with its verdict, answer, tokens and per-token confidence) holds
every draft an adaptive round could have asked for. A policy is replayed on paper, the same drafts both ways:

* **without** — the default round: the first `DEFAULT_MIX` drafts (the Scheduler's `--program-drafts` of 5 are
  programs), all finished, ranked by the default selection policy;
* **with** — drafts are added in the policy's `order` of kinds, `start` at once and then one at a time, until the
  round is settled: `quorum` valid drafts agree on the answer, or (`cross_modal`) a valid prose draft and a valid
  program agree, or the policy's drafts are spent. With `limits`, a draft whose windowed token confidence falls
  below its kind's limit stops there (`confidence_stop.stop_point`): its tokens up to that point are spent and it
  leaves the round with no answer. The drafts that finished are ranked by the same selection policy.

Tokens are counted (on this CPU decoding time follows tokens; the live benchmark confirms time); accuracy is the
selected answer against the gold one (refinement is not replayed). Pure: records in, numbers out.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from deliberate.selection import DEFAULT_WEIGHTS, answer_key, same_answer
from deliberate.selection.adaptive import KINDS, AdaptivePolicy, settled
from deliberate_bench.eval.replay import DEFAULT_MIX, drafts_of_kind, first_of_kinds, replay

StopPoint = Callable[[Sequence[float], float], "int | None"]


@dataclass(frozen=True)
class Outcome:
    tokens: int
    drafts: int  # drafts started
    answer: str | None


def of_kind(record: Mapping, kind: str) -> list[Mapping]:
    """The record's first-round drafts of one kind, in drafting order."""
    return drafts_of_kind(record["solve"], kind)


def can_serve(record: Mapping, policy: AdaptivePolicy) -> bool:
    return all(len(of_kind(record, kind)) >= policy.order.count(kind) for kind in KINDS) and all(
        len(of_kind(record, kind)) >= n for kind, n in zip(KINDS, DEFAULT_MIX, strict=True)
    )


def pick(drafts: list[Mapping], policy: str) -> str | None:
    if not drafts:
        return None
    selection = replay(drafts, policy, weights=DEFAULT_WEIGHTS)
    return selection.selected[0].answer if selection.selected else None


def without(record: Mapping, policy: str = "weighted") -> Outcome:
    """The default round, every draft to its end."""
    drafts = first_of_kinds(record["solve"], *DEFAULT_MIX)
    return Outcome(sum(d["completion_tokens"] for d in drafts), len(drafts), pick(drafts, policy))


def is_settled(finished: list[Mapping], policy: AdaptivePolicy) -> bool:
    """The live round's rule (`deliberate.selection.adaptive.settled`) on recorded drafts."""
    return bool(settled(((d["answer"], d.get("kind") or "prose") for d in finished if d["valid"]), policy))


def with_policy(
    record: Mapping,
    policy: AdaptivePolicy,
    limits: Mapping[str, float] | None = None,
    stop_point: StopPoint | None = None,
    selection_policy: str = "weighted",
) -> Outcome:
    """The adaptive round replayed on the record's drafts."""
    queues = {kind: iter(of_kind(record, kind)) for kind in KINDS}
    finished: list[Mapping] = []
    tokens = started = 0
    for kind in policy.order:
        if started >= policy.start and is_settled(finished, policy):
            break
        draft = next(queues[kind])
        started += 1
        series = (draft.get("confidence") or {}).get("token_confidences")
        limit = (limits or {}).get(kind)
        at = stop_point(series, limit) if series and limit is not None and stop_point else None
        if at is not None and at < draft["completion_tokens"]:
            tokens += at
        else:
            tokens += draft["completion_tokens"]
            finished.append(draft)
    return Outcome(tokens, started, pick(finished, selection_policy))


def compare(records: Sequence[Mapping], policy: AdaptivePolicy, **options) -> dict:
    """Tokens and accuracy with the policy and without, on the records that can serve both."""
    usable = [r for r in records if can_serve(r, policy)]
    base = [without(r) for r in usable]
    adaptive = [with_policy(r, policy, **options) for r in usable]
    right_without = sum(same_answer(o.answer, r["gold"]) for o, r in zip(base, usable, strict=True))
    right_with = sum(same_answer(o.answer, r["gold"]) for o, r in zip(adaptive, usable, strict=True))
    tokens_without, tokens_with = sum(o.tokens for o in base), sum(o.tokens for o in adaptive)
    n = len(usable)
    return {
        "policy": policy.name,
        "n": n,
        "token_ratio": round(tokens_with / tokens_without, 3) if tokens_without else None,
        "mean_drafts": round(sum(o.drafts for o in adaptive) / n, 2) if n else None,
        "right_without": right_without,
        "right_with": right_with,
        "accuracy_change_points": round(100 * (right_with - right_without) / n, 1) if n else None,
    }


def agreement_precision(records: Sequence[Mapping]) -> dict[str, dict[str, int]]:
    """How often two valid drafts that agree are right: the first prose draft with the first program (cross-modal)
    against the first two prose drafts (same kind), each among the valid drafts with an answer."""
    found = {"prose_and_program": {"agree": 0, "right": 0}, "two_prose": {"agree": 0, "right": 0}}
    for record in records:
        valid = {kind: [d for d in of_kind(record, kind) if d["valid"] and d.get("answer")] for kind in KINDS}
        pairs = {"prose_and_program": (valid["prose"][:1] + valid["program"][:1]), "two_prose": valid["prose"][:2]}
        for name, pair in pairs.items():
            if len(pair) == 2 and answer_key(pair[0]["answer"]) == answer_key(pair[1]["answer"]):
                found[name]["agree"] += 1
                found[name]["right"] += same_answer(pair[0]["answer"], record["gold"])
    return found


def candidate_policies(max_drafts: int = 5) -> list[AdaptivePolicy]:
    """Every order of `max_drafts` kinds with at most 4 of each (what the recorded rounds hold), started with 1–3
    drafts, settled by a quorum of 2, 3 or none (cross-modal agreement only)."""
    orders = {o for o in itertools.product(KINDS, repeat=max_drafts) if all(o.count(k) <= 4 for k in KINDS)}
    return [
        AdaptivePolicy(order, start, quorum, cross_modal=True)
        for order in sorted(orders)
        for start in (1, 2, 3)
        for quorum in (2, 3, max_drafts + 1)
    ]


def choose(calibration: Sequence[Mapping], max_loss_points: float, **options) -> tuple[AdaptivePolicy, dict] | None:
    """The policy with the lowest token ratio on the calibration records whose accuracy change is at least
    `-max_loss_points` (ties: fewer drafts, then the name)."""
    found = [(policy, compare(calibration, policy, **options)) for policy in candidate_policies()]
    allowed = [(p, r) for p, r in found if r["n"] and r["accuracy_change_points"] >= -max_loss_points]
    if not allowed:
        return None
    return min(allowed, key=lambda pr: (pr[1]["token_ratio"], pr[1]["mean_drafts"], pr[0].name))
