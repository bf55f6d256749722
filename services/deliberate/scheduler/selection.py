"""Which drafts the Refiner sees, and what status the answer gets. Pure functions, no gRPC."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Status = Literal["verified", "unverified"]


@dataclass(frozen=True)
class Scored:
    draft_id: str
    index: int
    valid: bool
    score: float


@dataclass(frozen=True)
class Selection:
    selected: list[Scored]  # best first
    status: Status
    reason: str


def select(drafts: list[Scored], max_selected: int) -> Selection:
    """Highest score among drafts that pass every hard rule; ties go to the earlier draft.

    When no draft is valid, the best-scoring invalid draft is selected alone and the answer is
    marked unverified — never presented as verified.
    """
    if not drafts:
        raise ValueError("no drafts to select from")
    ranked = sorted(drafts, key=lambda d: (-d.score, d.index))
    valid = [d for d in ranked if d.valid]
    if valid:
        chosen = valid[:max_selected]
        return Selection(chosen, "verified", f"{len(valid)} of {len(drafts)} drafts passed every hard rule")
    return Selection(ranked[:1], "unverified", f"none of {len(drafts)} drafts passed every hard rule")
