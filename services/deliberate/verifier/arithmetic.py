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

How an equation is judged (exact rational arithmetic, usual precedence; a fraction written without
spaces binds tighter than any operator, so ``60 / 3/4 = 80`` divides by three quarters):

* Each ``=`` is checked on its own: the expression immediately left of it against what is
  immediately right. In a chain ``2 + 3 = 5 + 1 = 6`` that is ``2 + 3 = 5 …`` then ``5 + 1 = 6``.
* A number on the right is right if it equals the exact value, or equals it rounded to the number
  of decimals written, either way at a tie (``10/3 = 3.33``, ``2/3 = 0.67``; not the truncation
  ``2/3 = 0.66``). Rounding to an integer is different: a non-integer value written as an integer
  (``48 / 5 = 10``, ``100/3 = 33``) is wrong unless its line marks it as approximate (`APPROXIMATE`:
  "about", "approximately", "roughly", "around", "rounded", "round up", "≈", "~", ``\\approx``), because
  that is how drafts hide a wrong step (``48 / 5 = 10`` instead of ``48 / 2 = 24``).
* An expression on the right (``(3 + 4) * 2 = 7 * 2``, or a running total ``48 + 24 = 72 + 10``) is
  right if it has exactly the left side's value or if its first number is right by the rule above,
  unless that number is a numerator: ``1 + 2 = 3/4`` is wrong.
* ``15%`` is 0.15 in a calculation, but where either side has a ``%`` a number on the right may also
  state the value in percent (``15% + 5% = 20``, ``25 - 5 = 20%``). A sum that mixes a percentage
  with a plain number (``80 - 20% = 64``) is ambiguous and skipped.
* Division by zero on the left is always wrong, with the actual value ``undefined``.
* Equations that cannot be read exactly (a number over `MAX_NUMBER_DIGITS` digits, more than
  `MAX_PARENTHESES` parentheses, unbalanced parentheses, a side over `MAX_SIDE_CHARS` characters)
  are skipped and not counted.

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
from functools import lru_cache

from .latex import to_plain

# Longer digit runs are identifiers or junk, not arithmetic; also bounds the size of every value.
MAX_NUMBER_DIGITS = 30
# More than any draft writes on one line; bounds the regex's backtracking to linear time.
MAX_OPERANDS = 32
# Deeper nesting is not arithmetic a draft writes; also bounds the evaluator's stack.
MAX_PARENTHESES = 32
# A draft with more equations than this is not a draft; the rest are not checked.
MAX_EQUATIONS = 200
# "=" signs looked at, equations or not ("====" underlines, skipped equations): also bounded.
MAX_CANDIDATES = 1_000
# Bounds the tokenizer's work on one side; a real side is a few dozen characters.
MAX_SIDE_CHARS = 1_000
# Drafts of one question repeat the same equations; a cached verdict costs well under a microsecond.
# At most 2 x MAX_SIDE_CHARS characters a key: a few megabytes at worst.
JUDGE_CACHE_SIZE = 1_024
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
class WrongEquation:
    """One equation whose written result is not the exact value of its left side."""

    expression: str  # the left side, normalized: "48 + 24", "(3 + 4) * 2", "50% of 80"
    written: str  # the right side as written, normalized: "73", "1500", "7 * 3"
    actual: str  # the exact value: "72", "0.25", "1/3", "20%", or "undefined"


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
    """Judge the equation around the "=" at ``position``; None if there is none (see `_judge`)."""
    found = _equation_at(text, reversed_text, length, position)
    return None if found is None else _judge(*found)


def _equation_at(text: str, reversed_text: str, length: int, position: int) -> tuple[str, str, bool, bool] | None:
    """The arguments of `_judge` for the equation around the "=" at ``position``; None if there is none."""
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
            verdict = _judge(*equation)
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
        tokens = _tokenize(left)
        numerator, denominator, percent = _evaluate(tokens)
    except (_Unreadable, ZeroDivisionError):
        return None
    # A fraction written without spaces ("48/2") is one number token; its two numbers are operands as in "48 / 2".
    operands = sorted(
        _format_value(Fraction(part)) + ("%" if t[2] else "")
        for t in tokens
        if type(t) is tuple
        for part in t[3].rstrip("%").split("/")
    )
    if len(operands) < 2:
        return None
    return Computation(tuple(operands), _format_number(numerator, denominator, percent), line)


def _format_number(numerator: int, denominator: int, percent: bool) -> str:
    if percent:
        return _format_value(Fraction(numerator * 100, denominator)) + "%"
    return _format_value(Fraction(numerator, denominator))


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


# --------------------------------------------------------------------------------------------------
# Reading and evaluating one side
# --------------------------------------------------------------------------------------------------

# Tokens of a side the regexes above accepted: a number (integer digits, decimals, "%"), a fraction
# slash, or an operator or parenthesis. Spaces, "$" and thousands separators are skipped; a sign is
# read as a unary minus. A "/" between a number and a digit with no space is a fraction slash: the
# fraction binds tighter than any operator, so "60 / 3/4 = 80" divides by three quarters.
_TOKEN = re.compile(
    r"(\d[\d,]*|(?=\.\d))(?:\.(\d+))?(%?)|((?<=[\d%])/(?=[\d.]))|(\\times|\\cdot|\\div|of|[-+*/x×÷·⋅−–()])"
)
_OPERATOR_NAMES = {"−": "-", "–": "-", "x": "*", "×": "*", "·": "*", "⋅": "*", "\\times": "*", "\\cdot": "*"}
_OPERATOR_NAMES.update({"÷": "/", "\\div": "/"})

# A number token is a tuple (numerator, denominator, percent, text, digits, decimals): its exact value
# as an unreduced fraction (plain int arithmetic is several times faster than `Fraction`, and bounded
# digits and operands keep the ints small), whether it is a percentage (its value is already divided
# by 100), its normalized text ("1200.50", "15%", "3/4"), and the digits and decimal places written
# (digits is None for a fraction "3/4"). Operators and parentheses are strings.


class _Unreadable(Exception):
    """The side cannot be read exactly; the equation is skipped."""


def _tokenize(side: str) -> list:
    """Number tuples, the operators "+", "-", "*", "/", "of", and parentheses; unmatched outer
    parentheses are dropped ("(so 3 + 4 = 7)")."""
    integer, _, decimals = side.partition(".")
    if integer.isdecimal() and (decimals.isdecimal() or not decimals):  # the common "72", "39.6": no regex
        return [_read_number(integer, decimals, "")]
    if len(side) > MAX_SIDE_CHARS:
        raise _Unreadable
    tokens: list = []
    fraction = False
    for integer, decimals, percent, slash, operator in _TOKEN.findall(side):
        if operator:
            tokens.append(_OPERATOR_NAMES.get(operator, operator))
        elif slash:
            fraction = True
        else:
            number = _read_number(integer, decimals, percent)
            if fraction:  # the denominator of "3/4": merge with the numerator before it
                fraction = False
                if not tokens or type(tokens[-1]) is not tuple:  # the regexes rule this out; never crash
                    raise _Unreadable
                numerator = tokens.pop()
                number = (
                    numerator[0] * number[1],
                    numerator[1] * number[0],  # 0 for "5/0": `_evaluate` raises ZeroDivisionError
                    False,
                    f"{numerator[3]}/{number[3]}",
                    None,
                    0,
                )
            tokens.append(number)
    if "(" not in side and ")" not in side:
        return tokens
    opened = tokens.count("(")
    if opened > MAX_PARENTHESES:
        raise _Unreadable
    closed = tokens.count(")")
    while opened > closed and tokens[0] == "(":
        del tokens[0]
        opened -= 1
    while closed > opened and tokens[-1] == ")":
        del tokens[-1]
        closed -= 1
    return tokens


def _read_number(integer: str, decimals: str, percent: str) -> tuple:
    if "," in integer:
        integer = integer.replace(",", "")
    elif not integer:
        integer = "0"  # ".5"
    if len(integer) + len(decimals) > MAX_NUMBER_DIGITS:  # bounds int() and every later operation
        raise _Unreadable
    if len(integer) > 1 and integer[0] == "0":  # a clock time or a code ("0900 - 0130"), not a quantity
        raise _Unreadable
    digits = int(integer + decimals) if decimals else int(integer)
    denominator = 10 ** len(decimals) if decimals else 1
    if percent:
        return (
            digits,
            denominator * 100,
            True,
            f"{integer}.{decimals}%" if decimals else f"{integer}%",
            digits,
            len(decimals),
        )
    return digits, denominator, False, f"{integer}.{decimals}" if decimals else integer, digits, len(decimals)


def _evaluate(tokens: list) -> tuple[int, int, bool]:
    """The exact value of a side: (numerator, denominator > 0, is a percentage), with the usual
    precedence. The flag keeps ``15% + 5%`` a percentage and refuses ``80 - 20%`` (79.8 or 64? Don't
    guess): `_Unreadable`. Division by zero raises ZeroDivisionError. Iterative: no recursion limit."""
    stack: list = []
    total = None  # the sum so far: (numerator, denominator, percent), None before the first term
    product = None  # the term being multiplied out
    sign = 1  # of that term in the sum
    operator = None  # "*", "/" or "of" waiting for its right operand
    negative = False  # a unary minus waiting for its operand
    expect_operand = True
    for token in tokens:
        if type(token) is tuple:
            operand = token
        elif expect_operand:
            if token == "(":
                stack.append((total, product, sign, operator, negative))
                total, product, sign, operator, negative = None, None, 1, None, False
            elif token == "-":
                negative = not negative
            else:
                raise _Unreadable
            continue
        elif token == ")":
            if not stack:
                raise _Unreadable
            operand = _add(total, product, sign)
            total, product, sign, operator, negative = stack.pop()
        elif token == "+" or token == "-":
            total = _add(total, product, sign)
            product, sign, expect_operand = None, (1 if token == "+" else -1), True
            continue
        elif token == "*" or token == "/" or token == "of":
            operator, expect_operand = token, True
            continue
        else:
            raise _Unreadable
        numerator, denominator, percent = operand[0], operand[1], operand[2]
        if denominator == 0:
            raise ZeroDivisionError
        if negative:
            numerator, negative = -numerator, False
        if product is None:
            product = (numerator, denominator, percent)
        elif operator == "/":
            if numerator == 0:
                raise ZeroDivisionError
            if numerator < 0:
                numerator, denominator = -numerator, -denominator
            product = (product[0] * denominator, product[1] * numerator, False)
        else:  # "20% of 80" is 16, not a percentage
            product = (product[0] * numerator, product[1] * denominator, False)
        operator, expect_operand = None, False
    if stack or expect_operand:
        raise _Unreadable
    return _add(total, product, sign)


def _add(total: tuple | None, term: tuple, sign: int) -> tuple[int, int, bool]:
    numerator = term[0] if sign > 0 else -term[0]
    if total is None:
        return numerator, term[1], term[2]
    if total[2] != term[2]:
        raise _Unreadable  # a percentage plus a plain number
    if total[1] == term[1]:
        return total[0] + numerator, term[1], term[2]
    return total[0] * term[1] + numerator * total[1], total[1] * term[1], term[2]


def _normalize(tokens: list) -> str:
    """Single spaces around binary operators; signs and parentheses glued."""
    parts = []
    previous = None
    for token in tokens:
        if type(token) is tuple:
            parts.append(token[3])
        elif token == "(" or token == ")":
            parts.append(token)
        elif token == "-" and (previous is None or (type(previous) is not tuple and previous != ")")):
            parts.append("-")  # a sign
        else:
            parts.append(f" {token} ")
        previous = token
    return "".join(parts)


# --------------------------------------------------------------------------------------------------
# Judging one equation
# --------------------------------------------------------------------------------------------------


@lru_cache(maxsize=JUDGE_CACHE_SIZE)
def _judge(left: str, right: str, cents: bool = False, approximate: bool = False) -> WrongEquation | bool | None:
    """True if the equation holds, the `WrongEquation` if not, None if it cannot be read exactly.
    ``cents``: the right side is followed by "cents", so it may state the value times 100.
    ``approximate``: the line marks the result as approximate, so a non-integer may be rounded to an integer."""
    try:
        left_tokens = _tokenize(left)
        right_tokens = _tokenize(right)
        try:
            actual = _evaluate(left_tokens)
        except ZeroDivisionError:
            actual = None
    except _Unreadable:
        return None
    if actual is not None:
        hundredths = cents or "%" in left
        if _right_side_holds(actual, hundredths, right_tokens, approximate):
            return True
        percent = actual[2]
        shown = _format_value(Fraction(actual[0] * (100 if percent else 1), actual[1])) + ("%" if percent else "")
    else:
        shown = "undefined"
    return WrongEquation(_normalize(left_tokens), _normalize(right_tokens), shown)


def _right_side_holds(actual: tuple[int, int, bool], hundredths: bool, right: list, approximate: bool) -> bool:
    negative = right[0] == "-" and len(right) > 1
    first = right[1 if negative else 0]
    # A single number, or the start of a running total "= 72 + 10".
    if type(first) is tuple and _number_holds(actual, hundredths, first, negative, approximate):
        return True
    if len(right) <= 1 + negative:
        return False
    try:
        numerator, denominator, _ = _evaluate(right)
    except (_Unreadable, ZeroDivisionError):
        return False
    return numerator * actual[1] == actual[0] * denominator


def _number_holds(
    actual: tuple[int, int, bool], hundredths: bool, number: tuple, negative: bool, approximate: bool = False
) -> bool:
    """Equal, or equal once rounded to the decimals written (a tie may round either way): |actual -
    written| is at most half a unit in the last place written. An integer written for a value that is
    not one (``48 / 5 = 10``) holds only when ``approximate``. ``hundredths``: the number may also
    state the value times 100 ("%" as a unit label on either side: "25 - 5 = 20%", "15% + 5% = 20";
    cents). A fraction "3/4" must be exact."""
    numerator, denominator = actual[0], actual[1]
    digits = number[4]
    if digits is None:
        return number[1] != 0 and numerator * number[1] == (-number[0] if negative else number[0]) * denominator
    written = -digits if negative else digits
    places = number[5]
    scale = 10**places
    if _rounds_to(numerator * scale, denominator, written, places, approximate):
        return True
    if hundredths or number[2]:
        return _rounds_to(numerator * 100 * scale, denominator, written, places, approximate)
    return False


def _rounds_to(numerator: int, denominator: int, written: int, places: int, approximate: bool) -> bool:
    """Whether ``numerator / denominator`` (already scaled to the last place written) is ``written``,
    exactly or rounded; rounded to an integer (no decimal places) only when ``approximate``."""
    if numerator == written * denominator:
        return True
    if places == 0 and not approximate:
        return False
    return abs(numerator - written * denominator) * 2 <= denominator


def _format_value(value: Fraction) -> str:
    """A terminating value as a decimal ("0.25", "-3"), any other as "a/b"."""
    if value.denominator == 1:
        return str(value.numerator)
    denominator = value.denominator
    twos = fives = 0
    while denominator % 2 == 0:
        denominator //= 2
        twos += 1
    while denominator % 5 == 0:
        denominator //= 5
        fives += 1
    if denominator != 1:
        return f"{value.numerator}/{value.denominator}"
    places = max(twos, fives)
    digits = str(abs(value.numerator) * 10**places // value.denominator).rjust(places + 1, "0")
    sign = "-" if value < 0 else ""
    return f"{sign}{digits[:-places]}.{digits[-places:]}"
