"""The first rule set: literal messages, fast-fail, scoring, crash containment and schemas."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deliberate.verifier import rules
from deliberate.verifier.rules import (
    RuleOutcome,
    Verdict,
    score_outcomes,
    verify_text,
)

PLAN_SCHEMA = {
    "type": "object",
    "properties": {"selected_ids": {"type": "array", "items": {"type": "integer"}, "minItems": 3}},
    "required": ["selected_ids"],
}


def messages(verdict: Verdict) -> list[str]:
    return [outcome.message for outcome in verdict.outcomes]


def rule_ids(verdict: Verdict) -> list[str]:
    return [outcome.rule_id for outcome in verdict.outcomes]


# --------------------------------------------------------------------------------------------------
# Answer rules (no schema)
# --------------------------------------------------------------------------------------------------


def test_a_good_numeric_draft_passes_every_rule():
    verdict = verify_text("6 boxes of 12 eggs: 6 * 12 = 72\nFinal answer: 72", None)

    assert verdict.valid
    assert verdict.score == 1.0
    assert verdict.extracted_answer == "72"
    assert messages(verdict) == [
        "complete passed",
        "final_answer passed: 72",
        "numeric_answer passed: 72",
        "explicit_final_line passed",
    ]
    assert [outcome.hard for outcome in verdict.outcomes] == [False, True, True, False]
    assert all(outcome.duration_s >= 0 for outcome in verdict.outcomes)


def test_numeric_answer_names_the_number_the_vote_reads():
    verdict = verify_text("48 / 2 = 24\nFinal answer: 48 + 24 = 72", None)

    assert verdict.valid
    assert "numeric_answer passed: 72" in messages(verdict), "the stated result, not the first operand"


def test_final_answer_failure_message_and_fast_fail():
    verdict = verify_text("I am not sure.", None)

    assert not verdict.valid
    assert rule_ids(verdict) == ["complete", "final_answer"]  # stops at the first hard failure
    assert verdict.outcomes[-1].message == ("final_answer failed: no final-answer line and no number in the draft")
    assert verdict.extracted_answer == ""


def test_numeric_answer_failure_message():
    verdict = verify_text("The sky is blue.\nFinal answer: blue", None)

    assert not verdict.valid
    assert verdict.outcomes[-1] == RuleOutcome(
        rule_id="numeric_answer",
        passed=False,
        message="numeric_answer failed: final answer 'blue' is not a number",
        hard=True,
        duration_s=verdict.outcomes[-1].duration_s,
    )
    assert verdict.extracted_answer == "blue"


def test_numeric_answer_failure_quotes_a_bounded_answer():
    verdict = verify_text("Final answer: " + "x" * 10_000, None)

    assert verdict.outcomes[-1].message == f"numeric_answer failed: final answer '{'x' * 59}…' is not a number"


def test_explicit_final_line_is_soft():
    verdict = verify_text("3 + 4 = 7, so 7", None)

    assert verdict.valid
    assert verdict.outcomes[-1].message == (
        "explicit_final_line failed: no 'Final answer:' line; used the last number in the draft"
    )
    assert verdict.score == pytest.approx((0.5 + 1.0 + 1.0) / (0.5 + 1.0 + 1.0 + 0.5))


def test_complete_is_soft_and_explains_a_cut_off_draft():
    verdict = verify_text("Step 1: 12 * 6 = 72\nFinal answer: 72", None, finish_reason="length")

    assert verdict.valid
    assert verdict.outcomes[0].message == "complete failed: draft was cut off at the token budget"
    assert verdict.score == pytest.approx((1.0 + 1.0 + 0.5) / (0.5 + 1.0 + 1.0 + 0.5))


def test_a_hard_failure_scores_the_rules_that_ran():
    verdict = verify_text("Let me think", None, finish_reason="length")

    assert not verdict.valid
    assert verdict.score == 0.0
    assert rule_ids(verdict) == ["complete", "final_answer"]


# --------------------------------------------------------------------------------------------------
# JSON rules (with a schema)
# --------------------------------------------------------------------------------------------------


def test_a_schema_example_passes():
    verdict = verify_text('Here you go:\n```json\n{"selected_ids": [1, 2, 3]}\n```', PLAN_SCHEMA)

    assert verdict.valid
    assert verdict.score == 1.0
    assert messages(verdict) == ["complete passed", "json_parse passed", "json_schema passed"]
    assert verdict.extracted_answer == '{"selected_ids":[1,2,3]}'


def test_a_schema_example_fails_with_the_path_in_the_message():
    verdict = verify_text('{"selected_ids": [1, 2]}', PLAN_SCHEMA)

    assert not verdict.valid
    assert verdict.outcomes[-1].message == "json_schema failed at $.selected_ids: [1, 2] is too short"
    assert verdict.score == pytest.approx(1.5 / 2.5)


def test_json_schema_failure_deep_in_the_document():
    verdict = verify_text('{"selected_ids": [1, "two", 3]}', PLAN_SCHEMA)

    assert verdict.outcomes[-1].message == "json_schema failed at $.selected_ids[1]: 'two' is not of type 'integer'"


def test_json_parse_failure_message():
    verdict = verify_text("I could not decide.", PLAN_SCHEMA)

    assert not verdict.valid
    assert rule_ids(verdict) == ["complete", "json_parse"]
    assert verdict.outcomes[-1].message == "json_parse failed: no JSON object or array found in the draft"


def test_json_parse_names_the_repair():
    verdict = verify_text("{“selected_ids”: [4, 5, 6]}", PLAN_SCHEMA)

    assert verdict.valid
    assert verdict.outcomes[1].message == "json_parse passed after repair: curly quotes"


def test_a_declared_schema_dialect_is_honoured():
    # Tuple-style "items" is draft-07; under Draft 2020-12 it would be an invalid schema.
    draft_07 = {"$schema": "http://json-schema.org/draft-07/schema#", "items": [{"type": "integer"}]}

    assert verify_text("[1]", draft_07).valid
    assert verify_text('["one"]', draft_07).outcomes[-1].message == (
        "json_schema failed at $[0]: 'one' is not of type 'integer'"
    )


def test_an_invalid_schema_fails_json_schema_with_a_reason():
    verdict = verify_text('{"a": 1}', {"type": "nope"})

    assert not verdict.valid
    assert verdict.outcomes[-1].message == (
        "json_schema failed: output schema is invalid at $.type: 'nope' is not valid under any of the given schemas"
    )


# --------------------------------------------------------------------------------------------------
# Engine guarantees
# --------------------------------------------------------------------------------------------------


def test_a_crashing_rule_is_a_failed_hard_rule(monkeypatch):
    def explode(text):
        raise RuntimeError("parser exploded\nwith a traceback-like second line")

    monkeypatch.setattr(rules, "find_final_answer", explode)
    verdict = verify_text("Final answer: 4", None)

    assert not verdict.valid
    assert verdict.outcomes[-1].rule_id == "final_answer"
    assert verdict.outcomes[-1].hard
    assert verdict.outcomes[-1].message == (
        "final_answer crashed: RuntimeError: parser exploded with a traceback-like second line"
    )


def test_a_crashing_soft_rule_also_stops_the_run(monkeypatch):
    def explode(draft):
        raise KeyError("finish_reason")

    monkeypatch.setattr(rules, "ANSWER_RULES", (rules.Rule("complete", hard=False, check=explode),))
    verdict = verify_text("Final answer: 4", None)

    assert verdict.outcomes[0].message == "complete crashed: KeyError: 'finish_reason'"
    assert not verdict.valid


def test_score_weights_hard_rules_double():
    outcomes = [
        RuleOutcome("hard_pass", True, "", hard=True, duration_s=0.0),
        RuleOutcome("soft_fail", False, "", hard=False, duration_s=0.0),
    ]

    assert score_outcomes(outcomes) == pytest.approx(1.0 / 1.5)
    assert score_outcomes([]) == 0.0


DRAFT_TEXTS = st.one_of(
    st.text(max_size=300),
    st.builds(
        lambda words, number: f"{words}\nFinal answer: {number}",
        st.text(max_size=50),
        st.integers() | st.text(max_size=10),
    ),
    st.builds(json.dumps, st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5))),
)


@settings(deadline=None)
@given(
    DRAFT_TEXTS,
    st.sampled_from([None, PLAN_SCHEMA, {"type": "object"}]),
    st.sampled_from(["stop", "length", ""]),
)
def test_verdicts_are_deterministic_and_consistent(text, schema, finish_reason):
    first = verify_text(text, schema, finish_reason)
    second = verify_text(text, schema, finish_reason)

    def without_durations(verdict):
        return [(o.rule_id, o.passed, o.message, o.hard) for o in verdict.outcomes]

    assert without_durations(first) == without_durations(second)
    assert first.extracted_answer == second.extracted_answer
    assert 0.0 <= first.score <= 1.0
    assert first.valid == all(outcome.passed for outcome in first.outcomes if outcome.hard)
    hard_failures = [outcome for outcome in first.outcomes if outcome.hard and not outcome.passed]
    assert hard_failures in ([], [first.outcomes[-1]])  # fast-fail: a hard failure ends the run


@pytest.mark.timeout(10)
@pytest.mark.parametrize(
    "text",
    [
        "[" * 100_000,
        "x" * 1_000_000,
        "Final answer: \ud800",
        '{"selected_ids": ["\ud800"]}',
        "Final answer: " + "9" * 10_000,
    ],
    ids=["deep_nesting", "one_megabyte", "surrogate_answer", "surrogate_json", "ten_thousand_digits"],
)
@pytest.mark.parametrize("schema", [None, PLAN_SCHEMA], ids=["answer_rules", "json_rules"])
def test_hostile_drafts_get_a_verdict(text, schema):
    verdict = verify_text(text, schema)

    assert not verdict.valid
    assert not any("crashed" in outcome.message for outcome in verdict.outcomes)
