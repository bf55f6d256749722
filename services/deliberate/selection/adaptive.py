"""Adaptive draft counts (adaptive consistency): start few drafts and add one at a time until the answers settle.

A policy is named as the lab's replay (`deliberate_bench.replays.adaptive_stop`) reports it, e.g.
`ssscs/start1/q2+x`: the kinds of the drafts the round may add, in order (`s` prose, `c` a program), how many start
together before the first look, the number of valid drafts agreeing on an answer that settles the round (`q2`), and
`+x` when a valid prose draft and a valid program agreeing settle it too (cross-modal agreement). A cascade
(`cscscs/start2/step2/q2+x/greedy`) adds `step` drafts at a time after the first stage (one when unnamed), and
`/greedy` drafts its first stage at temperature 0 — the one greedy program and prose draft a user would otherwise run
alone. The Scheduler applies it live (`--draft-count cascade|adaptive`, `SolveRequest.draft_count`); the replays of
recorded drafts (`deliberate_bench.replays.stopping`, `deliberate_bench.replays.cascade`) apply the same `settled`."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .answers import answer_key

PROSE, PROGRAM = "prose", "program"
KINDS = (PROSE, PROGRAM)
KIND_LETTERS = {"s": PROSE, "c": PROGRAM}  # s: prose (sentences), c: code
POLICY_NAME = re.compile(
    r"^(?P<order>[sc]+)/start(?P<start>[1-9]\d*)(?:/step(?P<step>[1-9]\d*))?/q(?P<quorum>[1-9]\d*)(?P<cross>\+x)?"
    r"(?:/trust(?P<trust>\d+(?:\.\d+)?))?(?P<greedy>/greedy)?$"
)


@dataclass(frozen=True)
class AdaptivePolicy:
    order: tuple[str, ...]  # the kind of each draft the round may add, in the order it adds them
    start: int  # drafts started together before the first look
    quorum: int  # valid drafts agreeing on an answer that settle the round
    cross_modal: bool  # a valid prose draft and a valid program agreeing settle the round
    step: int = 1  # drafts each later stage adds
    greedy: bool = False  # the first stage is drafted at temperature 0
    # One valid draft whose weakest 16-token window of token confidence is at least this settles the round alone
    # (DeepConf's lowest group confidence); None: agreement only.
    trust: float | None = None

    @property
    def name(self) -> str:
        kinds = "".join("s" if kind == PROSE else "c" for kind in self.order)
        step = f"/step{self.step}" if self.step != 1 else ""
        stop = f"q{self.quorum}{'+x' if self.cross_modal else ''}"
        trust = f"/trust{self.trust:g}" if self.trust is not None else ""
        return f"{kinds}/start{self.start}{step}/{stop}{trust}{'/greedy' if self.greedy else ''}"

    @classmethod
    def parse(cls, name: str) -> AdaptivePolicy:
        """The policy a name such as `ssscs/start1/q2+x` stands for; ValueError naming the format otherwise."""
        found = POLICY_NAME.match(name.strip())
        if not found:
            raise ValueError(
                f"{name!r} is not an adaptive policy: expected e.g. 'ssscs/start1/q2+x' or "
                "'cscscs/start2/step2/q2+x/greedy' (kinds in order, s prose and c program; drafts started at once; "
                "drafts added per later stage; the quorum; +x: cross-modal agreement; trust: the token confidence at "
                "which one valid draft settles alone; greedy: the first stage at temperature 0)"
            )
        order = tuple(KIND_LETTERS[letter] for letter in found["order"])
        step, trust = int(found["step"] or 1), (float(found["trust"]) if found["trust"] else None)
        quorum, cross = int(found["quorum"]), bool(found["cross"])
        return cls(order, int(found["start"]), quorum, cross, step, bool(found["greedy"]), trust)

    def stages(self, kinds: Sequence[str]) -> list[list[str]]:
        """A round's kinds split into its stages: the first `start` together, then `step` at a time."""
        first, rest = list(kinds[: self.start]), list(kinds[self.start :])
        return [first] * bool(first) + [rest[i : i + self.step] for i in range(0, len(rest), self.step)]

    def kinds_for(self, num_drafts: int, programs: int) -> list[str]:
        """The kinds of a round of `num_drafts` drafts, `programs` of them programs, in the order this policy adds
        them: its order's kinds while the round has drafts of that kind left, then the rest (prose first)."""
        left = {PROSE: num_drafts - programs, PROGRAM: programs}
        kinds = []
        for kind in self.order:
            if left[kind] > 0:
                kinds.append(kind)
                left[kind] -= 1
        return kinds + [PROSE] * left[PROSE] + [PROGRAM] * left[PROGRAM]


def settled(valid: Iterable[tuple[str, str]], policy: AdaptivePolicy) -> str:
    """Why the round is settled by its valid drafts, given as (answer, kind) pairs; "" while it is not."""
    valid = list(valid)
    votes = Counter(key for answer, _ in valid if (key := answer_key(answer)))
    if votes and (top := votes.most_common(1)[0])[1] >= policy.quorum:
        return f"{top[1]} valid drafts agree on {top[0]}"
    return cross_modal_agreement(valid) if policy.cross_modal else ""


def trusted(valid: Iterable[tuple[str, float | None]], policy: AdaptivePolicy) -> str:
    """Why one valid draft settles the round alone, among (kind, weakest-window confidence) pairs of valid drafts;
    "" while none is that sure of itself (or the policy trusts no draft alone)."""
    if policy.trust is None:
        return ""
    for kind, confidence in valid:
        if confidence is not None and confidence >= policy.trust:
            return f"a valid {kind or PROSE} draft's token confidence {confidence:.2f} ≥ {policy.trust:g}"
    return ""


def cross_modal_agreement(valid: Iterable[tuple[str, str]]) -> str:
    """Why a valid prose draft and a valid program agree, among (answer, kind) pairs; "" while none do."""
    kinds_by_answer: dict[str, set[str]] = {}
    for answer, kind in valid:
        if key := answer_key(answer):
            kinds_by_answer.setdefault(key, set()).add(kind or PROSE)
    for key, kinds in kinds_by_answer.items():
        if len(kinds) == len(KINDS):
            return f"a valid prose draft and a valid program agree on {key}"
    return ""
