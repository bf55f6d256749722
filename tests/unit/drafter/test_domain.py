"""Domain logic of the Drafter (strategies, prompts), Scheduler (selection) and Refiner (prompt, trace)."""

from __future__ import annotations

import pytest

from deliberate.drafter.prompts import DEFAULT_STRATEGIES, draft_user_message, strategies_for
from deliberate.refiner.prompts import SelectedDraft, refine_user_message, thinking_trace_of
from deliberate.selection import Candidate as Scored
from deliberate.selection import select


def test_each_draft_gets_its_own_strategy():
    strategies = strategies_for(5, [])
    assert len(strategies) == len(set(strategies)) == 5


def test_client_hints_come_first_and_defaults_fill_the_rest():
    strategies = strategies_for(3, ["Be greedy.", ""])
    assert strategies[0] == "Be greedy."
    assert len(set(strategies)) == 3
    assert all(s in DEFAULT_STRATEGIES for s in strategies[1:])


def test_more_drafts_than_strategies_cycles():
    assert len(strategies_for(len(DEFAULT_STRATEGIES) + 3, [])) == len(DEFAULT_STRATEGIES) + 3


def test_draft_prompt_carries_strategy_schema_and_feedback():
    free = draft_user_message("What is 2+2?", "Work backwards.", None)
    assert "Work backwards." in free and "Final answer:" in free
    structured = draft_user_message("Pick ads.", "Greedy.", {"type": "object"}, feedback="budget_check failed")
    assert '{"type": "object"}' in structured and "budget_check failed" in structured


def test_selection_prefers_valid_drafts_by_score_then_index():
    drafts = [
        Scored("a", 0, valid=False, score=0.9),
        Scored("b", 1, valid=True, score=0.7),
        Scored("c", 2, valid=True, score=0.8, evidence=("budget_check",)),
        Scored("d", 3, valid=True, score=0.8),
    ]
    selection = select(drafts, max_selected=2)
    assert [d.draft_id for d in selection.selected] == ["c", "d"]
    assert selection.status == "verified"
    assert selection.reason == "3 of 4 drafts passed every hard rule; checked by budget_check"


def test_selection_without_a_valid_draft_is_unverified_and_alone():
    selection = select([Scored("a", 0, False, 0.2), Scored("b", 1, False, 0.5)], max_selected=2)
    assert [d.draft_id for d in selection.selected] == ["b"]
    assert selection.status == "unverified"


def test_selection_needs_drafts():
    with pytest.raises(ValueError):
        select([], max_selected=2)


def test_thinking_trace_names_the_real_draft_score_and_rules():
    best = SelectedDraft(3, "text", 0.92, True, ("budget_check", "category_check"), ())
    assert thinking_trace_of(best) == "[THINKING_TRACE: Draft#3 scored 0.92, passed budget_check and category_check]"
    partial = SelectedDraft(1, "t", 0.5, False, ("a", "b", "c"), ("d",))
    assert thinking_trace_of(partial) == "[THINKING_TRACE: Draft#1 scored 0.50, passed a, b and c, failed d]"


def test_refine_prompt_lists_candidates_best_first():
    drafts = [
        SelectedDraft(2, "first text", 0.9, True, (), ()),
        SelectedDraft(0, "second text", 0.7, True, (), ()),
    ]
    message = refine_user_message("Q?", drafts, None)
    assert message.index("first text") < message.index("second text")
    assert "Candidate 1 (verified, score 0.90)" in message


def test_a_redraft_round_tries_other_strategies():
    first, second = strategies_for(3, [], round_=0), strategies_for(3, [], round_=1)
    assert not set(first) & set(second)
