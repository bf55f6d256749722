"""Structural duplicates: drafts that differ only in wording share one verdict."""

from __future__ import annotations

import re
from decimal import Decimal

from .numbers import iter_numbers

_OPERATOR = re.compile(r"[-+*/×÷=<>%]")


def structural_signature(text: str) -> str:
    """The draft's numbers (by value: 1,200 → 1200, 5.0 → 5) and operators in order; drafts that differ only in
    wording share it. Without any number or operator, the whitespace-normalized text."""
    tokens: list[str] = []
    position = 0
    for number in iter_numbers(text):
        tokens += _OPERATOR.findall(text, position, number.start)
        if "/" in number.text:  # "48/2" is the division 48 / 2 here, written without spaces
            numerator, denominator = number.text.split("/")
            tokens += [numerator, "/", denominator]
        else:
            tokens.append(format(Decimal(number.value).normalize(), "f"))
        position = number.end
    tokens += _OPERATOR.findall(text, position)
    return " ".join(tokens) if tokens else "text:" + " ".join(text.lower().split())
