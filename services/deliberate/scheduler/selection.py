"""Which drafts the Refiner sees, and what status the answer gets. Pure functions, no gRPC.

Among drafts that pass every hard rule:
    final_i = α·score_i + β·(1 − stddev(scores of this request's drafts)) + δ·answer_share_i − γ·latency_i
with answer_share_i the share of valid drafts reaching draft i's final answer (self-consistency; answers
compared by value, so "72" and "72.00" agree) and latency_i the draft's verification latency over the
verification timeout (in [0, 1]). Drafts with evidence (a substantive check that ran and passed) rank
before drafts that passed on format alone: a checked answer beats an unchecked one whatever their scores,
as a valid draft beats an invalid one. Equal finals are broken by answer share, then by the earlier draft.

The status is that of the best selected draft: ``verified`` when it passed every hard rule and at least
one substantive check (its `evidence`, named in the reason), ``unchecked`` when it passed every hard rule
but nothing substantive applied (only format checks, or every substantive rule abstained), and
``unverified`` when no draft passed every hard rule.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Literal

from .weights import Weights, final_score, score_spread

Status = Literal["verified", "unchecked", "unverified"]
DEFAULT_WEIGHTS = Weights()


@dataclass(frozen=True)
class Scored:
    draft_id: str
    index: int
    valid: bool
    score: float
    latency: float = 0.0  # verification latency / verification timeout, clamped to [0, 1]
    answer: str = ""  # the final answer the Verifier extracted
    evidence: tuple[str, ...] = ()  # the substantive checks the draft passed (DraftVerdict.evidence)


@dataclass(frozen=True)
class Components:
    score: float
    agreement: float
    latency: float
    answer_share: float
    final: float


@dataclass(frozen=True)
class Selection:
    selected: list[Scored]  # best first
    status: Status
    reason: str
    components: dict[str, Components]  # by draft id
    ranking: tuple[str, ...] = ()  # every draft id, best first: the valid ones as ranked, then the others by score

    @property
    def verified_by(self) -> list[str]:
        """The substantive checks behind a ``verified`` status (the best draft's evidence); [] otherwise."""
        return list(self.selected[0].evidence) if self.status == "verified" else []


def select(drafts: list[Scored], max_selected: int, weights: Weights = DEFAULT_WEIGHTS) -> Selection:
    """The best drafts: checked before unchecked, then by `final`, answer share and earlier index; only valid
    drafts compete.

    When no draft is valid, the best-scoring invalid draft is selected alone and the answer is marked
    unverified — never presented as verified. When the best valid draft has no evidence, the answer is
    marked unchecked.
    """
    if not drafts:
        raise ValueError("no drafts to select from")
    scores = [d.score for d in drafts]
    agreement = 1.0 - score_spread(scores)
    answers = Counter(answer_key(d.answer) for d in drafts if d.valid and d.answer)
    valid_count = sum(d.valid for d in drafts)
    components = {}
    for d in drafts:
        share = answers[answer_key(d.answer)] / valid_count if d.valid and d.answer else 0.0
        components[d.draft_id] = Components(
            score=d.score,
            agreement=agreement,
            latency=d.latency,
            answer_share=share,
            final=final_score(d.score, 1.0 - agreement, d.latency, weights, answer_share=share),
        )

    def rank(d: Scored) -> tuple:
        c = components[d.draft_id]
        return (not d.evidence, -round(c.final, 9), -c.answer_share, d.index)

    valid = sorted((d for d in drafts if d.valid), key=rank)
    invalid = sorted((d for d in drafts if not d.valid), key=lambda d: (-d.score, d.index))
    ranking = tuple(d.draft_id for d in valid + invalid)
    if valid:
        chosen = valid[:max_selected]
        passed = f"{len(valid)} of {len(drafts)} drafts passed every hard rule"
        if chosen[0].evidence:
            reason = f"{passed}; checked by {', '.join(chosen[0].evidence)}"
            return Selection(chosen, "verified", reason, components, ranking)
        reason = f"{passed}, but no substantive check applied to the best of them (only format checks)"
        return Selection(chosen, "unchecked", reason, components, ranking)
    reason = f"none of {len(drafts)} drafts passed every hard rule"
    return Selection([invalid[0]], "unverified", reason, components, ranking)


_NUMBER_ANSWER = re.compile(r"-?\d+(?:\.\d+)?")


def answer_key(answer: str) -> str:
    """What two answers must share to count as the same: a number by its value ("72.00" and "72"),
    any other answer by its whitespace-normalized, case-folded text."""
    text = " ".join(answer.split())
    if _NUMBER_ANSWER.fullmatch(text) and len(text) <= 60:
        try:
            value = Decimal(text).normalize()
        except InvalidOperation:  # not reachable for the pattern above; never crash selection
            return text.casefold()
        return format(value, "f")
    return text.casefold()


NUMBER = r"\d[\d,]*(?:\.\d+)?"
SIGNATURE_TOKEN = re.compile(rf"{NUMBER}|[-+*/×÷=<>%]")


def structural_signature(text: str) -> str:
    """The draft's numbers, ids and operators in order, normalized (1,200 → 1200, 5.0 → 5); drafts that
    differ only in wording share it. Without any number or operator, the whitespace-normalized text."""
    tokens = []
    for token in SIGNATURE_TOKEN.findall(text):
        if token[0].isdigit():
            token = token.replace(",", "")
            if "." in token:
                token = token.rstrip("0").rstrip(".")
        tokens.append(token)
    return " ".join(tokens) if tokens else "text:" + " ".join(text.lower().split())
