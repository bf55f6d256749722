"""Exact re-computation of the arithmetic a draft writes out: ``48 + 24 = 73`` is caught as wrong.

Pure and bounded like `parsing`: no I/O, nothing raises, and hostile drafts (megabytes of equations,
10,000-digit numbers, 100k parentheses, lone surrogates) cost milliseconds.

What counts as an equation: an expression of at least two operands, ``=``, and a right side that
starts with a number. Operands are numbers as in `parsing` (``-7``, ``−7``, ``$12``, ``1,200``,
``0.2``, ``.5``, ``15%``), optionally in parentheses; operators are ``+ - − * / x × ÷ · ⋅``, LaTeX's
``\\times \\cdot \\div``, and ``of`` right after a percentage (``50% of 80``). GSM8K calculator
annotations (``<<48/2=24>>``) are equations too, and the prose around them is read with the
annotation skipped (``48/2 = <<48/2=24>>24`` checks ``48/2 = 24`` as well).

Deliberately *not* equations: anything without a digit on the left (``x = 5``), a single number on
the left (``10:30 = 630``), algebra (``2x + 3 = 7``, ``100/5 = 5A/5``: only part of it is
arithmetic, so it is skipped, not half-read), mixed numbers (``8 x 1 1/2 = 12``), implicit
multiplication (``2(50 + 100) = 300``), clock times with leading zeros (``0900 - 0130``), powers
(``2^3``, ``2**3``), ``≈``, ``==``, ``<=``, and dates, ranges, phone numbers and times, which have
no ``=`` followed by a number.

How each equation found is judged (exact rational arithmetic, rounding, percentages) is `equation`'s job and
docstring.

LaTeX is read after `latex.to_plain` (``\\frac{48}{2} = 24``, ``48 \\times 2 = 96``, ``\\( 48 + 24 = 72 \\)``,
``\\left( 3 + 4 \\right) \\cdot 2 = 14``).

Each ``=`` is found with ``str.find``; its right side is matched forwards and its left side
backwards (an anchored match on the reversed text), so the cost follows the number of ``=`` signs
rather than the length of the draft.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from .equation import Unreadable, WrongEquation, evaluate, format_result, format_value, judge, tokenize
from .latex import to_plain

# More than any draft writes on one line; bounds the regex's backtracking to linear time.
MAX_OPERANDS = 32
# A draft with more equations than this is not a draft; the rest are not checked.
MAX_EQUATIONS = 200
# "=" signs looked at, equations or not ("====" underlines, skipped equations): also bounded.
MAX_CANDIDATES = 1_000
# Drafts are a few hundred tokens; only the start of anything far larger is read.
MAX_SCAN_CHARS = 200_000
# How far around an "=" its line is searched for an approximation marker; bounds the work per "=".
APPROXIMATE_WINDOW = 200
# Words and signs that mark a result on the same line as approximate, so an integer rounding is right.
APPROXIMATE = re.compile(
    r"\b(?:about|approximately|approx|roughly|around|rounded|rounding|round(?:s|ing)?\s+(?:up|down|off|to))\b|[≈~]",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class ArithmeticReport:
    """How many equations were found and recomputed, and which of them are wrong."""

    checked: int
    wrong: tuple[WrongEquation, ...]


def format_wrong(wrong: WrongEquation) -> str:
    """``48 + 24 = 73 (actually 72)``."""
    return f"{wrong.expression} = {wrong.written} (actually {wrong.actual})"


# --------------------------------------------------------------------------------------------------
# Finding equations
# --------------------------------------------------------------------------------------------------

# Possessive quantifiers and atomic groups: a failed match gives nothing back, so no input backtracks
# badly and "1.2Y" cannot be read as the number 1.
_SPACE = r"[ \t]*+"
# Operators between operands. "x" only spaced or glued on both sides ("12 x 50", "12x50"): "3x-5" and
# "2x + 3" are algebra. The en dash is a minus in many drafts and never starts a range next to "=".
_SYMBOLS = "-+*/×÷·⋅−–"

# The right side, read forwards from just after "=".
# A number as in `parsing`, plus GSM8K's ".5"; its digits are validated later, by the tokenizer.
_NUMBER = r"(?>[-−]?\$?(?:(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?|\.\d+)%?)"
_OPERAND = rf"(?:\({_SPACE})*+{_NUMBER}(?:{_SPACE}\))*+"
_OPERATOR = rf"[{_SYMBOLS}]|(?<=\d)x(?=[\d$(])|(?<=[ \t])x(?=[ \t])|\\times|\\cdot|\\div"
_BINARY = rf"(?:{_SPACE}(?:{_OPERATOR}){_SPACE}|(?<=%)[ \t]+of[ \t]+)"
_RIGHT = re.compile(
    rf"""
    {_SPACE}\$?(?:<<[^<>\n]{{0,200}}>>)?            # "= $<<12/60=0.2>>0.2": skip the annotation
    (?P<right>{_OPERAND}(?:{_BINARY}{_OPERAND}){{0,{MAX_OPERANDS - 1}}})
    (?!
        [:\w]                                       # a time "= 10:30", algebra "= 5A / 5"
      | {_SPACE}\d                                  # spaced thousands "= 18 000"
      | {_SPACE}[{_SYMBOLS}]{_SPACE}[A-Za-z](?![A-Za-z])   # algebra "= 32 + x - 32", "= 90/x"
      | [ \t]+and[ \t]+\(?\d+/                       # a mixed number "= 5 and 2/3"
    )
    (?P<cents>[ \t]+cents?\b)?                       # "$2.50 - $2.24 = 26 cents"
    """,
    re.VERBOSE,
)

# The left side, the same grammar mirrored, read backwards through the reversed text from just
# before "=". It takes as many operands as it can, then requires that the character before the
# expression is not part of a word, number, date, time or power ("v2", "1.5", "12/25", "10:30", "2^3").
_NUMBER_REVERSED = r"(?>%?(?:\d+\.(?!\d)|(?:\d+\.)?(?:(?:\d{3},)+\d{1,3}(?!\d)|\d+))\$?)[-−]?"
_OPERAND_REVERSED = rf"(?:\){_SPACE})*+{_NUMBER_REVERSED}(?:{_SPACE}\()*+"
_OPERATOR_REVERSED = rf"[{_SYMBOLS}]|(?<=[\d$(])x(?=\d)|(?<=[ \t])x(?=[ \t])|semit\\|todc\\|vid\\"
_BINARY_REVERSED = rf"(?:{_SPACE}(?:{_OPERATOR_REVERSED}){_SPACE}|[ \t]+fo[ \t]+(?=%))"
_LEFT_REVERSED = re.compile(
    rf"{_SPACE}(?P<left>{_OPERAND_REVERSED}(?:{_BINARY_REVERSED}{_OPERAND_REVERSED}){{1,{MAX_OPERANDS - 1}}})"
    rf"(?![\w.,:/^+\-−–×÷·⋅%])"
)
_THREE_DIGITS = re.compile(r"\d{3}(?!\d)")
# Characters that, just before an equation, mean it is the tail of a longer expression.
_CONTINUATION = frozenset("+-−–*/×÷·⋅^")


def check_arithmetic(text: str) -> ArithmeticReport:
    """Find the equations written in ``text`` and recompute each exactly (see the module docstring).

    ``checked`` counts the equations found and recomputed, at most `MAX_EQUATIONS`; ``wrong`` lists
    the wrong ones in the order written, each once (a GSM8K annotation and the prose around it often
    repeat the same equation). Never raises.
    """
    if not isinstance(text, str) or "=" not in text:  # the common fast path for prose
        return ArithmeticReport(0, ())
    text = to_plain(text[:MAX_SCAN_CHARS])
    reversed_text = text[::-1]
    length = len(text)
    checked = 0
    wrong: list[WrongEquation] = []
    position = text.find("=")
    for _ in range(MAX_CANDIDATES):
        if position < 0 or checked >= MAX_EQUATIONS:
            break
        verdict = _check_equals_sign(text, reversed_text, length, position)
        if verdict is not None:
            checked += 1
            if verdict is not True and verdict not in wrong:
                wrong.append(verdict)
        position = text.find("=", position + 1)
    return ArithmeticReport(checked, tuple(wrong))


def _check_equals_sign(text: str, reversed_text: str, length: int, position: int) -> WrongEquation | bool | None:
    """Judge the equation around the "=" at ``position``; None if there is none (see `judge`)."""
    found = _equation_at(text, reversed_text, length, position)
    return None if found is None else judge(*found)


def _equation_at(text: str, reversed_text: str, length: int, position: int) -> tuple[str, str, bool, bool] | None:
    """The arguments of `judge` for the equation around the "=" at ``position``; None if there is none."""
    if text[position + 1 : position + 2] in ("=", ">"):  # "==", "=>"; "<=" and "!=" fail the left side
        return None
    right = _RIGHT.match(text, position + 1)
    if right is None:
        return None
    left = _LEFT_REVERSED.match(reversed_text, length - position)
    if left is None:
        return None
    start = length - left.end("left")
    if _is_fragment(text, start):
        return None
    approximate = _marked_approximate(text, position)
    return text[start : length - left.start("left")], right["right"], right["cents"] is not None, approximate


@dataclass(frozen=True)
class Computation:
    """One equation a draft writes that holds, by what it computes rather than how it is written: ``48/2 = 24``,
    ``48 ÷ 2 = 24.0`` and ``$48 / 2 = $24`` are the same computation."""

    operands: tuple[str, ...]  # the left side's numbers as exact values, sorted: ("2", "48")
    value: str  # the left side's exact value: "24"
    line: int  # the 0-based line of its "=" in the text

    @property
    def key(self) -> str:
        return f"{' '.join(self.operands)} -> {self.value}"


def computations(text: str) -> list[Computation]:
    """The equations of ``text`` that hold, in the order written, each computation once (its first line), up to
    the first wrong one: a draft's structure for comparing it with other drafts (the consensus prefix).
    Found exactly as `check_arithmetic` finds them; equations it skips are skipped here. Never raises."""
    if not isinstance(text, str) or "=" not in text:
        return []
    plain = to_plain(text[:MAX_SCAN_CHARS])
    if plain.count("\n") != text[:MAX_SCAN_CHARS].count("\n"):  # lines moved: they would point elsewhere
        return []
    reversed_text = plain[::-1]
    length = len(plain)
    found: dict[str, Computation] = {}
    position = plain.find("=")
    for _ in range(MAX_CANDIDATES):
        if position < 0 or len(found) >= MAX_EQUATIONS:
            break
        equation = _equation_at(plain, reversed_text, length, position)
        if equation is not None:
            verdict = judge(*equation)
            if verdict is not True and verdict is not None:
                break  # what follows a wrong step is built on it
            if verdict is True:
                computation = _computation(equation[0], plain.count("\n", 0, position))
                if computation is not None:
                    found.setdefault(computation.key, computation)
        position = plain.find("=", position + 1)
    return list(found.values())


def _computation(left: str, line: int) -> Computation | None:
    try:
        tokens = tokenize(left)
        numerator, denominator, percent = evaluate(tokens)
    except (Unreadable, ZeroDivisionError):
        return None
    # A fraction written without spaces ("48/2") is one number token; its two numbers are operands as in "48 / 2".
    operands = sorted(
        format_value(Fraction(part)) + ("%" if t[2] else "")
        for t in tokens
        if type(t) is tuple
        for part in t[3].rstrip("%").split("/")
    )
    if len(operands) < 2:
        return None
    return Computation(tuple(operands), format_result(numerator, denominator, percent), line)


def _marked_approximate(text: str, position: int) -> bool:
    """Whether the line of the "=" at ``position`` (within `APPROXIMATE_WINDOW` characters) marks its
    result as approximate."""
    low = max(0, position - APPROXIMATE_WINDOW)
    start = text.rfind("\n", low, position) + 1 or low
    end = text.find("\n", position, position + APPROXIMATE_WINDOW)
    if end < 0:
        end = position + APPROXIMATE_WINDOW
    return APPROXIMATE.search(text, max(start, low), end) is not None


def _is_fragment(text: str, start: int) -> bool:
    """True when what precedes the left side shows it is only the tail of something longer, which
    must not be checked on its own: an operator or power sign (``2x + 3 * 2 = 8``, ``2 ** 3 * 2``, a
    chain of more than `MAX_OPERANDS` operands), a number (the mixed numbers ``8 x 1 1/2`` and
    ``1 and 1/4``, the stray space in ``14, 400``), or a value glued to a parenthesis (``2(50 + 100)``).
    A bullet (``- 3 + 4 = 7``) and Markdown emphasis (``**3 + 4 = 7**``) are not operators."""
    before = text[max(0, start - 16) : start]
    stripped = before.rstrip(" \t")
    if not stripped:
        return False
    if stripped[-1] == "(":
        head = stripped.rstrip("(")
        if head[-1:].isalnum():  # glued: "2(50 + 100)", "f(3 + 4)"
            return True
        stripped = head.rstrip(" \t")  # "3 + (30 + 58)": look further back
        if not stripped:
            return False
    last = stripped[-1]
    if last.isdigit():
        return True
    if last == ",":  # "14, 400" is 14,400 with a stray space; "= 8, 3 + 4 = 7" is a list
        return stripped[-2:-1].isdigit() and _THREE_DIGITS.match(text, start) is not None
    if last == "d" and stripped.endswith(" and"):
        return stripped[:-4].rstrip(" \t")[-1:].isdigit()
    if last not in _CONTINUATION and not (last == "x" and stripped[-2:-1] in (" ", "\t")):
        return False
    if last == "*" and len(stripped) == len(before):  # glued to the number: emphasis, unless after a value
        head = stripped.rstrip("*_")
        if not head or head[-1] in " \t\n(>":
            return False
    head = stripped[:-1].rstrip(" \t>")
    return bool(head) and head[-1] != "\n"
