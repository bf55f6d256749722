"""The LaTeX rewrite the arithmetic check and answer extraction read drafts through."""

from __future__ import annotations

import time

import pytest

from deliberate.verifier.arithmetic import check_arithmetic
from deliberate.verifier.latex import last_boxed, to_plain


@pytest.mark.parametrize(
    ("latex", "plain"),
    [
        ("\\frac{48}{2} = 24", "48/2 = 24"),
        ("\\frac{48 + 2}{5}", "((48 + 2) / 5)"),
        ("\\frac{\\frac{1}{2} + 3}{7}", "((1/2 + 3) / 7)"),
        ("2\\frac{1}{2}", "2(1 / 2)"),  # a mixed number stays visibly glued: skipped, never misread as 21/2
        ("48 \\times 2 \\cdot 3 \\div 4", "48 × 2 · 3 ÷ 4"),
        ("\\left( 3 + 4 \\right)", "( 3 + 4 )"),
        ("\\( 72 \\)", "  72  "),
        ("\\$1{,}200 and 15\\%", "$1,200 and 15%"),
        ("\\boxed{72} \\text{clips}", "72 clips"),
        ("x \\approx 10", "x ≈ 10"),
        ("about ~10", "about ~10"),  # "~" marks an approximation; it stays
        ("line one \\(\nline two\\)", "line one  \nline two "),  # line breaks stay where they were
        ("\\timesx", "\\timesx"),  # not a command we know
        ("plain text, no LaTeX", "plain text, no LaTeX"),
    ],
)
def test_to_plain(latex, plain):
    assert to_plain(latex) == plain


def test_last_boxed_takes_the_last_balanced_one():
    assert last_boxed("\\boxed{1} then \\boxed{\\frac{3}{4}}") == "\\frac{3}{4}"
    assert last_boxed("\\boxed{1} then \\boxed{2") == "1"  # the unclosed one is skipped
    assert last_boxed("no box") is None


@pytest.mark.parametrize(
    "hostile",
    [
        "\\frac{" * 50_000,
        "\\frac{1}{2}" * 20_000 + " = 1",
        "\\boxed{" * 50_000,
        "\\left(" * 30_000 + "1 + 1 = 2" + "\\right)" * 30_000,
        ("\\( 1 + 1 = 2 \\) " * 10_000),
    ],
)
def test_hostile_latex_costs_little(hostile):
    started = time.perf_counter()
    to_plain(hostile)
    last_boxed(hostile)
    check_arithmetic(hostile)
    assert time.perf_counter() - started < 2.0


@pytest.mark.parametrize(
    ("latex", "plain"),
    [
        # Plain numbers are read by the one parser, selection.numbers, and written in its normalized text:
        ("\\frac{1,200}{3} = 400", "1200/3 = 400"),  # thousands separators (before: "((1,200) / 3)")
        ("\\frac{−3}{4}", "-3/4"),  # the Unicode minus (before: "((−3) / 4)")
        ("\\frac{$5}{2}", "5/2"),  # a dollar sign (before: "(($5) / 2)")
        ("\\frac{ 1.50 }{\t3 }", "1.50/3"),  # spaces around, decimals as written (unchanged)
        # ... but a fraction or a percentage is not plain: as a/b it would read as another fraction or lose its %.
        ("\\frac{1/2}{3}", "((1/2) / 3)"),
        ("\\frac{15%}{2}", "((15%) / 2)"),
        ("\\frac{2x}{3}", "((2x) / 3)"),  # a number glued to a letter is not a number (unchanged)
        ("\\frac{" + "1" * 150 + "}{2}", "((" + "1" * 150 + ") / 2)"),  # an over-long digit run is not (before: a/b)
    ],
)
def test_frac_reads_its_numbers_with_the_shared_parser(latex, plain):
    assert to_plain(latex) == plain


def test_a_frac_with_thousands_separators_is_checked():
    assert check_arithmetic("\\frac{1,200}{3} = 400").checked == 1
    assert [wrong.actual for wrong in check_arithmetic("\\frac{1,200}{3} = 500").wrong] == ["400"]
