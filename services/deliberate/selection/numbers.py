"""The project's one number parser: how a number is written in a draft, an answer or a gold label.

Pure: no I/O, nothing raises, work is bounded (a 10,000-digit run is skipped, not converted).

* Numbers may be written with a leading minus (ASCII ``-`` or Unicode ``−``), a ``$`` before the
  digits, thousands separators (``1,200``), a decimal part (``18.00``), a trailing ``%`` and as a
  simple fraction (``3/4``). A digit run longer than ``MAX_NUMBER_DIGITS`` is not treated as a number.
* The *normalized text* of a number drops ``$``, ``%`` and thousands separators, writes the minus
  as ``-`` and keeps the decimal places as written: ``"$1,200.50"`` -> ``"1200.50"``,
  ``"$18.00"`` -> ``"18.00"``, ``"−7%"`` -> ``"-7"``, ``"3/4"`` -> ``"3/4"``.
* The *value* of a number is a ``Decimal`` (exact for integers and decimals) or a ``Fraction``
  (for ``a/b``). A percentage keeps the number as written: ``"15%"`` -> ``Decimal("15")``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

MAX_NUMBER_DIGITS = 100

NUMBER = re.compile(
    r"""
    (?<![\w./])                         # not the tail of a word, a decimal or a date ("12/25/2024")
    (?P<sign>[-−]?)                     # no space allowed: "- 5 apples" is a bullet, not -5
    \$?
    (?P<dollar_sign>[-−]?)              # "$-5"
    (?P<integer>\d{1,3}(?:,\d{3})+|\d+)
    (?:\.(?P<decimals>\d+)|/(?P<denominator>\d+))?
    (?!\d)(?!/\d)                       # the whole digit run, and not the start of a date
    %?
    """,
    re.VERBOSE,
)


@dataclass(frozen=True)
class NumberMatch:
    """One number found in a text: its normalized text and exact value."""

    text: str
    value: Decimal | Fraction
    start: int
    end: int


def extract_number(text: str) -> Decimal | Fraction | None:
    """The value of the first number written in ``text``, or None.

    ``"$1,200.50"`` -> ``Decimal("1200.50")``, ``"-3/4 cup"`` -> ``Fraction(-3, 4)``,
    ``"about 15% more"`` -> ``Decimal("15")``. Never raises; over-long digit runs are skipped.
    """
    for number in iter_numbers(text):
        return number.value
    return None


def iter_numbers(text: str) -> Iterator[NumberMatch]:
    """Every number in ``text``, left to right (see the module docstring for what counts)."""
    if not isinstance(text, str):
        return
    for match in NUMBER.finditer(text):
        number = to_number(match)
        if number is not None:
            yield number


def last_number(text: str) -> NumberMatch | None:
    """The last number in ``text``; converts only that one (a draft may hold hundreds of thousands)."""
    last_match = None
    for match in NUMBER.finditer(text):
        if is_acceptable(match):
            last_match = match
    return to_number(last_match) if last_match is not None else None


def normalized_if_number(text: str) -> str:
    """The normalized text when ``text`` is one number and nothing else (``"$1,200"`` -> ``"1200"``), else ``text``."""
    match = NUMBER.fullmatch(text)
    number = to_number(match) if match is not None else None
    return number.text if number is not None else text


def is_acceptable(match: re.Match[str]) -> bool:
    """Cheap checks before any conversion: bounded digits, no division by zero."""
    digits = match["integer"].replace(",", "") + (match["decimals"] or "") + (match["denominator"] or "")
    if len(digits) > MAX_NUMBER_DIGITS:  # bounds int()/Decimal() work on hostile digit strings
        return False
    return match["denominator"] is None or match["denominator"].strip("0") != ""


def to_number(match: re.Match[str]) -> NumberMatch | None:
    if not is_acceptable(match):
        return None
    integer = match["integer"].replace(",", "")
    decimals = match["decimals"]
    denominator = match["denominator"]
    negative = bool(match["sign"] or match["dollar_sign"])
    sign = "-" if negative else ""
    if denominator is not None:
        text = f"{sign}{integer}/{denominator}"
        value: Decimal | Fraction = Fraction(int(f"{sign}{integer}"), int(denominator))
    else:
        text = f"{sign}{integer}.{decimals}" if decimals is not None else f"{sign}{integer}"
        value = Decimal(text)
    return NumberMatch(text=text, value=value, start=match.start(), end=match.end())
