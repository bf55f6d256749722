"""One equation's two sides read and judged exactly: tokenized, evaluated as exact rationals, and the written result
compared with the value (`arithmetic` finds the equations in a draft; this module reads and judges each).

How an equation is judged (exact rational arithmetic, usual precedence; a fraction written without
spaces binds tighter than any operator, so ``60 / 3/4 = 80`` divides by three quarters):

* Each ``=`` is checked on its own: the expression immediately left of it against what is
  immediately right. In a chain ``2 + 3 = 5 + 1 = 6`` that is ``2 + 3 = 5 …`` then ``5 + 1 = 6``.
* A number on the right is right if it equals the exact value, or equals it rounded to the number
  of decimals written, either way at a tie (``10/3 = 3.33``, ``2/3 = 0.67``; not the truncation
  ``2/3 = 0.66``). Rounding to an integer is different: a non-integer value written as an integer
  (``48 / 5 = 10``, ``100/3 = 33``) is wrong unless its line marks it as approximate (`arithmetic.APPROXIMATE`:
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
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

# Longer digit runs are identifiers or junk, not arithmetic; also bounds the size of every value.
MAX_NUMBER_DIGITS = 30
# Deeper nesting is not arithmetic a draft writes; also bounds the evaluator's stack.
MAX_PARENTHESES = 32
# Bounds the tokenizer's work on one side; a real side is a few dozen characters.
MAX_SIDE_CHARS = 1_000
# Drafts of one question repeat the same equations; a cached verdict costs well under a microsecond.
# At most 2 x MAX_SIDE_CHARS characters a key: a few megabytes at worst.
JUDGE_CACHE_SIZE = 1_024


@dataclass(frozen=True)
class WrongEquation:
    """One equation whose written result is not the exact value of its left side."""

    expression: str  # the left side, normalized: "48 + 24", "(3 + 4) * 2", "50% of 80"
    written: str  # the right side as written, normalized: "73", "1500", "7 * 3"
    actual: str  # the exact value: "72", "0.25", "1/3", "20%", or "undefined"


# --------------------------------------------------------------------------------------------------
# Reading and evaluating one side
# --------------------------------------------------------------------------------------------------

# Tokens of a side `arithmetic`'s regexes accepted: a number (integer digits, decimals, "%"), a fraction
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


class Unreadable(Exception):
    """The side cannot be read exactly; the equation is skipped."""


def tokenize(side: str) -> list:
    """Number tuples, the operators "+", "-", "*", "/", "of", and parentheses; unmatched outer
    parentheses are dropped ("(so 3 + 4 = 7)")."""
    integer, _, decimals = side.partition(".")
    if integer.isdecimal() and (decimals.isdecimal() or not decimals):  # the common "72", "39.6": no regex
        return [_read_number(integer, decimals, "")]
    if len(side) > MAX_SIDE_CHARS:
        raise Unreadable
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
                    raise Unreadable
                numerator = tokens.pop()
                number = (
                    numerator[0] * number[1],
                    numerator[1] * number[0],  # 0 for "5/0": `evaluate` raises ZeroDivisionError
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
        raise Unreadable
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
        raise Unreadable
    if len(integer) > 1 and integer[0] == "0":  # a clock time or a code ("0900 - 0130"), not a quantity
        raise Unreadable
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


def evaluate(tokens: list) -> tuple[int, int, bool]:
    """The exact value of a side: (numerator, denominator > 0, is a percentage), with the usual
    precedence. The flag keeps ``15% + 5%`` a percentage and refuses ``80 - 20%`` (79.8 or 64? Don't
    guess): `Unreadable`. Division by zero raises ZeroDivisionError. Iterative: no recursion limit."""
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
                raise Unreadable
            continue
        elif token == ")":
            if not stack:
                raise Unreadable
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
            raise Unreadable
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
        raise Unreadable
    return _add(total, product, sign)


def _add(total: tuple | None, term: tuple, sign: int) -> tuple[int, int, bool]:
    numerator = term[0] if sign > 0 else -term[0]
    if total is None:
        return numerator, term[1], term[2]
    if total[2] != term[2]:
        raise Unreadable  # a percentage plus a plain number
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
def judge(left: str, right: str, cents: bool = False, approximate: bool = False) -> WrongEquation | bool | None:
    """True if the equation holds, the `WrongEquation` if not, None if it cannot be read exactly.
    ``cents``: the right side is followed by "cents", so it may state the value times 100.
    ``approximate``: the line marks the result as approximate, so a non-integer may be rounded to an integer."""
    try:
        left_tokens = tokenize(left)
        right_tokens = tokenize(right)
        try:
            actual = evaluate(left_tokens)
        except ZeroDivisionError:
            actual = None
    except Unreadable:
        return None
    if actual is not None:
        hundredths = cents or "%" in left
        if _right_side_holds(actual, hundredths, right_tokens, approximate):
            return True
        percent = actual[2]
        shown = format_result(actual[0], actual[1], percent)
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
        numerator, denominator, _ = evaluate(right)
    except (Unreadable, ZeroDivisionError):
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


def format_result(numerator: int, denominator: int, percent: bool) -> str:
    """A computed value as an equation would state it: `0.25` as `25%` where the left side is a percentage."""
    if percent:
        return format_value(Fraction(numerator * 100, denominator)) + "%"
    return format_value(Fraction(numerator, denominator))


def format_value(value: Fraction) -> str:
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
