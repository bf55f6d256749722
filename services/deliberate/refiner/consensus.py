"""The opening lines that enough drafts agree on. Pure functions, no gRPC.

When several independent drafts start the same way, that shared opening is very likely right and need not
be generated again: the Refiner can take it as given and spend its budget on the part where drafts differ.

Lines are compared after whitespace normalization: each line is stripped and internal runs of whitespace are
collapsed to one space, so indentation, trailing spaces and double spaces never break agreement. Blank lines
are layout, not content: they are skipped when comparing (leading, interior and trailing alike), so a draft
that puts an empty line between its steps still agrees with one that does not. Only the first `MAX_LINES`
non-blank lines of a draft are considered, which bounds the work on long drafts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

MAX_LINES = 200  # non-blank lines considered per draft


@dataclass(frozen=True)
class Line:
    number: int  # index into the draft's raw lines
    key: str  # whitespace-normalized text, never empty


def normalize_line(line: str) -> str:
    return " ".join(line.split())


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


def consensus_prefix(drafts: Sequence[str], min_support: int = 3) -> str:
    """The longest run of leading (non-blank) lines that at least `min_support` drafts share.

    `min_support` is clamped to [1, len(drafts)]. The supporting group may differ for different lengths; the
    longest length wins, and when groups tie at that length, the group holding the earliest draft. The lines
    come back as written in that group's earliest draft — from its first non-blank line through the last
    shared one, interior blank lines included — joined by "\\n" with a trailing "\\n"; "" when no
    `min_support` drafts share even a first line (or there are no drafts).

    With ``min_support=1`` every draft supports itself, so the answer is the draft with the most non-blank
    lines (up to `MAX_LINES`; the earliest on ties), in full.
    """
    if not drafts:
        return ""
    support = min(max(min_support, 1), len(drafts))
    lines = [content_lines(draft) for draft in drafts]

    # Walk the drafts' lines as a trie, one depth at a time: a group is the drafts (in index order) that agree
    # on every line so far; a group falling below `support` can never recover, so it is dropped.
    groups = [list(range(len(drafts)))]
    depth = 0
    while True:
        deeper: list[list[int]] = []
        for group in groups:
            by_key: dict[str, list[int]] = {}
            for i in group:
                if depth < len(lines[i]):
                    by_key.setdefault(lines[i][depth].key, []).append(i)
            deeper.extend(members for members in by_key.values() if len(members) >= support)
        if not deeper:
            break
        groups = deeper
        depth += 1

    if depth == 0:
        return ""
    first = min(group[0] for group in groups)  # groups are disjoint and in index order
    shared = lines[first][:depth]
    raw = drafts[first].splitlines()[shared[0].number : shared[-1].number + 1]
    return "\n".join(raw) + "\n"
