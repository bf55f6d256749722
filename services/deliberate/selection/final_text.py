"""The text a person reads from a draft: the answer with its last line `Final answer: <answer>` in plain text, and
the thinking-trace marker that says why — beside the answer, never inside it."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from .answers import delatex

# A stated final line, however the model marked it up: "Final answer: \(\boxed{72}\)", "**Final Answer:** 72".
FINAL_LINE = re.compile(r"^[ \t>*#_]*final answer\b.*$", re.IGNORECASE | re.MULTILINE)
# The final line as a person should read it: no LaTeX (no backslash, no $…$ pair); "$110" is plain text.
PLAIN_FINAL_LINE = re.compile(r"^Final answer: (?!.*\\)(?!.*\$.*\$).+$")


def thinking_trace(index: int, score: float, passed_rules: Sequence[str], failed_rules: Sequence[str]) -> str:
    """`[THINKING_TRACE: Draft#3 scored 0.92, passed budget_check and category_check]`, naming the real rules."""
    parts = [f"Draft#{index} scored {score:.2f}"]
    if passed_rules:
        parts.append(f"passed {join_words(passed_rules)}")
    if failed_rules:
        parts.append(f"failed {join_words(failed_rules)}")
    return f"[THINKING_TRACE: {', '.join(parts)}]"


def passed_and_failed(rule_results: Iterable) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The ids of the rules that passed a real check and of those that failed: an abstained rule checked nothing,
    so the trace names it in neither."""
    results = list(rule_results)
    passed = tuple(r.rule_id for r in results if r.passed and not r.abstained)
    return passed, tuple(r.rule_id for r in results if not r.passed)


def join_words(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def with_plain_final_line(text: str, answer: str) -> str:
    """`text` ending with one plain `Final answer: <answer>` line: the last stated final line is rewritten (no LaTeX
    box, no markup) and anything after it dropped; where the text states none, the line is added. `answer` is the
    value the Verifier read from the draft; empty, the text is returned as it is."""
    text = text.strip()
    plain = " ".join(delatex(answer).split()).strip()
    if not plain:
        return text
    stated = list(FINAL_LINE.finditer(text))
    body = text[: stated[-1].start()].rstrip() if stated else text
    return f"{body}\n\nFinal answer: {plain}" if body else f"Final answer: {plain}"
