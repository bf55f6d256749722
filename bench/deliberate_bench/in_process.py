"""The Verifier's rules and the Scheduler's selection called in process, on drafts a benchmark generated itself: the
lab ranks drafts one way, the product's (`deliberate.selection`), never with a ranking of its own."""

from __future__ import annotations

from collections.abc import Sequence

from deliberate.engines.base import Completion
from deliberate.selection import Candidate, Selection, select
from deliberate.verifier.constraints import ConstraintSpec, compile_rules
from deliberate.verifier.rules import Verdict, verify

ARITHMETIC = ConstraintSpec(0, "rule_pack", "arithmetic")  # what the Scheduler adds to a request without a schema


def verify_drafts(completions: Sequence[Completion]) -> list[Verdict]:
    """Each draft checked with the rules the Scheduler asks for on a plain question (the arithmetic pack)."""
    rules = compile_rules("", [ARITHMETIC], {})
    return [verify(c.text, rules.rules, c.finish_reason) for c in completions]


def select_drafts(completions: Sequence[Completion], verdicts: Sequence[Verdict], max_selected: int = 2) -> Selection:
    """The default selection policy over the verdicted drafts; a draft's id is its index in `completions`."""
    candidates = [
        Candidate(str(i), i, v.valid, v.score, 0.0, v.extracted_answer, evidence=tuple(v.evidence), text=c.text)
        for i, (c, v) in enumerate(zip(completions, verdicts, strict=True))
    ]
    return select(candidates, max_selected=max_selected)
