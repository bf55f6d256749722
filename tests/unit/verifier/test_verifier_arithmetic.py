"""Exact re-computation of a draft's arithmetic: properties, examples, GSM8K gold answers, hostile inputs."""

import json
import re
from decimal import ROUND_DOWN, ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal, localcontext
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from deliberate.verifier.arithmetic import (
    MAX_EQUATIONS,
    ArithmeticReport,
    WrongEquation,
    check_arithmetic,
    computations,
    format_wrong,
)

ROOT = Path(__file__).resolve().parents[3]
GSM8K = [ROOT.parent / "shared/data/gsm8k/train.jsonl", ROOT / "tests/data/gsm8k_sample.jsonl"]

SENTENCES = st.sampled_from(
    [
        "{}",
        "So {}.",
        "We get {} apples in total.",
        "- {}",
        "**{}**",
        "First, {}, then we add the rest.",
        "Step 2: {}\nNext we check it.",
    ]
)
OPERATIONS = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a / b,
}
# How drafts write each operation.
SYMBOLS = {"+": ["+"], "-": ["-", "−"], "*": ["*", "x", "×", "·", "⋅", "\\times"], "/": ["/", "÷", "\\div"]}


@st.composite
def numbers(draw, max_places: int = 3) -> tuple[str, Fraction]:
    """A small integer or decimal as a draft writes it, and its exact value."""
    places = draw(st.integers(min_value=0, max_value=max_places))
    units = draw(st.integers(min_value=-(10**6), max_value=10**6))
    return format(Decimal(units).scaleb(-places), "f"), Fraction(units, 10**places)


@st.composite
def equations(draw) -> tuple[str, str, str, Fraction]:
    """(a, operation, b, exact value) for a random small operation; no division by zero."""
    operation = draw(st.sampled_from(sorted(OPERATIONS)))
    a_text, a = draw(numbers())
    b_text, b = draw(numbers())
    if operation == "/" and b == 0:
        b_text, b = "7", Fraction(7)
    return a_text, operation, b_text, OPERATIONS[operation](a, b)


def exact_text(value: Fraction) -> str:
    """How the module writes an exact value: a decimal when it terminates, else "a/b"."""
    denominator = value.denominator
    for prime in (2, 5):
        while denominator % prime == 0:
            denominator //= prime
    if denominator != 1:
        return f"{value.numerator}/{value.denominator}"
    with localcontext(prec=200):
        return format((Decimal(value.numerator) / Decimal(value.denominator)).normalize(), "f")


# --------------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------------


@settings(deadline=None)
@given(equations(), SENTENCES)
def test_a_correct_equation_is_checked_and_right(equation, sentence):
    a, operation, b, value = equation
    text = sentence.format(f"{a} {operation} {b} = {exact_text(value)}")

    assert check_arithmetic(text) == ArithmeticReport(checked=1, wrong=())


@settings(deadline=None)
@given(
    equations(),
    st.one_of(
        st.integers(min_value=-1000, max_value=1000).filter(bool).map(Fraction),
        st.sampled_from([Fraction(1, 3), Fraction(-2, 7), Fraction(5, 9)]),
    ),
    SENTENCES,
)
def test_a_result_off_by_any_delta_is_one_wrong_equation(equation, delta, sentence):
    a, operation, b, value = equation
    written = exact_text(value + delta)
    assume("/" in written or abs(delta) >= 1)  # "-264 / 7 = -38" is -37.71 rounded, not wrong
    text = sentence.format(f"{a} {operation} {b} = {written}")

    report = check_arithmetic(text)

    assert report.checked == 1
    assert report.wrong == (WrongEquation(f"{a} {operation} {b}", written, exact_text(value)),)


@settings(deadline=None)
@given(
    st.integers(min_value=-(10**6), max_value=10**6),
    st.integers(min_value=1, max_value=999),
    st.integers(min_value=1, max_value=4),
    st.sampled_from([ROUND_HALF_UP, ROUND_HALF_EVEN]),
)
def test_a_result_rounded_to_the_decimals_written_is_right(numerator, denominator, places, rounding):
    with localcontext(prec=60):
        rounded = (Decimal(numerator) / Decimal(denominator)).quantize(Decimal(1).scaleb(-places), rounding=rounding)

    report = check_arithmetic(f"Each share is {numerator} / {denominator} = {rounded:f} dollars.")

    assert report == ArithmeticReport(checked=1, wrong=())


@settings(deadline=None)
@given(st.integers(min_value=1, max_value=10**4), st.integers(min_value=3, max_value=999), st.integers(1, 4))
def test_a_truncated_result_that_differs_from_the_rounded_one_is_wrong(numerator, denominator, places):
    with localcontext(prec=60):
        exact = Decimal(numerator) / Decimal(denominator)
        truncated = exact.quantize(Decimal(1).scaleb(-places), rounding=ROUND_DOWN)
        rounded = exact.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
        tie = (exact - truncated) * 2 == Decimal(1).scaleb(-places)  # at a tie, both ways are rounding
    report = check_arithmetic(f"{numerator}/{denominator} = {truncated:f}")

    assert report.checked == 1
    assert len(report.wrong) == (0 if truncated == rounded or tie else 1)


@settings(deadline=None)
@given(equations(), st.data(), st.booleans())
def test_unicode_and_latex_operators_are_read(equation, data, spaced):
    a, operation, b, value = equation
    symbol = data.draw(st.sampled_from(SYMBOLS[operation]))
    gap = " " if spaced or symbol[0] in "x\\" else ""  # "12x50" is only read between digits

    assert check_arithmetic(f"So {a}{gap}{symbol}{gap}{b} = {exact_text(value)}.") == ArithmeticReport(1, ())
    wrong = check_arithmetic(f"So {a}{gap}{symbol}{gap}{b} = {exact_text(value + 1)}.")
    assert [w.actual for w in wrong.wrong] == [exact_text(value)]


@settings(deadline=None)
@given(numbers(max_places=2), numbers(max_places=2), st.integers(min_value=-5, max_value=5))
def test_gsm8k_annotations_are_checked(a, b, delta):
    (a_text, a_value), (b_text, b_value) = a, b
    product = exact_text(a_value * b_value + delta)

    report = check_arithmetic(f"<<{a_text}*{b_text}={product}>>")

    assert report.checked == 1
    assert [w.actual for w in report.wrong] == ([] if delta == 0 else [exact_text(a_value * b_value)])


@settings(deadline=None)
@given(st.integers(min_value=0, max_value=10**4), st.integers(min_value=0, max_value=10**4))
def test_prose_around_an_annotation_is_checked_too(a, b):
    text = f"She sold {a} + {b} = $<<{a}+{b}={a + b}>>{a + b} worth of clips."

    assert check_arithmetic(text) == ArithmeticReport(checked=2, wrong=())


@settings(deadline=None)
@given(st.lists(st.tuples(equations(), st.integers(min_value=-3, max_value=3)), min_size=1, max_size=8))
def test_every_equation_in_a_text_is_reported(items):
    lines = []
    expected_wrong = []
    for (a, operation, b, value), delta in items:
        written = exact_text(value + delta)
        lines.append(f"{a} {operation} {b} = {written}")
        wrong = WrongEquation(f"{a} {operation} {b}", written, exact_text(value))
        if delta and wrong not in expected_wrong:  # the same wrong equation twice is reported once
            expected_wrong.append(wrong)
    text = "We compute step by step.\n" + "\n".join(
        f"Then {line}." if index % 2 else line for index, line in enumerate(lines)
    )

    report = check_arithmetic(text)

    assert report.checked == len(items)
    assert list(report.wrong) == expected_wrong


# --------------------------------------------------------------------------------------------------
# Examples
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "48/2 = 24",
        "48 + 24 = 72",
        "12 x 50 = 600",
        "12x50=600",
        "12 × 50 = 600",
        "0.2 * 50 = 10",
        "$12 * 5 = $60",
        "3 · 4 = 12",
        "(3 + 4) * 2 = 14",
        "2 * (3 + 4) = 14",
        "10 − 3 = 7",
        "1,200 + 300 = 1,500",
        "50% of 80 = 40",
        "15% + 5% = 20%",
        "25 - 5 = 20%",  # "%" as a unit label
        "<<48/2=24>>",
        "<<.5*4=2>>",
        "$12 \\times 50 = 600$",
        "3 * -2 = -6",
        "-3 + 5 = 2",
        "0.5 + 0.25 = 3/4",
        "60 / 3/4 = 80",  # a fraction written without spaces binds tighter
        "10/3 = 3.33",  # rounded to the decimals written
        "2/3 = 0.67",
        "1/8 = 0.13",  # a tie may round either way
        "1/8 = 0.12",
        "10 + 20 + 30 + 40 = 100",
        "**12 × 50 = 600**",
        "- 48 + 24 = 72",
        "So (3 + 4 = 7).",
        "$2.50 - $2.24 = 26 cents",
    ],
)
def test_equations_drafts_write_are_checked_and_right(text):
    assert check_arithmetic(text) == ArithmeticReport(checked=1, wrong=())


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Natalia sold 48 + 24 = 73 clips.", "48 + 24 = 73 (actually 72)"),
        ("12 × 50 = 610", "12 * 50 = 610 (actually 600)"),
        ("1,200 + 300 = 1,600", "1200 + 300 = 1600 (actually 1500)"),
        ("(3 + 4) * 2 = 16", "(3 + 4) * 2 = 16 (actually 14)"),
        ("<<48/2=23>>", "48/2 = 23 (actually 24)"),
        ("2/3 = 0.66", "2/3 = 0.66 (actually 2/3)"),  # truncated, not rounded
        ("1 + 2 = 3/4", "1 + 2 = 3/4 (actually 3)"),
        ("15% + 5% = 25%", "15% + 5% = 25% (actually 20%)"),
        ("5 / 0 = 0", "5 / 0 = 0 (actually undefined)"),
        ("1 / 8 = 0.14", "1 / 8 = 0.14 (actually 0.125)"),
        ("3 - 5 = 2", "3 - 5 = 2 (actually -2)"),
    ],
)
def test_wrong_equations_are_explained(text, message):
    report = check_arithmetic(text)

    assert report.checked == 1
    assert [format_wrong(wrong) for wrong in report.wrong] == [message]


def test_each_equals_sign_is_checked_against_what_follows_it():
    assert check_arithmetic("2 + 3 = 5 + 1 = 6") == ArithmeticReport(2, ())  # a running total
    assert check_arithmetic("(3 + 4) * 2 = 7 * 2 = 14") == ArithmeticReport(2, ())  # equal expressions
    report = check_arithmetic("(3 + 4) * 2 = 7 * 3 = 21")
    assert report.checked == 2
    assert [format_wrong(wrong) for wrong in report.wrong] == ["(3 + 4) * 2 = 7 * 3 (actually 14)"]


def test_a_wrong_equation_repeated_by_an_annotation_is_reported_once():
    report = check_arithmetic("She sold 48+24 = <<48+24=73>>73 clips.")

    assert report.checked == 2
    assert [format_wrong(wrong) for wrong in report.wrong] == ["48 + 24 = 73 (actually 72)"]


@pytest.mark.parametrize(
    "text",
    [
        "The meeting is on 2024-01-05.",
        "It takes 5-10 minutes.",
        "Call 555-123-4567 today.",
        "x = 5",
        "Let x = 12 and y = 3.",
        "We meet at 10:30.",
        "10:30 = half past ten",
        "2x + 3 = 7",
        "3x-5=16",
        "2x + 3 * 2 = 8",  # only the tail is arithmetic
        "100/5 = 5A/5",
        "22 - 16 = 16 + x - 16",
        "2^3 = 8",
        "2^3 * 2 = 16",
        "2 ** 3 * 2 = 16",
        "1 + 1 ≈ 2",
        "3 + 4 == 7",
        "3 + 4 <= 8",
        "80 - 20% = 64",  # 79.8 or 64? not guessed
        "8 x 1 1/2 = 12",  # a mixed number
        "17/3 = 5 and 2/3",
        "Day 4: 2(50+100+120) = 540",  # implicit multiplication
        "0900 - 0130 = 0730 hours",  # a clock time
        "600 x 30 = 18 000 watts",  # spaced thousands
        "1" * 31 + " + 1 = 2",  # over MAX_NUMBER_DIGITS
        "Total = 42",
        "",
    ],
)
def test_non_equations_are_not_checked(text):
    assert check_arithmetic(text) == ArithmeticReport(checked=0, wrong=())


# --------------------------------------------------------------------------------------------------
# GSM8K gold answers: their arithmetic is (almost all) right, so nearly nothing may be reported
# --------------------------------------------------------------------------------------------------

ANNOTATION = re.compile(r"<<[^<>]*>>")


def test_gsm8k_gold_answers_check_out():
    path = next(path for path in GSM8K if path.exists())
    with path.open() as lines:
        answers = [json.loads(line)["answer"] for _, line in zip(range(200), lines, strict=False)]

    annotations = [annotation for answer in answers for annotation in ANNOTATION.findall(answer)]
    failed_annotations = [a for a in annotations if check_arithmetic(a) != ArithmeticReport(1, ())]
    reports = [check_arithmetic(answer) for answer in answers]
    checked = sum(report.checked for report in reports)
    wrong = [format_wrong(wrong) for report in reports for wrong in report.wrong]
    print(f"{len(annotations) - len(failed_annotations)}/{len(annotations)} annotations check out")
    print("annotations not checked or wrong:", failed_annotations)
    print(f"{checked} equations checked in {len(answers)} answers; wrong:", wrong)

    assert annotations
    assert len(failed_annotations) <= 0.05 * len(annotations), failed_annotations
    # Prose equations are found as well; the few reported are typos in the gold text ("192*100=$1920").
    assert checked > len(annotations)
    assert len(wrong) <= 0.01 * checked, wrong


# --------------------------------------------------------------------------------------------------
# Hostile inputs: the check returns, quickly, without raising
# --------------------------------------------------------------------------------------------------

HOSTILE_TEXTS = {
    "one_megabyte_of_equations": "1+1=2; " * 150_000,
    "one_megabyte_of_wrong_equations": "1+1=3. " * 150_000,
    "ten_thousand_digits": "1" * 10_000 + " + 1 = " + "1" * 10_000,
    "ten_thousand_digit_products": ("9" * 10_000 + " * ") * 20 + "1 = 5",
    "largest_numbers_multiplied": " * ".join(["9" * 30] * 32) + " = 1",
    "surrogates": "\ud800 3 + 4 = 7 \udfff\ud800=\ud800",
    "deep_parentheses": "(" * 100_000 + "1 + 1" + ")" * 100_000 + " = 2",
    "parenthesized_equations": "((1+1)*(2+2)) = 8, " * 30_000,
    "long_chain": "1 + " * 300_000 + "1 = 300001",
    "long_tight_chain": "1+" * 300_000 + "1=300001",
    "equals_signs": "=" * 1_000_000,
    "spaces": "1" + " " * 500_000 + "+ 1 = 2",
    "numbers_and_equals": "1=" * 500_000,
    "operators": "+-*/" * 250_000 + "=1",
    "annotations": "<<" * 100_000 + "1+1=2" + ">>" * 100_000,
    "division_by_zero": "1/0=1; " * 100_000,
    "thousands_separators": "1,000," * 100_000 + "000 + 1 = 2",
    "long_decimal": "0." + "0" * 100_000 + "1 + 1 = 1",
    "fractions": "1/" * 300_000 + "1 = 1",
    "percentages": "50% of " * 100_000 + "80 = 40",
    "signs": "-" * 100_000 + "1 + 1 = 2",
}


@pytest.mark.timeout(10)
@pytest.mark.parametrize("text", HOSTILE_TEXTS.values(), ids=HOSTILE_TEXTS.keys())
def test_hostile_inputs_return(text):
    report = check_arithmetic(text)

    assert 0 <= report.checked <= MAX_EQUATIONS
    assert len(report.wrong) <= report.checked


@pytest.mark.timeout(10)
def test_hostile_inputs_are_bounded_not_ignored():
    assert check_arithmetic("1+1=2; " * 150_000) == ArithmeticReport(MAX_EQUATIONS, ())
    report = check_arithmetic("1+1=3. " * 150_000)
    assert report.checked == MAX_EQUATIONS
    assert [format_wrong(wrong) for wrong in report.wrong] == ["1 + 1 = 3 (actually 2)"]
    assert check_arithmetic("1/0=1; " * 100_000).wrong == (WrongEquation("1/0", "1", "undefined"),)
    assert check_arithmetic("\ud800 3 + 4 = 7 \udfff") == ArithmeticReport(1, ())
    big = "9" * 30
    assert check_arithmetic(f"{big} * {big} = 1").wrong[0].actual == str(int(big) ** 2)


@pytest.mark.parametrize("not_text", [None, b"1 + 1 = 3", 42])
def test_non_text_input_does_not_raise(not_text):
    assert check_arithmetic(not_text) == ArithmeticReport(checked=0, wrong=())


# --------------------------------------------------------------------------------------------------
# Rounding to an integer, and approximation markers
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("In May she sold 48 / 5 = 10 clips.", "48 / 5 = 10 (actually 9.6)"),
        ("100/3 = 33", "100/3 = 33 (actually 100/3)"),
        ("7 / 2 = 4", "7 / 2 = 4 (actually 3.5)"),  # even at a tie
        ("-264 / 7 = -38", "-264 / 7 = -38 (actually -264/7)"),
        ("48/5 = 10\nThat is about right.", "48/5 = 10 (actually 9.6)"),  # the marker is on another line
    ],
)
def test_a_non_integer_rounded_to_an_integer_is_wrong(text, message):
    report = check_arithmetic(text)

    assert report.checked == 1
    assert [format_wrong(wrong) for wrong in report.wrong] == [message]


@pytest.mark.parametrize(
    "text",
    [
        "She sold about 48 / 5 = 10 clips.",
        "48 / 5 = 10 approximately",
        "Approximately: 100/3 = 33",
        "100/3 = 33 (rounded)",
        "48 / 5 = 9.6, so round up: 48/5 = 10 buses",
        "roughly 48 / 5 = 10",
        "~ 48 / 5 = 10",
        "48 / 5 = 10 ≈ ten",
        "48 \\div 5 = 10 \\approx 10",
    ],
)
def test_an_integer_rounding_marked_approximate_on_its_line_is_right(text):
    report = check_arithmetic(text)

    assert report.checked >= 1
    assert report.wrong == ()


@pytest.mark.parametrize("text", ["100/3 = 33.33", "100/3 = 33.3", "2/3 = 0.67", "48 / 5 = 9.6", "48 / 2 = 24"])
def test_decimals_rounded_to_the_places_written_and_exact_integers_stay_right(text):
    assert check_arithmetic(text) == ArithmeticReport(checked=1, wrong=())


def test_the_approximation_marker_of_one_line_does_not_excuse_the_next():
    report = check_arithmetic("about 48 / 5 = 10 boxes\n100 / 3 = 33 each")

    assert report.checked == 2
    assert [format_wrong(w) for w in report.wrong] == ["100 / 3 = 33 (actually 100/3)"]


@settings(deadline=None, max_examples=50)
@given(st.integers(min_value=1, max_value=10**6), st.integers(min_value=2, max_value=999))
def test_an_integer_result_is_right_exactly_when_the_division_is_exact(numerator, denominator):
    rounded = round(Fraction(numerator, denominator))
    report = check_arithmetic(f"{numerator} / {denominator} = {rounded}")

    assert report.checked == 1
    assert (report.wrong == ()) == (numerator % denominator == 0)


# --------------------------------------------------------------------------------------------------
# LaTeX
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "\\frac{48}{2} = 24",
        "\\dfrac{48}{2} = 24",
        "48 \\times 2 = 96",
        "48\\times2 = 96",
        "48 \\cdot 2 = 96",
        "48 \\div 2 = 24",
        "\\( 48 + 24 = 72 \\)",
        "\\[ 48 + 24 = 72 \\]",
        "$48 + 24 = 72$",
        "\\left( 3 + 4 \\right) \\times 2 = 14",
        "\\frac{48 + 24}{2} = 36",
        "60 \\div \\frac{3}{4} = 80",
        "\\$1{,}200 \\div 4 = \\$300",
        "\\boxed{48 + 24 = 72}",
        "\\text{Total} = 48 + 24 = 72",
    ],
)
def test_latex_equations_are_read_and_right(text):
    assert check_arithmetic(text) == ArithmeticReport(checked=1, wrong=())


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("\\frac{48}{2} = 25", "48/2 = 25 (actually 24)"),
        ("48 \\times 2 = 86", "48 * 2 = 86 (actually 96)"),
        ("\\( 48 + 24 = 73 \\)", "48 + 24 = 73 (actually 72)"),
        ("\\left( 3 + 4 \\right) \\cdot 2 = 15", "(3 + 4) * 2 = 15 (actually 14)"),
        ("\\frac{48}{5} = 10", "48/5 = 10 (actually 9.6)"),
    ],
)
def test_wrong_latex_equations_are_explained(text, message):
    report = check_arithmetic(text)

    assert report.checked == 1
    assert [format_wrong(wrong) for wrong in report.wrong] == [message]


def test_a_latex_mixed_number_is_skipped_not_misread():
    # 2\frac{1}{2} is two and a half; read as "21/2" it would make a right equation wrong.
    assert check_arithmetic("2\\frac{1}{2} \\times 2 = 5") == ArithmeticReport(checked=0, wrong=())


def test_computations_are_what_a_draft_computes_however_it_is_written():
    written = ("48 / 2 = 24", "48 ÷ 2 = 24.0", "$48/2 = $24", "2 x 48 = 96")
    keys = [[c.key for c in computations(text)] for text in written]
    assert keys == [["2 48 -> 24"]] * 3 + [["2 48 -> 96"]]
    assert [c.key for c in computations("1,200.50 + 0.5 = 1201")] == ["0.5 1200.5 -> 1201"]


def test_computations_are_listed_once_in_order_up_to_the_first_wrong_one():
    text = "48 / 2 = 24\nso 48/2 = 24 again\n48 + 24 = 72\n48 * 2 = 92\n3 + 3 = 6"
    assert [(c.key, c.line) for c in computations(text)] == [("2 48 -> 24", 0), ("24 48 -> 72", 2)]
    assert computations("no equation here") == [] and computations("x = 5") == []
