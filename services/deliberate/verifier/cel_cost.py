"""A static estimate of what evaluating a CEL expression costs, in steps, so a rule whose expression would run
too long over a draft fails instead of running (`cel_rules.cel_check`).

The estimate multiplies by the largest list at each loop's nesting depth and counts what each read of a variable
and each `+` of a chain may copy: common-expression-language 0.10 copies a value on each read.
"""

from __future__ import annotations

import re
from functools import lru_cache

from .cel_fast import INT64_MAX, INT64_MIN, plain

# Static estimate of CEL evaluation steps (see `cel_cost`); above it the rule fails instead of running.
MAX_CEL_COST = 1_000_000
# What one step copies when a variable is read or `+` concatenates (common-expression-language 0.10 copies a
# value on each read: a step is about a microsecond, a string copies at 1.5-6 GB/s, a list at 15-20 M items/s).
CHARS_PER_STEP = 1_500
ITEMS_PER_STEP = 15


@lru_cache(maxsize=4096)
def draft_cel_cost(expression: str, largest: int, context_steps: int, text_steps: int, answer_steps: int) -> int:
    """`cel_cost` with a draft's reads; drafts of one request mostly repeat the same few inputs."""
    reads = {"ctx": context_steps, "text": text_steps, "answer": answer_steps, "plan": answer_steps}
    return cel_cost(expression, largest, reads)


# Comprehension macros and the loop functions the Verifier adds (`sum`, cel_rules.FUNCTIONS) open a loop.
MACRO = re.compile(r"\.(all|exists_one|exists|map|filter)\s*\(|\bsum\s*\(|\(|\)|\bin\b|\b(?:ctx|text|answer|plan)\b")
VARIABLES = ("ctx", "text", "answer", "plan")


def cel_cost(expression: str, largest: int, reads: dict[str, int] | None = None) -> int:
    """A conservative static estimate of evaluation steps. Each comprehension macro, and each `in` on a list,
    multiplies by the largest list's length at its nesting depth. Each read of a variable copies what it holds
    (`reads`: steps per read of each, see `copy_steps`) as often as the loops around it run; each `+` of a chain
    may copy the largest of them again, quadratic in the chain's length. Without these two,
    `ctx.l.all(x, ctx.l.all(y, size(text) > 0))` over 900 items and a 1 MB draft ran 133 s, and
    `text + text + …` 290 times 28 s."""
    n = max(largest, 1)
    reads = reads or {}
    loops, variables = loop_depths(expression)
    copying = sum(reads.get(name, 0) * n**depth for name, depth in variables)
    concatenation = plus_signs(expression) ** 2 * max(reads.values(), default=0)
    return len(expression) + sum(n**depth for depth in loops) + copying + concatenation


@lru_cache(maxsize=1024)
def plus_signs(expression: str) -> int:
    return expression.count("+")


def copy_steps(value: object) -> int:
    """What reading `value` in CEL may copy, in steps: its largest list and its longest string."""
    return steps_to_copy(largest_list(value), longest_string(value))


def steps_to_copy(largest_list: int, longest_string: int) -> int:
    """The steps of copying a list of `largest_list` items and a string of `longest_string` characters."""
    return largest_list // ITEMS_PER_STEP + longest_string // CHARS_PER_STEP


@lru_cache(maxsize=1024)
def loop_depths(expression: str) -> tuple[tuple[int, ...], tuple[tuple[str, int], ...]]:
    """How many loops deep the work runs: for each comprehension macro and `in` operator (counting itself), and
    for each read of a variable (name, depth)."""
    stack: list[bool] = []  # per open parenthesis: does it open a macro?
    loops, reads = [], []
    for match in MACRO.finditer(expression):
        token = match.group(0)
        if token == ")":
            if stack:
                stack.pop()
        elif token == "(":
            stack.append(False)
        elif token in VARIABLES:
            reads.append((token, sum(stack)))
        else:
            loops.append(sum(stack) + 1)
            if token != "in":
                stack.append(True)
    return tuple(loops), tuple(reads)


def largest_list(value: object, budget: int = 10_000) -> int:
    """Length of the longest list inside `value` (visiting at most `budget` nodes)."""
    largest, stack, seen = 0, [value], 0
    while stack and seen < budget:
        item = stack.pop()
        seen += 1
        if isinstance(item, list):
            largest = max(largest, len(item))
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
    return largest


# Leaves of parsed JSON that hold neither a list nor a string: skipped without the isinstance checks.
SCALAR_TYPES = (int, float, bool, type(None))


def answer_sizes(value: object, budget: int = 10_000) -> tuple[int, int, bool]:
    """(largest_list(value), longest_string(value), cel_fast.plain(value)) in one walk instead of three. The walk
    visits keys too, so where it would pass `budget` nodes the three bounded walks decide instead, and the answer
    is always theirs."""
    largest = longest = 0
    is_plain = True
    stack, seen = [value], 0
    while stack:
        item = stack.pop()
        seen += 1
        if seen > budget:
            return largest_list(value, budget), longest_string(value, budget), plain(value, budget)
        kind = type(item)
        if kind in SCALAR_TYPES:
            if kind is int and not INT64_MIN <= item <= INT64_MAX:
                is_plain = False
            continue
        if kind is not str and kind is not list and kind is not dict:
            is_plain = False  # a subclass, a tuple, ...: not what cel_fast models
        if isinstance(item, str):
            longest = max(longest, len(item))
        elif isinstance(item, list):
            largest = max(largest, len(item))
            stack.extend(item)
        elif isinstance(item, dict):
            keys = item.keys()
            if is_plain and any(type(key) is not str for key in keys):
                is_plain = False
            stack.extend(keys)
            stack.extend(item.values())
    return largest, longest, is_plain


def longest_string(value: object, budget: int = 10_000) -> int:
    """Length of the longest string inside `value` (visiting at most `budget` nodes)."""
    longest, stack, seen = 0, [value], 0
    while stack and seen < budget:
        item = stack.pop()
        seen += 1
        if isinstance(item, str):
            longest = max(longest, len(item))
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
    return longest
