"""Extraction of answers, numbers and JSON from drafts: properties, examples and hostile inputs."""

import json
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deliberate.selection.numbers import extract_number
from deliberate.verifier.parsing import (
    MAX_JSON_DEPTH,
    extract_final_answer,
    extract_json,
    find_final_answer,
    parse_json,
)

SENTENCES = st.sampled_from(
    [
        "The total is {} dollars.",
        "We end up with {}",
        "{} apples remain in the basket.",
        "So x = {}!",
        "Adding it all up gives ({}) in the end",
    ]
)
FINAL_MARKERS = st.sampled_from(
    ["Final answer:", "FINAL ANSWER:", "The final answer is", "**Final Answer:**", "####", "Answer:"]
)
SAFE_TEXT = st.text(alphabet="abcdefghijklmnopqrstuvwxyz ABC0123456789", max_size=12)


def written(value, with_commas: bool) -> str:
    return f"{value:,f}" if with_commas else f"{value:f}"


# --------------------------------------------------------------------------------------------------
# Numbers
# --------------------------------------------------------------------------------------------------


@settings(deadline=None)
@given(st.integers(min_value=-(10**40), max_value=10**40), st.booleans(), SENTENCES)
def test_any_integer_in_a_sentence_is_extracted_exactly(number, with_commas, sentence):
    text = sentence.format(f"{number:,}" if with_commas else str(number))

    assert extract_number(text) == Decimal(number)
    assert extract_final_answer(text) == str(number)


@settings(deadline=None)
@given(
    st.integers(min_value=0, max_value=8).flatmap(
        lambda places: st.decimals(
            min_value=-(10**15), max_value=10**15, places=places, allow_nan=False, allow_infinity=False
        )
    ),
    st.booleans(),
    SENTENCES,
)
def test_any_decimal_in_a_sentence_is_extracted_exactly(number, with_commas, sentence):
    text = sentence.format(written(number, with_commas))

    assert extract_number(text) == number
    assert extract_final_answer(text) == f"{number:f}"  # commas dropped, decimal places kept


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("It costs $1,200.50 in total", Decimal("1200.50")),
        ("$18.00", Decimal("18.00")),
        ("a drop of -7 degrees", Decimal("-7")),
        ("a drop of −7 degrees", Decimal("-7")),  # Unicode minus
        ("a loss of -$5 and then $-3", Decimal("-5")),
        ("about 15% more", Decimal("15")),
        ("use 3/4 cup", Fraction(3, 4)),
        ("pay $5/hour", Decimal("5")),
        ("1,2345", Decimal("1")),  # not a thousands group: the first number is 1
        ("- 5 apples", Decimal("5")),  # a bullet, not a minus sign
        ("range 3-5", Decimal("3")),
    ],
)
def test_extract_number_examples(text, expected):
    assert extract_number(text) == expected


@pytest.mark.parametrize("text", ["", "blue", "v2", "on 12/25/2024", "x/0", "1/0", "abc123"])
def test_extract_number_finds_nothing(text):
    assert extract_number(text) is None


# --------------------------------------------------------------------------------------------------
# Final answers
# --------------------------------------------------------------------------------------------------


@settings(deadline=None)
@given(
    st.lists(st.integers(min_value=-(10**9), max_value=10**9), min_size=4, max_size=4),
    st.integers(min_value=-(10**9), max_value=10**9),
    FINAL_MARKERS,
)
def test_extract_final_answer_prefers_the_final_answer_line(others, answer, marker):
    before_1, before_2, after_1, after_2 = others
    text = f"First {before_1} and then {before_2}.\n{marker} {answer:,}\nDouble-check: {after_1} minus {after_2}."

    assert extract_final_answer(text) == str(answer)
    assert find_final_answer(text).from_final_line


@settings(deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=10**6), min_size=2, max_size=5))
def test_the_last_final_answer_line_wins(answers):
    text = "\n".join(f"Final answer: {answer}\nHmm, let me recheck." for answer in answers)

    assert extract_final_answer(text) == str(answers[-1])


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Final answer: 42", "42"),
        ("so the final answer is $1,200.50.", "1200.50"),
        ("#### 72", "72"),
        ("Answer: 18", "18"),
        ("**Answer:** 18", "18"),
        ("final ANSWER = $18.00", "18.00"),
        ("Final answer:\n\n  **-1,234.5**\n", "-1234.5"),
        ("Final answer: 42 apples.", "42 apples"),
        ("Final answer: blue", "blue"),
        ("Final answer: 7\nFinal answer:", "7"),  # an empty marker line does not hide the earlier answer
        ("3 + 4 is 7, times 2 is 14", "14"),
        ("To answer the question, 5 + 5 = 10", "10"),
    ],
)
def test_extract_final_answer_examples(text, expected):
    assert extract_final_answer(text) == expected


def test_a_draft_without_final_line_or_number_has_no_answer():
    assert extract_final_answer("I am not sure about this one.") is None
    assert find_final_answer("7 is the answer").from_final_line is False


# --------------------------------------------------------------------------------------------------
# JSON
# --------------------------------------------------------------------------------------------------

JSON_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=12,
)
SAFE_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | SAFE_TEXT,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(SAFE_TEXT, children, max_size=4),
    max_leaves=12,
)


@settings(deadline=None)
@given(st.dictionaries(st.text(), JSON_VALUES, max_size=5), st.booleans())
def test_extract_json_round_trips_json_in_free_text(value, ensure_ascii):
    text = f"Here is the plan:\n{json.dumps(value, ensure_ascii=ensure_ascii)}\nHope that helps."

    assert extract_json(text) == (value, None)


@settings(deadline=None)
@given(st.dictionaries(st.text(), JSON_VALUES, max_size=5), st.booleans())
def test_extract_json_round_trips_a_fenced_block(value, ensure_ascii):
    fenced = f"```json\n{json.dumps(value, ensure_ascii=ensure_ascii, indent=2)}\n```"
    text = f"I considered [1] and {{draft}} first.\n{fenced}\nThat is {{all}}."

    assert extract_json(text) == (value, None)


@settings(deadline=None)
@given(st.dictionaries(SAFE_TEXT, SAFE_JSON_VALUES, min_size=1, max_size=5))
def test_extract_json_repairs_curly_quotes(value):
    straight = json.dumps(value)
    pieces = straight.split('"')  # safe text holds no quotes, so they alternate open/close
    curly = pieces[0] + "".join(("“" if index % 2 else "”") + piece for index, piece in enumerate(pieces[1:], start=1))
    parsed = parse_json(f"Result: {curly}")

    assert (parsed.value, parsed.error) == (value, None)
    assert parsed.repairs == ("curly quotes",)


def with_trailing_commas(value: object) -> str:
    """JSON with a comma after the last item of every non-empty array and object."""
    if isinstance(value, list):
        return "[" + "".join(with_trailing_commas(item) + ", " for item in value) + "]"
    if isinstance(value, dict):
        return "{" + "".join(f"{json.dumps(k)}: {with_trailing_commas(v)}, " for k, v in value.items()) + "}"
    return json.dumps(value)


@settings(deadline=None)
@given(
    st.recursive(JSON_VALUES, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3))
)
def test_trailing_commas_are_dropped_outside_strings_only(value):
    """Fixed exactly (not by json_repair): strings that hold `, ]` or `, }` keep them."""
    container = [value, "a, ]", {"b, }": ", }"}]
    parsed = parse_json("Here: " + with_trailing_commas(container))
    assert (parsed.value, parsed.error, parsed.repairs) == (container, None, ("trailing commas",))


@pytest.mark.parametrize(
    ("text", "expected", "repairs"),
    [
        ('{"a": 1}', {"a": 1}, ()),
        ("[1, 2, 3]", [1, 2, 3], ()),
        ("{“a”: “b”,}", {"a": "b"}, ("curly quotes", "trailing commas")),
        ("{'a': 1, b: 2,}", {"a": 1, "b": 2}, ("single quotes", "trailing commas", "unquoted keys")),
        ('{"ids": [1, 2', {"ids": [1, 2]}, ("unclosed brackets",)),
        ('{"a": "say “hi”",}', {"a": "say “hi”"}, ("trailing commas",)),
        ('{"k": "}{]["} and more }', {"k": "}{]["}, ()),
        ('{"a": "\\"}"}', {"a": '"}'}, ()),
        ("```\n[1, 2]\n```", [1, 2], ()),
        ('```python\nx = {1: 2}\n```\n```json\n{"a": 1}\n```', {"a": 1}, ()),
        ('```json\n{"a": [1, 2', {"a": [1, 2]}, ("unclosed brackets",)),  # cut off mid-block
        ('{"a": "\\ud83d\\ude00"}', {"a": "😀"}, ()),  # a whole pair is one character
        ('{"a": "\\ud83d!", "\\udfff": 1}', {"a": "\ufffd!", "\ufffd": 1}, ("unpaired surrogate escapes",)),
    ],
)
def test_parse_json_examples(text, expected, repairs):
    parsed = parse_json(text)

    assert (parsed.value, parsed.error, parsed.repairs) == (expected, None, repairs)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("no json here", "no JSON object or array found in the draft"),
        ("", "no JSON object or array found in the draft"),
        ("[" * (MAX_JSON_DEPTH + 1), f"JSON nesting is deeper than {MAX_JSON_DEPTH} levels"),
    ],
)
def test_extract_json_errors(text, error):
    assert extract_json(text) == (None, error)


def test_extract_json_rejects_junk_that_repair_would_invent():
    value, error = extract_json("pick {x} now")

    assert value is None
    assert error.startswith("invalid JSON (") and error.endswith("nothing parseable to repair")


# --------------------------------------------------------------------------------------------------
# Hostile inputs: every function returns, quickly, without raising
# --------------------------------------------------------------------------------------------------

HOSTILE_TEXTS = {
    "deep_arrays": "[" * 100_000,
    "deep_objects": '{"a":' * 100_000,
    "deep_fenced": "```json\n" + "[" * 100_000 + "\n```",
    "one_megabyte": "x" * 1_000_000,
    "one_megabyte_of_braces": "{" + "a," * 500_000,
    "just_under_scan_limit": "{" + '"' * 199_000,
    "just_under_repair_limit": "{" + "'a':" * 4_999,
    "surrogates": 'Final answer: \ud800 {"a": "\udfff\ud800"} [\ud800] 4\ud8005',
    "ten_thousand_digits": "1" * 10_000,
    "ten_thousand_digit_answer": "Final answer: " + "9" * 10_000,
    "ten_thousand_digit_json": '{"n": ' + "1" * 10_000 + "}",
    "digits_and_commas": "1," * 300_000,
    "fraction_flood": "1/" * 300_000,
    "fence_flood": "```json\n" * 25_000,
    "empty_answer_lines": "Final answer:\n" * 100_000,
    "empty_gsm8k_markers": "####\n\n" * 150_000,
}


@pytest.mark.timeout(10)
@pytest.mark.parametrize("text", HOSTILE_TEXTS.values(), ids=HOSTILE_TEXTS.keys())
def test_hostile_inputs_return(text):
    extract_final_answer(text)
    extract_number(text)
    value, error = extract_json(text)

    assert (value is None) != (error is None)


@pytest.mark.timeout(10)
def test_hostile_input_errors_are_explained():
    assert extract_json("x" * 1_000_000) == (
        None,
        "draft is too large to search for JSON: 1000000 characters > 200000",
    )
    assert extract_json("[" * 100_000)[1] == f"JSON nesting is deeper than {MAX_JSON_DEPTH} levels"
    assert extract_number("1" * 10_000) is None
    assert extract_final_answer("1" * 10_000) is None
    assert extract_json('{"a": "\ud800"}') == ({"a": "\ud800"}, None)


@pytest.mark.parametrize("not_text", [None, b"Final answer: 4", 42])
def test_non_text_input_does_not_raise(not_text):
    assert extract_final_answer(not_text) is None
    assert extract_number(not_text) is None
    assert extract_json(not_text)[0] is None


# --------------------------------------------------------------------------------------------------
# LaTeX answers
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("So she sold \\boxed{72} clips.", "72"),
        ("First \\boxed{24}, then in total \\boxed{72}.", "72"),  # the last boxed wins
        ("\\boxed{72}\nFinal answer: 70", "72"),  # boxed is the model's own answer mark
        ("The answer is \\boxed{\\$1,200}.", "1200"),
        ("\\[ \\boxed{\\frac{3}{4}} \\]", "3/4"),
        ("\\boxed{72 \\text{ clips}}", "72 clips"),
        ("\\boxed{{72}}", "72"),
        ("Final answer: \\( 72 \\)", "72"),
        ("Final answer: $72$.", "72"),
        ("The answer is $$1{,}200$$", "1200"),
        ("The answer is \\$1{,}200.", "1200"),
        ("48 + 24 = \\frac{144}{2}", "144/2"),  # the last number, LaTeX read first
    ],
)
def test_latex_answers_are_read(text, answer):
    found = find_final_answer(text)
    assert found is not None and found.text == answer


def test_an_unclosed_boxed_falls_back_to_the_usual_rules():
    found = find_final_answer("Final answer: 72\n\\boxed{7")
    assert found is not None and found.text == "72"


def test_boxed_extraction_is_bounded_on_hostile_input():
    text = "\\boxed{" * 20_000 + "1"
    assert find_final_answer(text) is not None  # no crash, no quadratic blow-up
