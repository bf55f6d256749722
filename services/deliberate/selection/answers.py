"""The project's one answer identity: when two final answers are the same answer.

Used wherever answers are compared: the answer share and the vote of selection, the quorum of early stopping,
the Scheduler's check that a refined answer still states the checked draft's answer, and the evaluation's
check against a gold label. An answer that states a number is that number, exactly: LaTeX is read
(``\\boxed{}``, ``\\frac{}{}``, ``\\text{}``), ``$``, thousands separators, ``%`` and units are dropped, and in
``48 + 24 = 72 clips`` the part after the last ``=`` counts — so ``72``, ``72.00``, ``\\boxed{72}``, ``$72`` and
"… which is 72 clips" are one answer. A structured answer (a JSON object or list: a plan) is its whole value,
whatever the key order, spacing or ``5000`` / ``5000.0`` — two plans agree only when every field does. Any other
answer is its whitespace-normalized, lower-cased text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from decimal import Decimal
from fractions import Fraction

from .numbers import iter_numbers

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_FRAC = re.compile(r"\\[dt]?frac\s*\{\s*([^{}]*?)\s*\}\s*\{\s*([^{}]*?)\s*\}")
_TEXT = re.compile(r"\\(?:text|textbf|mathrm|mbox|operatorname)\s*\{([^{}]*)\}")
_LATEX_NOISE = re.compile(r"\\[,;:!]|\\left|\\right|\\quad|\\qquad|\\displaystyle|\\\(|\\\)|\\\[|\\\]")
MAX_ANSWER_CHARS = 10_000  # an extracted answer is a line; anything longer is read up to here


def answer_key(answer: str | None) -> str:
    """What two answers must share to be the same answer: the exact number (``"72"``, ``"3/4"``, ``"-1/2"``)
    when the answer states one, else its whitespace-normalized, lower-cased text; ``""`` for no answer."""
    if not answer or not answer.strip():
        return ""
    if (plan := structured_key(answer)) is not None:
        return plan
    value = answer_value(answer)
    if value is not None:
        return str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"
    return " ".join(answer[:MAX_ANSWER_CHARS].lower().split())


def structured_key(answer: str) -> str | None:
    """A JSON object or list as one canonical line (keys sorted, integral floats as integers); None for any other
    answer. (Read as a number, a plan was its first number: three different credit plans starting with an offer
    of 5000 made a quorum.)"""
    text = answer.strip()
    if not text.startswith(("{", "[")) or len(text) > MAX_ANSWER_CHARS:
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict | list):
        return None
    return json.dumps(canonical(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical(value: object) -> object:
    if isinstance(value, dict):
        return {key: canonical(item) for key, item in value.items()}
    if isinstance(value, list):
        return [canonical(item) for item in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def same_answer(a: str | None, b: str | None) -> bool:
    """Both state an answer and it is the same one (`answer_key`)."""
    key = answer_key(a)
    return bool(key) and key == answer_key(b)


def answer_value(answer: str | None) -> Fraction | None:
    """The number an extracted answer states, exactly, or None when it states none.

    `"$1,200.50"` -> 2401/2, `"72.0"` -> 72, `"\\frac{3}{4}"` -> 3/4, `"48 + 24 = 72 clips"` -> 72.
    """
    value = stated_number(answer)
    return None if value is None else Fraction(value)


def stated_number(answer: str | None) -> Decimal | Fraction | None:
    """The number an extracted answer states, as written (`"$1,200.50"` -> 1200.50, `"48 + 24 = 72"` -> 72)."""
    if not answer:
        return None
    text = delatex(answer[:MAX_ANSWER_CHARS])
    if "=" in text:
        text = text.rsplit("=", 1)[1]
    for number in iter_numbers(text):
        return number.value
    return None


def delatex(text: str) -> str:
    """Plain text from the LaTeX a model writes around an answer: `\\boxed{72}` -> `72`,
    `\\frac{3}{4}` -> `3/4`, `\\$1{,}200` -> `$1,200`, `72 \\text{ clips}` -> `72  clips`."""
    boxed = _boxed_content(text)
    if boxed is not None:
        text = boxed
    text = _TEXT.sub(r" \1 ", text)
    text = _FRAC.sub(r"\1/\2", text)
    text = text.replace("{,}", ",").replace("\\$", "$").replace("\\%", "%").replace("\\cdot", "*")
    text = text.replace("\\times", "*")
    text = _LATEX_NOISE.sub(" ", text)
    return text.replace("$$", " ")


def _boxed_content(text: str) -> str | None:
    """The content of the last `\\boxed{…}` (braces balanced), or None."""
    matches = list(_BOXED.finditer(text))
    if not matches:
        return None
    start = matches[-1].end()
    depth = 1
    for position in range(start, len(text)):
        if text[position] == "{":
            depth += 1
        elif text[position] == "}":
            depth -= 1
            if depth == 0:
                return text[start:position]
    return text[start:]


def parse_gold(answer: str) -> str:
    """The gold answer of a GSM8K `answer` field: what follows the last `####` (`#### 1,000` -> `1,000`)."""
    if "####" not in answer:
        raise ValueError("a GSM8K answer must end with '#### <number>'")
    gold = answer.rsplit("####", 1)[1].strip()
    if answer_value(gold) is None:
        raise ValueError(f"no number after '####' in {answer[-60:]!r}")
    return gold


def majority(answers: Sequence[str | None]) -> str | None:
    """Self-consistency: the most frequent answer (by `answer_key`); a tie goes to the answer given first.
    Answers that state nothing do not vote; None when none does."""
    counts: dict[str, int] = {}
    first: dict[str, str] = {}
    for answer in answers:
        key = answer_key(answer)
        if not key:
            continue
        counts[key] = counts.get(key, 0) + 1
        first.setdefault(key, answer)
    if not counts:
        return None
    best = max(counts.values())
    return first[next(key for key in first if counts[key] == best)]  # dicts keep insertion order
