"""The lab ranks drafts it generated itself as the Scheduler does (deliberate_bench.in_process): the Verifier's
arithmetic pack, then the default selection policy."""

from __future__ import annotations

from deliberate.engines.base import Completion
from deliberate_bench.in_process import select_drafts, verify_drafts


def completion(index: int, text: str, finish_reason: str = "stop") -> Completion:
    return Completion(index, text, 10, 20, finish_reason, 0.1)


def test_a_draft_with_wrong_arithmetic_ranks_below_the_right_ones_which_agree():
    drafts = [
        completion(0, "3 * 4 = 13\nFinal answer: 13"),  # the arithmetic pack recomputes 3 * 4
        completion(1, "3 * 4 = 12\nFinal answer: 12"),
        completion(2, "4 * 3 = 12\nFinal answer: 12"),
    ]
    verdicts = verify_drafts(drafts)
    assert [v.valid for v in verdicts] == [False, True, True]
    assert "arithmetic" in verdicts[1].evidence
    selection = select_drafts(drafts, verdicts)
    assert selection.ranking[-1] == "0"
    assert {c.answer for c in selection.selected} == {"12"}


def test_a_draft_cut_at_its_token_budget_ranks_last():
    drafts = [completion(0, "3 * 4 = 12\nFinal answer: 12", "length"), completion(1, "2 + 2 = 4\nFinal answer: 4")]
    assert select_drafts(drafts, verify_drafts(drafts)).ranking == ("1", "0")
