"""Streaming verification's prefix checks: a wrong equation fails its draft at the line it is on, as soon as
that line is complete; a structured answer's first ```json block is judged once closed; and never a draft the
full verification would accept."""

from __future__ import annotations

import json
import random

from deliberate.verifier.constraints import ConstraintSpec, compile_rules
from deliberate.verifier.rules import verify
from deliberate.verifier.streaming import ArithmeticPrefix, GrowingDraft, JsonFencePrefix

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


# --------------------------------------------------------------------------------------------------
# A structured answer: the first ```json block, once closed
# --------------------------------------------------------------------------------------------------

SCHEMA = json.dumps(
    {"type": "object", "properties": {"ad_ids": {"type": "array", "items": {"type": "string"}}}, "required": ["ad_ids"]}
)
OFF_SCHEMA = 'I pick these.\n```json\n{"ad_ids": [3, 4]}\n```\nThey fit the budget.\n'
UNPARSEABLE = "```json\nthe ids are a3 and a4\n```\nDone.\n"
RIGHT = '```json\n{"ad_ids": ["a3", "a4"]}\n```\n'


def fed_json(text: str, schema: str = SCHEMA, size: int = 3) -> list:
    draft = GrowingDraft(compile_rules(schema, [], {}).prefix_checks)
    return [f for piece in tokens_of(text, size) if (f := draft.extend(piece, 1))]


def test_a_closed_json_block_off_its_schema_fails_at_the_closing_fence():
    (failure,) = fed_json(OFF_SCHEMA)
    fence_end = OFF_SCHEMA.index("```\nThey") + len("```\n")
    assert (failure.rule_id, failure.chars, failure.line) == ("json_schema", fence_end, 4)
    assert failure.message.startswith("json_schema failed")


def test_a_closed_json_block_that_does_not_parse_fails_json_parse():
    (failure,) = fed_json(UNPARSEABLE)
    assert failure.rule_id == "json_parse" and failure.chars == UNPARSEABLE.index("Done")


def test_a_json_prefix_failure_is_a_failure_of_the_whole_draft_even_if_a_right_block_follows():
    """The first ```json block is the answer the full check reads: a later, right block does not replace it."""
    rule_set = compile_rules(SCHEMA, [], {})
    for text in (OFF_SCHEMA, OFF_SCHEMA + RIGHT):
        assert fed_json(text)
        full = verify(text, rule_set.rules, "stop", rule_set.output_schema)
        assert any(o.rule_id == "json_schema" and not o.passed for o in full.outcomes)


def test_json_is_not_judged_before_it_is_final():
    assert fed_json('```json\n{"ad_ids": [3, 4]}\n') == [], "unclosed: the draft may be cut, and repaired"
    assert fed_json('{"ad_ids": [3, 4]}\n') == [], "no fence: a later ```json block would win"
    assert fed_json('```\n{"ad_ids": [3, 4]}\n```\n') == [], "unlabelled: a later ```json block would win"
    for size in (1, 4, 50):
        assert fed_json("Here:\n" + RIGHT + "Done.", size=size) == []


def test_a_structured_answer_gets_the_json_prefix_check():
    assert any(isinstance(c, JsonFencePrefix) for c in compile_rules(SCHEMA, [], {}).prefix_checks)
    assert compile_rules("", [ARITHMETIC], {}).prefix_checks == (ArithmeticPrefix(),), "free text: none"


def test_json_prefix_failures_agree_with_the_full_check_on_composed_drafts():
    """Drafts composed at random from prose, fences and JSON pieces: whenever the prefix check fails one, the full
    verification fails it on the same rule."""
    pieces = [
        *("Here you go.\n", "```json\n", "```\n", "```JSON\n", '{"ad_ids": ["a1"]}\n', '{"ad_ids": [1]}\n'),
        *("{'ad_ids': ['a2'],}\n", "[1, 2]\n", "not json\n", '{"x": 1}\n', "``` \n", "Final answer: a1\n"),
    ]
    rule_set = compile_rules(SCHEMA, [], {})
    rng = random.Random(13)
    failed = 0
    for _ in range(400):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 7)))
        failures = fed_json(text, size=rng.randint(1, 9))
        if failures:
            failed += 1
            full = verify(text, rule_set.rules, "stop", rule_set.output_schema)
            assert any(o.rule_id == failures[0].rule_id and not o.passed for o in full.outcomes), text
    assert failed > 50, "the composition reaches the check"
