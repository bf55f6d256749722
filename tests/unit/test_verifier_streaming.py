"""Streaming verification's prefix checks: a wrong equation fails its draft at the line it is on, as soon as
that line is complete, and never a draft the full verification would accept."""

from __future__ import annotations

from deliberate.verifier.constraints import ConstraintSpec, compile_rules
from deliberate.verifier.rules import verify
from deliberate.verifier.streaming import ArithmeticPrefix, GrowingDraft

WRONG_ON_LINE_3 = "April: 48 clips.\nMay: 48 / 2 = 24 clips.\nTotal: 48 + 24 = 73 clips.\nFinal answer: 73\n"
ARITHMETIC = ConstraintSpec(index=0, kind="rule_pack", source="arithmetic")


def tokens_of(text: str, size: int = 3) -> list[str]:
    """The text in pieces of `size` characters, as a Drafter's deltas would bring it."""
    return [text[i : i + size] for i in range(0, len(text), size)]


def fed(text: str, size: int = 3) -> tuple[GrowingDraft, list]:
    draft = GrowingDraft((ArithmeticPrefix(),))
    failures = [f for piece in tokens_of(text, size) if (f := draft.extend(piece, 1))]
    return draft, failures


def test_a_wrong_equation_fails_the_draft_at_the_end_of_its_line():
    draft, failures = fed(WRONG_ON_LINE_3)
    (failure,) = failures
    line_end = WRONG_ON_LINE_3.index("clips.\nFinal") + len("clips.\n")
    assert (failure.rule_id, failure.line, failure.chars) == ("arithmetic", 3, line_end)
    assert failure.tokens == -(-line_end // 3), "the delta that completed the line"
    assert "48 + 24 = 73 (actually 72)" in failure.message and "(line 3, char" in failure.message
    assert draft.failure is failure and draft.extend("more text\n", 1) is None, "reported once"


def test_an_incomplete_line_is_not_judged_until_its_newline_arrives():
    draft = GrowingDraft((ArithmeticPrefix(),))
    assert draft.extend("48 + 24 = 7", 1) is None  # "= 72" may still come
    assert draft.extend("2 clips", 1) is None
    assert draft.extend("\n", 1) is None, "48 + 24 = 72 is right"
    assert draft.extend("2 * 3 = 7", 1) is None
    failure = draft.extend(" apples\n", 1)
    assert failure is not None and failure.line == 2 and failure.tokens == 5


def test_a_prefix_failure_is_a_failure_of_the_whole_draft_too():
    rule_set = compile_rules("", [ARITHMETIC], {})
    _, failures = fed(WRONG_ON_LINE_3)
    assert failures
    full = verify(WRONG_ON_LINE_3, rule_set.rules)
    assert not full.valid and any(o.rule_id == "arithmetic" and not o.passed for o in full.outcomes)


def test_right_arithmetic_never_fails_on_any_prefix():
    right = "May: 48 / 2 = 24 clips.\nTotal: 48 + 24 = 72.\n10 / 4 = 2.5\nFinal answer: 72"
    for size in (1, 2, 5, 50):
        _, failures = fed(right, size)
        assert failures == []


def test_only_a_hard_arithmetic_pack_checks_prefixes():
    assert compile_rules("", [ARITHMETIC], {}).prefix_checks == (ArithmeticPrefix(),)
    soft = ConstraintSpec(index=0, kind="rule_pack", source="arithmetic", soft=True)
    assert compile_rules("", [soft], {}).prefix_checks == ()
    assert compile_rules("", [], {}).prefix_checks == ()
