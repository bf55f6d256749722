"""LaTeX as small models write it, turned into the plain arithmetic the other verifier modules read.

Many instruction-tuned models answer in LaTeX: ``\\frac{48}{2} = 24``, ``48 \\times 2 = 96``,
``\\boxed{72}``, ``\\( 48 + 24 = 72 \\)``, ``\\$1,200``. `to_plain` rewrites exactly that much and
keeps every line break where it was (line-based rules, such as the approximation markers of
`arithmetic`, still see the draft's lines):

* ``\\frac{a}{b}`` (also ``\\dfrac``, ``\\tfrac``, nested) -> ``a/b`` when both are plain numbers
  (a fraction, which binds tighter than any operator), else ``(a / b)``; a plain number is one number
  as `selection.numbers` reads it, not a fraction or a percentage, written in its normalized text
  (``\\frac{1,200}{3}`` -> ``1200/3``, ``\\frac{−3}{4}`` -> ``-3/4``); after a digit (the mixed number
  ``2\\frac{1}{2}``) always ``(a / b)``, which the arithmetic check skips as a fragment;
* ``\\times`` -> ``×``, ``\\cdot`` -> ``·``, ``\\div`` -> ``÷``, ``\\approx`` -> ``≈``;
* ``\\left(`` / ``\\right)`` -> ``(`` / ``)``; ``\\left.`` and ``\\right.`` disappear;
* the math delimiters ``\\(`` ``\\)`` ``\\[`` ``\\]`` become spaces; ``$`` is left alone (it is also
  the currency sign, which the number grammar already reads);
* ``\\boxed{x}``, ``\\text{x}``, ``\\mathrm{x}``, ``\\textbf{x}``, ``\\mathbf{x}`` -> ``x``;
* ``\\$`` -> ``$``, ``\\%`` -> ``%``, ``{,}`` -> ``,`` (thousands), ``\\,`` ``\\;`` ``\\ `` -> a space,
  ``\\!`` -> nothing. ``~`` stays: drafts use it for "approximately".

Pure and bounded: no I/O, nothing raises, linear in the text (nesting is unwrapped innermost first,
at most `MAX_NESTING` times).
"""

from __future__ import annotations

import re

from deliberate.selection.numbers import NUMBER, to_number

# Deeper nesting than this is not something a draft writes; bounds the unwrapping loop.
MAX_NESTING = 8
# Unclosed \boxed{ tried from the last one backwards before giving up; bounds `last_boxed`.
MAX_BOXED_TRIED = 4

_WRAPPERS = r"boxed|text|textbf|textrm|mathrm|mathbf|mbox|operatorname"
# Innermost first: the braces hold no other braces.
_FRAC = re.compile(r"\\[dt]?frac[ \t]*\{([^{}\n]*)\}[ \t]*\{([^{}\n]*)\}")
_WRAPPED = re.compile(rf"\\(?:{_WRAPPERS})[ \t]*\{{([^{{}}]*)\}}")
_SYMBOLS = {
    "\\times": "×",
    "\\cdot": "·",
    "\\div": "÷",
    "\\approx": "≈",
    "\\left(": "(",
    "\\right)": ")",
    "\\left.": "",
    "\\right.": "",
    "\\(": " ",
    "\\)": " ",
    "\\[": " ",
    "\\]": " ",
    "\\$": "$",
    "\\%": "%",
    "{,}": ",",
    "\\,": " ",
    "\\;": " ",
    "\\!": "",
    "\\ ": " ",
}
# Longest first, so "\\times" is not read as "\\t…"; a command must not run on into letters ("\\timesx").
_SYMBOL = re.compile(
    "|".join(
        re.escape(token) + (r"(?![A-Za-z])" if token[-1].isalpha() else "")
        for token in sorted(_SYMBOLS, key=len, reverse=True)
    )
)
_BOXED = re.compile(r"\\boxed[ \t]*\{")


def to_plain(text: str) -> str:
    """``text`` with the LaTeX above rewritten; text without a backslash or "{," is returned as is."""
    if not isinstance(text, str) or ("\\" not in text and "{," not in text):
        return text
    for _ in range(MAX_NESTING):
        unwrapped = _FRAC.sub(_fraction, text)
        unwrapped = _WRAPPED.sub(r"\1", unwrapped)
        if unwrapped == text:
            break
        text = unwrapped
    return _SYMBOL.sub(lambda match: _SYMBOLS[match.group(0)], text)


def _plain_number(text: str) -> str | None:
    """The normalized text of ``text`` when it is one plain number, spaces around it aside (`selection.numbers`:
    ``" 48 "`` -> ``"48"``, ``"1,200"`` -> ``"1200"``, ``"−3"`` -> ``"-3"``, ``"$5"`` -> ``"5"``), else None.

    A fraction (``1/2``) or a percentage (``15%``) is not plain: written as ``a/b`` it would be read as a
    different fraction (``1/2/3``) or lose its ``%``, so it stays in parentheses."""
    match = NUMBER.fullmatch(text.strip(" \t"))
    if match is None or match["denominator"] is not None or match[0].endswith("%"):
        return None
    number = to_number(match)  # None for an over-long digit run
    return number.text if number is not None else None


def _fraction(match: re.Match[str]) -> str:
    numerator, denominator = match[1], match[2]
    before = match.string[max(0, match.start() - 16) : match.start()].rstrip(" \t")[-1:]
    plain_numerator = _plain_number(numerator)
    plain_denominator = _plain_number(denominator)
    if plain_numerator is not None and plain_denominator is not None and not before.isdigit():
        return f"{plain_numerator}/{plain_denominator}"
    numerator = plain_numerator if plain_numerator is not None else f"({numerator.strip()})"
    denominator = plain_denominator if plain_denominator is not None else f"({denominator.strip()})"
    return f"({numerator} / {denominator})"


def last_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{…}`` in ``text`` (balanced braces, as written), or None when
    there is none or it is never closed (only the last `MAX_BOXED_TRIED` are tried, each over at most
    1,000 characters)."""
    if not isinstance(text, str) or "\\boxed" not in text:
        return None
    starts = [match.end() for match in _BOXED.finditer(text)]
    for start in reversed(starts[-MAX_BOXED_TRIED:]):
        depth = 1
        for position in range(start, min(len(text), start + 1_000)):  # an answer is short
            char = text[position]
            if char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
                if depth == 0:
                    return text[start:position]
    return None
