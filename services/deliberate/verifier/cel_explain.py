"""What a false CEL constraint saw: the values a re-draft needs to repair the plan, not only the request's static
`failure_message`.

Only on failure, with the same library and variables as the check: the expression's top-level conjuncts are
evaluated one by one, and each false one is explained — a comparison by the values of its sides
(`size(plan.selected_ids) = 5`), an `all` by the elements that fail it (`fails for 17, 42`), an `exists` by saying
that no element passes. Parts that are literals are not repeated; anything the explanation cannot evaluate is left
out, never guessed. Each part is a sub-expression of the checked expression, so its cost is within the one checked.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

from ..core.schemas import shorten

MAX_PARTS = 3  # false conjuncts explained
MAX_ELEMENTS = 5  # failing elements named
RELATIONS = ("<=", ">=", "==", "!=", "<", ">", " in ")
COMPREHENSION = re.compile(r"^(?P<target>.+)\.(?P<kind>all|exists)\(\s*(?P<name>[A-Za-z_]\w*)\s*,(?P<body>.*)\)$", re.S)
LITERAL = re.compile(r"^(-?\d+(\.\d+)?|'[^']*'|\"[^\"]*\"|true|false|null)$")


def explain(expression: str, evaluate) -> str:
    """`evaluate(source) -> value` runs a sub-expression on the draft's variables (raising where CEL does). The
    values the false expression saw, `; `-joined, or "" when nothing could be said."""
    parts = []
    for conjunct in split_top_level(strip_parentheses(expression), "&&"):
        try:
            if evaluate(conjunct) is not False:
                continue
        except Exception:  # noqa: BLE001 — the library raises its own errors for missing fields and types
            continue
        if said := explain_part(conjunct, evaluate):
            parts.append(said)
        if len(parts) == MAX_PARTS:
            break
    return "; ".join(parts)


def explain_part(conjunct: str, evaluate) -> str:
    body = strip_parentheses(conjunct)
    if len(split_top_level(body, "||")) > 1:
        return ""  # alternatives: which one was meant is not the check's to say
    if comprehension := COMPREHENSION.match(body):
        target, name, predicate = comprehension["target"], comprehension["name"], comprehension["body"].strip()
        if comprehension["kind"] == "exists":
            return f"no element of {target} passes `{shorten(predicate, 60)}`"
        failing = value_of(f"{target}.filter({name}, !({predicate}))", evaluate)
        if isinstance(failing, list) and failing:
            named = ", ".join(shown(element) for element in failing[:MAX_ELEMENTS])
            more = f" and {len(failing) - MAX_ELEMENTS} more" if len(failing) > MAX_ELEMENTS else ""
            return f"`{shorten(predicate, 60)}` fails for {named}{more}"
        return ""
    for relation in RELATIONS:
        sides = split_top_level(body, relation)
        if len(sides) == 2:
            said = [f"{side} = {shown(value)}" for side in sides if not LITERAL.match(side)
                    if (value := value_of(side, evaluate)) is not MISSING]  # fmt: skip
            return ", ".join(said)
    return ""


MISSING = object()


def value_of(source: str, evaluate) -> object:
    try:
        return evaluate(source)
    except Exception:  # noqa: BLE001
        return MISSING


def shown(value: object) -> str:
    try:
        text = json.dumps(value, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return shorten(text, 60)


def strip_parentheses(expression: str) -> str:
    """The expression without parentheses that wrap all of it."""
    text = expression.strip()
    while text.startswith("(") and text.endswith(")") and closing(text) == len(text) - 1:
        text = text[1:-1].strip()
    return text


def outside_quotes(text: str) -> Iterator[tuple[int, str, int]]:
    """(index, character, bracket depth before it) for each character outside a quoted string."""
    depth, quote = 0, ""
    for index, char in enumerate(text):
        if quote:
            quote = "" if char == quote else quote
            continue
        if char in "'\"":
            quote = char
            continue
        yield index, char, depth
        depth += (char in "([{") - (char in ")]}")


def closing(text: str) -> int:
    """The index of the bracket that closes the one the text opens with; -1 when none."""
    return next((index for index, char, depth in outside_quotes(text) if char in ")]}" and depth == 1), -1)


def split_top_level(expression: str, separator: str) -> list[str]:
    """The expression split on `separator` where it stands outside brackets and quotes, each part stripped."""
    parts, start = [], 0
    for index, _, depth in outside_quotes(expression):
        if index < start or depth or not expression.startswith(separator, index):
            continue
        if len(separator) == 1 and relation_prefix(expression, index):
            continue
        parts.append(expression[start:index].strip())
        start = index + len(separator)
    return [*parts, expression[start:].strip()]


def relation_prefix(expression: str, index: int) -> bool:
    """A one-character relation that is part of a two-character one (`<` of `<=`, `=` of `==`)."""
    nxt = expression[index + 1 : index + 2]
    previous = expression[index - 1 : index] if index else ""
    return (expression[index] in "<>" and nxt == "=") or (expression[index] == "=" and previous in "=!<>")
