"""The opening that enough drafts agree on in substance. Pure functions, no gRPC.

When several independent drafts start the same way, that shared opening is very likely right and need not
be generated again: the Refiner takes it as given and spends its budget on the part where drafts differ.

Drafts agree in one of two ways, and the one that gives the longer prefix wins:

* **Lines**: the same leading lines once whitespace, case, punctuation and number formatting are normalized
  ("Total: $1,000.00." and "total 1000" are the same line; numbers are read by `selection.numbers`, the project's
  one number parser). Blank lines are layout, not content: they are skipped when comparing. Only the first
  `MAX_LINES` non-blank lines of a draft are considered.
* **Computations**: the same leading sequence of computations, whatever the words around them. A draft's
  computations (its *steps*) come from the caller — the Verifier's recomputation of every ``a op b = c``
  (`verifier.arithmetic.computations`, reported in `DraftVerdict.computations`), which keeps only equations that
  hold, each computation once, up to the first wrong one. Drafts written under different strategy hints rarely
  share a first line but often compute ``48 / 2 = 24`` and then ``48 + 24 = 72``: that is what they agree on.

The prefix is always one real draft's text, never a blend: the *source* is the best-ranked draft among those
that support the winning prefix (the caller's ranking — the Scheduler's selection order — or draft order when
none is given). For lines it is the source's lines through the last shared one; for computations, the source's
lines through the one holding its last shared computation, cut before any line that also holds a computation
the others do not share, so everything in the prefix is agreed or is the source's own wording around it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from .numbers import NumberMatch, iter_numbers

MAX_LINES = 200  # non-blank lines considered per draft

# Punctuation, dropped from the text between numbers (numbers are read by `selection.numbers`, the one parser).
# Operators (+ - * / = × ÷ %) are content, not punctuation: "5 + 3" and "5 - 3" must stay different lines.
_PUNCTUATION = re.compile(r"[.,;:!?'\"`()\[\]{}_#>$|~]|\*\*")


@dataclass(frozen=True)
class Line:
    number: int  # index into the draft's raw lines
    key: str  # normalized text, never empty


@dataclass(frozen=True)
class Step:
    """One computation of a draft (`verifier.arithmetic.Computation`, as the Verifier reports it)."""

    key: str  # what it computes, the same however it is written: "2 48 -> 24"
    line: int  # the 0-based raw line of the draft it is written on


@dataclass(frozen=True)
class Consensus:
    text: str  # the source draft's lines, joined by "\n" with a trailing "\n"; "" when no prefix
    source: int = -1  # index of the draft whose wording it is
    supporters: tuple[int, ...] = ()  # indexes of the drafts that share it (the source included)
    basis: str = ""  # "lines" or "computations"
    lines: int = 0  # non-blank lines in `text`
    computations: int = 0  # shared computations in `text` (for basis "computations")


NONE = Consensus("")


def normalize_line(line: str) -> str:
    """Lower case, numbers as plain decimals, punctuation dropped, whitespace collapsed.

    Numbers are read by `selection.numbers` and written as its normalized text without trailing decimal zeros:
    ``$1,000.50`` → ``1000.5``, ``5.0`` → ``5``, ``−7`` → ``-7``; a fraction stays as written (``48/2``) and a
    percentage keeps its ``%`` (``15%`` and ``15`` are different lines)."""
    lowered = line.lower()
    parts = []
    position = 0
    for number in iter_numbers(lowered):
        parts.append(_PUNCTUATION.sub(" ", lowered[position : number.start]))
        parts.append(_plain_decimal(number, lowered))
        position = number.end
    parts.append(_PUNCTUATION.sub(" ", lowered[position:]))
    return " ".join("".join(parts).split())


def _plain_decimal(number: NumberMatch, line: str) -> str:
    text = number.text
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text + "%" if line[number.end - 1] == "%" else text


def content_lines(text: str, limit: int = MAX_LINES) -> list[Line]:
    """The draft's first `limit` non-blank lines, with their normalized text."""
    lines = []
    for number, raw in enumerate(text.splitlines()):
        key = normalize_line(raw)
        if key:
            lines.append(Line(number, key))
            if len(lines) == limit:
                break
    return lines


def consensus(
    drafts: Sequence[str],
    min_support: int = 3,
    steps: Sequence[Sequence[Step]] | None = None,
    ranking: Sequence[int] | None = None,
) -> Consensus:
    """The longest opening at least `min_support` drafts share, by lines or by `steps` (one sequence per draft;
    None to compare lines only), in the wording of the best-ranked supporting draft. `ranking` lists draft indexes
    best first; drafts it leaves out follow in index order. `min_support` is clamped to [1, len(drafts)].

    The one way a consensus prefix is found: the Scheduler's (by computations too, in its selection order) and the
    Refiner's for a caller of its own (by lines, in draft order)."""
    if not drafts:
        return NONE
    support = min(max(min_support, 1), len(drafts))
    order = {index: position for position, index in enumerate(ranking or ())}
    rank = {i: (order.get(i, len(order)), i) for i in range(len(drafts))}

    lines = [content_lines(draft) for draft in drafts]
    by_lines = _by_lines(drafts, lines, support, rank)
    if steps is None:
        return by_lines
    by_steps = _by_steps(drafts, [_distinct(s) for s in steps], support, rank)
    return by_steps if len(by_steps.text) > len(by_lines.text) else by_lines


def _by_lines(drafts: Sequence[str], lines: list[list[Line]], support: int, rank: dict) -> Consensus:
    depth, groups = _shared_depth([[line.key for line in draft] for draft in lines], support)
    if depth == 0:
        return NONE
    source, supporters = _source(groups, rank)
    shared = lines[source][:depth]
    text = _raw_lines(drafts[source], shared[0].number, shared[-1].number)
    return Consensus(text, source, supporters, "lines", depth, 0)


def _by_steps(drafts: Sequence[str], steps: list[list[Step]], support: int, rank: dict) -> Consensus:
    depth, groups = _shared_depth([[step.key for step in draft] for draft in steps], support)
    if depth == 0:
        return NONE
    source, supporters = _source(groups, rank)
    mine = steps[source]
    last = mine[depth - 1].line
    if depth < len(mine) and mine[depth].line == last:  # the line also holds a step the others do not share
        last -= 1
    agreed = sum(step.line <= last for step in mine[:depth])
    content = [line for line in content_lines(drafts[source]) if line.number <= last]
    if not agreed or not content:
        return NONE
    text = _raw_lines(drafts[source], content[0].number, last)
    return Consensus(text, source, supporters, "computations", len(content), agreed)


def _shared_depth(keys: list[list[str]], support: int) -> tuple[int, list[list[int]]]:
    """How many leading keys at least `support` drafts share, and the groups of drafts sharing that many.

    Walks the drafts' keys as a trie, one depth at a time: a group is the drafts (in index order) that agree on
    every key so far; a group falling below `support` can never recover, so it is dropped."""
    groups = [list(range(len(keys)))]
    depth = 0
    while True:
        deeper: list[list[int]] = []
        for group in groups:
            by_key: dict[str, list[int]] = {}
            for i in group:
                if depth < len(keys[i]):
                    by_key.setdefault(keys[i][depth], []).append(i)
            deeper.extend(members for members in by_key.values() if len(members) >= support)
        if not deeper:
            return depth, groups
        groups = deeper
        depth += 1


def _source(groups: list[list[int]], rank: dict) -> tuple[int, tuple[int, ...]]:
    """The best-ranked draft of the winning groups, and its group."""
    source = min((i for group in groups for i in group), key=rank.__getitem__)
    return source, tuple(next(group for group in groups if source in group))


def _distinct(steps: Sequence[Step]) -> list[Step]:
    """Each computation once, where it is first written."""
    seen: set[str] = set()
    return [step for step in steps if not (step.key in seen or seen.add(step.key))]


def _raw_lines(text: str, first: int, last: int) -> str:
    return "\n".join(text.splitlines()[first : last + 1]) + "\n"
