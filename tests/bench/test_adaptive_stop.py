"""Adaptive draft counts replayed on recorded mixed rounds (bench/deliberate_bench/replays/stopping.py)."""

from __future__ import annotations

from deliberate_bench.eval.replay import DEFAULT_MIX
from deliberate_bench.replays.stopping import AdaptivePolicy, agreement_precision, choose, compare, with_policy, without


def draft(index: int, kind: str, answer: str, tokens: int, valid: bool = True, confidence=None) -> dict:
    return {"round": 0, "index": index, "kind": kind, "answer": answer, "completion_tokens": tokens, "valid": valid,
            "score": 1.0 if valid else 0.0, "evidence": ["program"] if kind == "program" and valid else [],
            **({"confidence": {"token_confidences": confidence}} if confidence else {})}  # fmt: skip


def record(gold: str, prose: list[tuple[str, int]], programs: list[tuple[str, int]]) -> dict:
    drafts = [draft(i, "prose", a, t) for i, (a, t) in enumerate(prose)]
    drafts += [draft(len(prose) + i, "program", a, t) for i, (a, t) in enumerate(programs)]
    return {"task": "gsm8k", "gold": gold, "solve": {"drafts": drafts}}


AGREEING = record("7", [("7", 200)] * 4, [("7", 80)] * 4)
SPLIT = record("7", [("7", 200), ("3", 200), ("7", 200), ("7", 200)], [("3", 80)] * 4)
CODE_FIRST = AdaptivePolicy(("program", "prose", "prose", "prose", "prose"), start=1, quorum=3, cross_modal=True)


def test_a_program_and_a_prose_draft_that_agree_settle_the_round():
    outcome = with_policy(AGREEING, CODE_FIRST)
    assert (outcome.drafts, outcome.tokens, outcome.answer) == (2, 280, "7")
    prose, programs = DEFAULT_MIX
    assert without(AGREEING).tokens == prose * 200 + programs * 80, "the default round, every draft whole"


def test_without_agreement_the_round_adds_drafts_up_to_its_order():
    no_cross = AdaptivePolicy(CODE_FIRST.order, start=1, quorum=9, cross_modal=False)
    assert with_policy(SPLIT, no_cross).drafts == 5
    assert with_policy(SPLIT, CODE_FIRST).drafts == 3  # program 3, prose 7, prose 3: cross-modal on "3"


def test_a_draft_stopped_on_confidence_spends_its_tokens_and_leaves_the_vote():
    low = [9.0] * 40 + [0.5] * 100
    shaky = record("7", [("7", 140)] * 4, [("3", 140)] * 4)
    shaky["solve"]["drafts"][4]["confidence"] = {"token_confidences": low}
    stops = {"limits": {"program": 5.0}, "stop_point": lambda series, limit: 48}
    outcome = with_policy(shaky, CODE_FIRST, **stops)
    assert outcome.tokens == 48 + 3 * 140 and outcome.answer == "7"  # the program stopped at 48 tokens


def test_compare_and_choose_count_tokens_and_accuracy_on_the_same_drafts():
    result = compare([AGREEING, SPLIT], CODE_FIRST)
    assert result["n"] == 2
    assert result["right_without"] == sum(without(r).answer == "7" for r in (AGREEING, SPLIT))
    assert result["token_ratio"] < 1.0
    policy, found = choose([AGREEING, SPLIT], max_loss_points=0.0)
    assert found["accuracy_change_points"] >= 0.0 and found["token_ratio"] <= result["token_ratio"]


def test_agreement_precision_counts_agreeing_pairs_and_the_right_ones():
    found = agreement_precision([AGREEING, SPLIT])
    assert found["prose_and_program"] == {"agree": 1, "right": 1}  # SPLIT's first prose says 7, its program 3
    assert found["two_prose"] == {"agree": 1, "right": 1}  # SPLIT's first two prose drafts disagree
