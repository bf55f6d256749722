"""The selection package: registered signals and policies, the status a choice earns, replayed signals."""

from __future__ import annotations

from dataclasses import replace

import pytest

from deliberate.selection import POLICIES, SIGNALS, Candidate, get_policy, select, signal
from deliberate.selection.answers import majority as vote
from deliberate.selection.answers import same_answer

CHECKED = ("arithmetic",)


def drafts() -> list[Candidate]:
    """Three valid drafts, two of them agreeing on 20 (one unchecked); two invalid drafts agreeing on 30."""
    return [
        Candidate("a", 0, True, 0.9, answer="Final answer: 72", evidence=CHECKED),
        Candidate("b", 1, False, 0.4, answer="30"),
        Candidate("c", 2, True, 0.8, answer="20 apples", evidence=CHECKED),
        Candidate("d", 3, False, 0.5, answer="\\boxed{30}"),
        Candidate("e", 4, True, 0.8, answer="20"),
    ]


def test_every_policy_is_registered_with_a_description():
    assert {"weighted", "best_of", "majority"} <= set(POLICIES)
    assert all(p.description for p in POLICIES.values())
    with pytest.raises(ValueError, match="unknown selection policy 'nope'; registered: best_of, learned, majority"):
        get_policy("nope")


def test_best_of_takes_the_highest_checked_score():
    selection = select(drafts(), policy="best_of", max_selected=2)
    assert [c.draft_id for c in selection.selected] == ["a", "c"]
    assert selection.status == "computation_checked" and selection.policy == "best_of"  # arithmetic alone
    assert (
        selection.reason == "3 of 5 drafts passed every hard rule; computations checked by arithmetic, not the plan "
        "(no program of the round reached the same answer as a prose draft); ranked by the best_of policy"
    )


def test_weighted_lets_two_agreeing_checked_drafts_outvote_a_higher_score():
    selection = select(drafts(), max_selected=1)
    assert selection.selected[0].draft_id == "c"  # 0.8 + 0.3·2/3 ties 0.9 + 0.3·1/3; the answer share breaks it
    assert selection.signals["c"]["answer_share"] == selection.signals["e"]["answer_share"] == pytest.approx(2 / 3)
    assert selection.ranking == ("c", "a", "e", "d", "b")  # checked first; then invalid drafts by score


def test_majority_votes_over_every_answer_and_says_when_the_winner_failed_a_hard_rule():
    everything = drafts()
    everything.append(Candidate("f", 5, False, 0.1, answer="30.0"))
    selection = select(everything, policy="majority", max_selected=1)
    assert selection.selected[0].draft_id == "b"  # 30 three times (30, \boxed{30}, 30.0), 20 twice
    assert selection.signals["b"]["vote_share"] == pytest.approx(3 / 6)
    assert selection.status == "unverified"
    assert "which chose draft #1: it failed a hard rule" in selection.reason
    assert vote([c.answer for c in everything]) == "30"  # the evaluation's vote picks the same answer


def test_a_vote_tie_goes_to_the_answer_given_first():
    tie = [Candidate("x", 0, True, 0.1, answer="7"), Candidate("y", 1, True, 0.9, answer="8")]
    assert select(tie, policy="majority", max_selected=1).selected[0].draft_id == "x"
    assert vote(["7", "8"]) == "7"


def test_without_any_answer_a_vote_falls_back_to_the_best_valid_score():
    silent = [Candidate("x", 0, False, 0.9), Candidate("y", 1, True, 0.2)]
    selection = select(silent, policy="majority", max_selected=2)
    assert [c.draft_id for c in selection.selected] == ["y"] and selection.status == "unchecked"


def test_overrides_replace_computed_signals_as_a_replay_of_recorded_decisions_needs():
    recorded = {"c": {"answer_share": 1 / 3}, "e": {"answer_share": 1 / 3}, "a": {"answer_share": 1 / 3}}
    assert select(drafts(), max_selected=1, overrides=recorded).selected[0].draft_id == "a"


@pytest.fixture
def length_signal():
    @signal("text_length")
    def length(candidates):
        return [len(c.text) / 1000 for c in candidates]

    yield
    del SIGNALS["text_length"]


def test_a_registered_signal_is_computed_for_every_draft_and_weighed_by_its_name(length_signal):
    long_and_short = [
        Candidate("long", 0, True, 0.5, text="x" * 900, evidence=CHECKED),
        Candidate("short", 1, True, 0.6, text="x" * 100, evidence=CHECKED),
    ]
    assert select(long_and_short, max_selected=1).signals["long"]["text_length"] == pytest.approx(0.9)
    assert select(long_and_short, max_selected=1).selected[0].draft_id == "short"
    prefer_long = {"score": 1.0, "text_length": 0.5}
    assert select(long_and_short, max_selected=1, weights=prefer_long).selected[0].draft_id == "long"
    with pytest.raises(ValueError, match="registered twice"):
        signal("text_length")(lambda candidates: [])


def test_one_answer_identity():
    assert same_answer("The answer is $1,200.", "1200.00")
    assert same_answer("\\frac{1}{2}", "0.5")
    assert not same_answer("", "")
    assert not same_answer("12", "21")


def test_two_plans_are_one_answer_only_when_every_field_agrees():
    """Recorded: three different credit plans whose first offer was 5000 made a quorum 'on 5000'."""
    first = (
        '{"offers": [{"amount": 5000, "annual_rate": 0.079, "term_months": 36}, {"amount": 4500}], "disclosure": "x"}'
    )
    other = (
        '{"offers": [{"amount": 5000, "annual_rate": 0.079, "term_months": 36}, {"amount": 6000}], "disclosure": "x"}'
    )
    assert not same_answer(first, other)
    reordered = '{"disclosure":"x","offers":[{"term_months":36,"annual_rate":0.079,"amount":5000.0},{"amount":4500}]}'
    assert same_answer(first, reordered)
    assert not same_answer('{"selected_ids": [9, 23]}', '{"selected_ids": [23, 9]}')  # a list keeps its order
    assert same_answer("72", "72.0") and same_answer("{not json} 72", "72")  # other answers read as before


def test_five_drafts_answering_72_in_five_ways_share_one_answer():
    """`make run`'s example: the old Scheduler gave such drafts shares 0.2, 0.2, 0.6, 0.6, 0.6."""
    written = ["72", "Natalia sold altogether in April and May, which is 72 clips", "\\boxed{72}", "72.00", "$72"]
    drafts = [Candidate(str(i), i, True, 1.0, answer=answer, evidence=CHECKED) for i, answer in enumerate(written)]
    selection = select(drafts)
    assert {selection.signals[c.draft_id]["answer_share"] for c in drafts} == {1.0}
    assert {selection.signals[c.draft_id]["vote_share"] for c in drafts} == {1.0}


def test_every_draft_gets_the_policys_value_even_when_it_does_not_compete():
    selection = select(drafts(), max_selected=1)
    b = selection.signals["b"]
    assert selection.finals["b"] == pytest.approx(1.0 * b["score"] + 0.3 * b["agreement"] - 0.02 * b["latency"])


def test_a_program_and_a_prose_draft_that_agree_cross_check_each_other():
    mixed = [
        Candidate("p1", 0, True, 1.0, answer="72", kind="prose", evidence=CHECKED),
        Candidate("p2", 1, True, 1.0, answer="70", kind="prose", evidence=CHECKED),
        Candidate("g1", 2, True, 1.0, answer="72.0", kind="program", evidence=("program",)),
        Candidate("g2", 3, False, 0.0, answer="70", kind="program", finish_reason="LENGTH"),
    ]
    table = select(mixed).signals
    assert [table[c.draft_id]["cross_check"] for c in mixed] == [1.0, 0.0, 1.0, 0.0]  # g2 failed: no check
    assert [table[c.draft_id]["kind_share"] for c in mixed] == [0.5, 0.5, 1.0, 0.0]
    assert [table[c.draft_id]["cut_off"] for c in mixed] == [0.0, 0.0, 0.0, 1.0]


def test_a_prose_answer_a_program_computed_is_cross_checked_evidence_only_when_both_passed():
    prose = Candidate("prose", 0, True, 0.9, answer="72 clips", kind="prose")  # no substantive check of its own
    program = Candidate("program", 1, True, 0.9, answer="72", evidence=("program",), kind="program")
    selection = select([prose, program], max_selected=1)
    assert selection.selected[0].draft_id == "prose" and selection.status == "verified"
    assert selection.verified_by == ["cross_check"] and "cross_check" in selection.reason

    crashed = Candidate("program", 1, False, 0.0, answer="72", kind="program")  # the program check failed
    assert select([prose, crashed], max_selected=1).status == "unchecked"
    other = Candidate("program", 1, True, 0.9, answer="71", evidence=("program",), kind="program")
    assert select([prose, other], max_selected=1).signals["prose"]["evidence"] == 0.0


def test_a_picked_program_names_the_prose_draft_that_agreed_as_cross_check():
    prose = Candidate("prose", 0, True, 0.5, answer="72 clips", kind="prose")
    program = Candidate("program", 1, True, 0.9, answer="72", evidence=("program",), kind="program")
    selection = select([prose, program], max_selected=1)
    assert selection.selected[0].draft_id == "program" and selection.status == "verified"
    assert selection.verified_by == ["program", "cross_check"]
    alone = select([program, replace(prose, answer="71")], max_selected=1)
    assert alone.selected[0].draft_id == "program" and alone.status == "computation_checked"  # its plan unchecked
    assert alone.selected[0].evidence == ("program",) and alone.verified_by == []
