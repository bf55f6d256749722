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

How an equation is judged (values are exact `Fraction` arithmetic, usual precedence):

* Each ``=`` is checked on its own: the expression immediately left of it against what is
  immediately right. In a chain ``2 + 3 = 5 + 1 = 6`` that is ``2 + 3 = 5 …`` then ``5 + 1 = 6``.
* A number on the right is right if it equals the exact value, or equals it rounded to the number
  of decimals written, either way at a tie (``10/3 = 3.33``, ``2/3 = 0.67``, ``100/3 = 33``; not the
  truncation ``2/3 = 0.66``).
* An expression on the right (``(3 + 4) * 2 = 7 * 2``, or a running total ``48 + 24 = 72 + 10``) is
  right if it has exactly the left side's value or if its first number is right by the rule above,
  unless that number is a numerator: ``1 + 2 = 3/4`` is wrong.
* ``15%`` is 0.15 in a calculation, but where either side has a ``%`` a number on the right may also
  state the value in percent (``15% + 5% = 20``, ``25 - 5 = 20%``). A sum that mixes a percentage
  with a plain number (``80 - 20% = 64``) is ambiguous and skipped.
* Division by zero on the left is always wrong, with the actual value ``undefined``.
* Equations that cannot be read exactly (a number over `MAX_NUMBER_DIGITS` digits, more than
  `MAX_PARENTHESES` parentheses, unbalanced parentheses) are skipped and not counted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

# Longer digit runs are identifiers or junk, not arithmetic; also bounds the size of every value.
MAX_NUMBER_DIGITS = 30
# More than any draft writes on one line; bounds the regex's backtracking to linear time.
MAX_OPERANDS = 32
# Also bounds the parser's recursion depth.
MAX_PARENTHESES = 32
# A draft with more equations than this is not a draft; the rest are not checked.
MAX_EQUATIONS = 200
# Skipped candidates (over-long numbers, ambiguous percentages) also cost work: bound them too.
MAX_CANDIDATES = 1_000
# Drafts are a few hundred tokens; only the start of anything far larger is read.
MAX_SCAN_CHARS = 200_000


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
# A number as in `parsing`, plus GSM8K's ".5"; the digits are validated later, by the tokenizer.
_NUMBER = r"(?>[-−]?\$?(?:(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?|\.\d+)%?)"
# "x" only spaced or glued on both sides ("12 x 50", "12x50"): "3x-5" and "2x + 3" are algebra.
_OPERATOR = r"[-+*/×÷·⋅−–]|(?<=\d)x(?=[\d$(])|(?<=[ \t])x(?=[ \t])|\\times|\\cdot|\\div"
_OPERAND = rf"(?:\({_SPACE})*+{_NUMBER}(?:{_SPACE}\))*+"
_BINARY = rf"(?:{_SPACE}(?:{_OPERATOR}){_SPACE}|(?<=%)[ \t]+of[ \t]+)"
# Not the tail of a word, number, date, time or power ("v2", "1.5", "12/25", "10:30", "2^3").
_LEFT_BOUNDARY = r"(?<![\w.,:/^+\-−–×÷·⋅%])"
_EQUATION = re.compile(
    rf"""
    (?P<left>{_LEFT_BOUNDARY}{_OPERAND}(?:{_BINARY}{_OPERAND}){{1,{MAX_OPERANDS - 1}}})
    {_SPACE}=(?![=>])
    (?=                                 # a lookahead: the right side can be the next left side
        {_SPACE}\$?(?:<<[^<>\n]{{0,200}}>>)?        # "= $<<12/60=0.2>>0.2": skip the annotation
        (?P<right>{_OPERAND}(?:{_BINARY}{_OPERAND}){{0,{MAX_OPERANDS - 1}}})
        (?!
            [:\w]                       # a time "= 10:30", algebra "= 5A / 5"
          | {_SPACE}\d                   # a number with spaced thousands "= 18 000"
          | {_SPACE}[-+*/×÷·⋅−–]{_SPACE}[A-Za-z](?![A-Za-z])   # algebra "= 32 + x - 32", "= 90/x"
          | [ \t]+and[ \t]+\(?\d+/        # a mixed number "= 5 and 2/3"
        )
        (?P<cents>[ \t]+cents?\b)?       # "$2.50 - $2.24 = 26 cents"
    )
    """,
    re.VERBOSE,
)
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
    text = text[:MAX_SCAN_CHARS]
    checked = 0
    wrong: list[WrongEquation] = []
    for candidates, match in enumerate(_EQUATION.finditer(text)):
        if checked >= MAX_EQUATIONS or candidates >= MAX_CANDIDATES:
            break
        if _is_fragment(text, match.start()):
            continue
        verdict = _judge(match["left"], match["right"], cents=match["cents"] is not None)
        if verdict is None:
            continue
        checked += 1
        if verdict is not True and verdict not in wrong:
            wrong.append(verdict)
    return ArithmeticReport(checked, tuple(wrong))


def _is_fragment(text: str, start: int) -> bool:
    """True when what precedes the match shows it is only the tail of something longer, which must
    not be checked on its own: an operator or power sign (``2x + 3 * 2 = 8``, ``2 ** 3 * 2``, a chain
    of more than `MAX_OPERANDS` operands), a number (the mixed numbers ``8 x 1 1/2`` and
    ``1 and 1/4``, spaced thousands ``14, 400``), or a value before a parenthesis (``2(50 + 100)``,
    ``f(3 + 4)``). A bullet (``- 3 + 4 = 7``) and Markdown emphasis (``**3 + 4 = 7**``) are not
    operators."""
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
    if last == ",":
        return stripped[-2:-1].isdigit()
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

_OPERAND_TOKEN = re.compile(
    r"[ \t]*(?:(?P<open>\()|(?P<sign>[-−]?)\$?(?P<integer>[\d,]*)(?:\.(?P<decimals>\d+))?(?P<percent>%?))"
)
_OPERATOR_TOKEN = re.compile(r"[ \t]*(?:(?P<close>\))|(?P<operator>[-+*/x×÷·⋅−–]|\\times|\\cdot|\\div|of))")
_OPERATOR_NAMES = {"−": "-", "–": "-", "x": "*", "×": "*", "·": "*", "⋅": "*", "\\times": "*", "\\cdot": "*"}
_OPERATOR_NAMES.update({"÷": "/", "\\div": "/"})
# A "/" with no space around it between two numbers writes a fraction, which binds tighter than any
# operator: "60 / 3/4 = 80" divides by three quarters. Elsewhere it is an ordinary "/".
_FRACTION_SLASH = "⁄"


@dataclass(frozen=True)
class _Number:
    text: str  # normalized: "-1200.50", "15%"
    value: int | Fraction  # exact; a percentage is already divided by 100
    written: int | Fraction  # the value in the units written: 15 for "15%"
    decimals: int
    percent: bool


class _Unreadable(Exception):
    """The side cannot be read exactly; the equation is skipped."""


def _tokenize(side: str) -> list[object]:
    """Numbers (`_Number`), operators ("+", "-", "*", "/", `_FRACTION_SLASH`, "of") and parentheses, as the
    regex already guaranteed; unmatched outer parentheses are dropped ("(so 3 + 4 = 7)")."""
    tokens: list[object] = []
    position, expect_operand = 0, True
    while position < len(side):
        if expect_operand:
            match = _OPERAND_TOKEN.match(side, position)
            if match["open"]:
                tokens.append("(")
            else:
                tokens.append(_read_number(match))
                expect_operand = False
        else:
            match = _OPERATOR_TOKEN.match(side, position)
            if match is None:  # trailing spaces
                break
            if match["close"]:
                tokens.append(")")
            else:
                operator = match["operator"]
                if (
                    operator == "/"
                    and match.end() - match.start() == 1
                    and side[match.end() : match.end() + 1] not in " \t"
                ):
                    operator = _FRACTION_SLASH
                tokens.append(_OPERATOR_NAMES.get(operator, operator))
                expect_operand = True
        position = match.end()
    opened = tokens.count("(")
    if opened > MAX_PARENTHESES:
        raise _Unreadable
    closed = tokens.count(")")
    while opened > closed and tokens[0] == "(":
        tokens.pop(0)
        opened -= 1
    while closed > opened and tokens[-1] == ")":
        tokens.pop()
        closed -= 1
    if opened != closed:
        raise _Unreadable
    return tokens


def _read_number(match: re.Match[str]) -> _Number:
    integer = match["integer"].replace(",", "") or "0"  # ".5"
    decimals = match["decimals"] or ""
    if len(integer) + len(decimals) > MAX_NUMBER_DIGITS:  # bounds int() and every later operation
        raise _Unreadable
    if len(integer) > 1 and integer[0] == "0":  # a clock time or a code ("0900 - 0130"), not a quantity
        raise _Unreadable
    sign = "-" if match["sign"] else ""
    percent = bool(match["percent"])
    written: int | Fraction = int(sign + integer + decimals)
    if decimals:
        written = Fraction(written, 10 ** len(decimals))
    text = f"{sign}{integer}.{decimals}" if decimals else f"{sign}{integer}"
    value = Fraction(written, 100) if percent else written
    return _Number(text + ("%" if percent else ""), value, written, len(decimals), percent)


class _Parser:
    """Precedence climbing over `_tokenize`'s tokens. Values carry a flag "is a percentage" so that
    ``15% + 5%`` stays one and ``80 - 20%`` can be refused."""

    def __init__(self, tokens: list[object]):
        self.tokens = tokens
        self.position = 0

    def parse(self) -> tuple[int | Fraction, bool]:
        result = self._sum()
        if self.position != len(self.tokens):
            raise _Unreadable
        return result

    def _peek(self) -> object:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def _sum(self) -> tuple[int | Fraction, bool]:
        value, percent = self._product()
        while self._peek() in ("+", "-"):
            operator = self.tokens[self.position]
            self.position += 1
            right, right_percent = self._product()
            if percent != right_percent:  # "80 - 20%": 79.8 or 64? Don't guess.
                raise _Unreadable
            value = value + right if operator == "+" else value - right
        return value, percent

    def _product(self) -> tuple[int | Fraction, bool]:
        value, percent = self._operand()
        while self._peek() in ("*", "/", _FRACTION_SLASH, "of"):
            operator = self.tokens[self.position]
            self.position += 1
            right, _ = self._operand()
            percent = False  # "20% of 80" is 16, not a percentage
            value = _divide(value, right) if operator in ("/", _FRACTION_SLASH) else value * right
        return value, percent

    def _operand(self) -> tuple[int | Fraction, bool]:
        token = self._peek()
        self.position += 1
        if isinstance(token, _Number):
            denominator = self.tokens[self.position + 1] if self.position + 1 < len(self.tokens) else None
            if self._peek() != _FRACTION_SLASH or not isinstance(denominator, _Number):
                return token.value, token.percent
            self.position += 2
            return _divide(token.value, denominator.value), False
        if token != "(":
            raise _Unreadable
        result = self._sum()
        if self._peek() != ")":
            raise _Unreadable
        self.position += 1
        return result


def _divide(numerator: int | Fraction, denominator: int | Fraction) -> int | Fraction:
    if type(numerator) is type(denominator) is int:
        return Fraction(numerator, denominator)  # int / int would be a float
    return numerator / denominator


def _normalize(tokens: list[object]) -> str:
    parts = []
    for token in tokens:
        if isinstance(token, _Number):
            parts.append(token.text)
        elif token in ("(", ")"):
            parts.append(token)
        elif token == _FRACTION_SLASH:
            parts.append("/")
        else:
            parts.append(f" {token} ")
    return "".join(parts)


# --------------------------------------------------------------------------------------------------
# Judging one equation
# --------------------------------------------------------------------------------------------------


def _judge(left: str, right: str, cents: bool = False) -> WrongEquation | bool | None:
    """True if the equation holds, the `WrongEquation` if not, None if it cannot be read exactly.
    ``cents``: the right side is followed by "cents", so it may state the value times 100."""
    try:
        left_tokens = _tokenize(left)
        right_tokens = _tokenize(right)
        try:
            actual, percent = _Parser(left_tokens).parse()
        except ZeroDivisionError:
            actual, percent = None, False
    except _Unreadable:
        return None
    if actual is not None and _right_side_holds(actual, cents or _has_percent(left_tokens), right_tokens):
        return True
    shown = "undefined" if actual is None else _format_value(actual * 100 if percent else actual, percent)
    return WrongEquation(_normalize(left_tokens), _normalize(right_tokens), shown)


def _right_side_holds(actual: int | Fraction, hundredths: bool, right: list[object]) -> bool:
    first = right[0]
    # A single number, or the start of a running total "= 72 + 10"; not the numerator of "= 3/4".
    if (
        isinstance(first, _Number)
        and right[1:2] not in (["/"], [_FRACTION_SLASH])
        and _number_holds(actual, hundredths, first)
    ):
        return True
    if len(right) == 1:
        return False
    try:
        value, _ = _Parser(right).parse()
    except (_Unreadable, ZeroDivisionError):
        return False
    return value == actual


def _number_holds(actual: int | Fraction, hundredths: bool, number: _Number) -> bool:
    """Equal, or equal once rounded to the decimals written (a tie may round either way).
    ``hundredths``: the number may also state the value times 100 (percent, cents)."""
    # "%" may be a unit label on either side: "25 - 5 = 20%", "15% + 5% = 20".
    candidates = (actual, actual * 100) if hundredths or number.percent else (actual,)
    scale = 2 * 10**number.decimals
    return any(abs(candidate - number.written) * scale <= 1 for candidate in candidates)


def _has_percent(tokens: list[object]) -> bool:
    return any(isinstance(token, _Number) and token.percent for token in tokens)


def _format_value(value: int | Fraction, percent: bool) -> str:
    """A terminating value as a decimal ("0.25", "-3"), any other as "a/b"; "%" appended if asked."""
    suffix = "%" if percent else ""
    if type(value) is int or value.denominator == 1:
        return f"{int(value)}{suffix}"
    denominator = value.denominator
    twos = fives = 0
    while denominator % 2 == 0:
        denominator //= 2
        twos += 1
    while denominator % 5 == 0:
        denominator //= 5
        fives += 1
    if denominator != 1:
        return f"{value.numerator}/{value.denominator}{suffix}"
    places = max(twos, fives)
    scaled = abs(value.numerator) * 10**places // value.denominator
    sign = "-" if value < 0 else ""
    digits = str(scaled).rjust(places + 1, "0")
    return f"{sign}{digits[:-places]}.{digits[-places:]}{suffix}"
