"""Structural duplicates: drafts that differ only in wording share one verdict.

Only prose answers to a free-text question: there the verdict rests on the numbers and the computations. A program's
meaning is in its names (`best_rows(pool, …)` and `best_rows([a for a in catalog if a["id"] in pool], …)` have the
same numbers and operators, and one fails where the other finds the optimum), and a structured plan's in its text
fields too (a promotion's message with a forbidden claim): those are duplicates only when their text is the same.
"""

from __future__ import annotations

import re
from decimal import Decimal

from .numbers import iter_numbers

_OPERATOR = re.compile(r"[-+*/×÷=<>%]")


def duplicate_key(text: str, kind: str, structured: bool) -> str:
    """The key under which drafts share one verdict: the structural signature of a prose answer to a free-text
    question; for a program or a structured answer, its whitespace-normalized text."""
    if kind == "program" or structured:
        return f"{kind or 'prose'}:" + " ".join(text.split())
    return structural_signature(text)


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
