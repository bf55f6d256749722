"""Which drafts the Refiner sees, and what status the answer gets. Pure functions, no gRPC.

Among drafts that pass every hard rule:
    final_i = α·score_i + β·(1 − stddev(scores of this request's drafts)) − γ·latency_i
with latency_i the draft's verification latency over the verification timeout (in [0, 1]). Agreement
matters too: the share of valid drafts reaching the same final answer is recorded and breaks ties
(self-consistency).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Literal

from .weights import Weights, final_score, score_spread

Status = Literal["verified", "unverified"]
DEFAULT_WEIGHTS = Weights()


@dataclass(frozen=True)
class Scored:
    draft_id: str
    index: int
    valid: bool
    score: float
    latency: float = 0.0  # verification latency / verification timeout, clamped to [0, 1]
    answer: str = ""  # the final answer the Verifier extracted


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


def select(drafts: list[Scored], max_selected: int, weights: Weights = DEFAULT_WEIGHTS) -> Selection:
    """The best drafts by `final`, then answer share, then earlier index; only valid drafts compete.

    When no draft is valid, the best-scoring invalid draft is selected alone and the answer is marked
    unverified — never presented as verified.
    """
    if not drafts:
        raise ValueError("no drafts to select from")
    scores = [d.score for d in drafts]
    agreement = 1.0 - score_spread(scores)
    answers = Counter(d.answer for d in drafts if d.valid and d.answer)
    valid_count = sum(d.valid for d in drafts)
    components = {
        d.draft_id: Components(
            score=d.score,
            agreement=agreement,
            latency=d.latency,
            answer_share=answers[d.answer] / valid_count if d.valid and d.answer else 0.0,
            final=final_score(d.score, 1.0 - agreement, d.latency, weights),
        )
        for d in drafts
    }

    def rank(d: Scored) -> tuple:
        c = components[d.draft_id]
        return (-round(c.final, 9), -c.answer_share, d.index)

    valid = sorted((d for d in drafts if d.valid), key=rank)
    if valid:
        chosen = valid[:max_selected]
        return Selection(chosen, "verified", f"{len(valid)} of {len(drafts)} drafts passed every hard rule", components)
    best = min(drafts, key=lambda d: (-d.score, d.index))
    return Selection([best], "unverified", f"none of {len(drafts)} drafts passed every hard rule", components)


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
