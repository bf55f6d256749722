"""How many tokens the Refiner may spend on an answer. Pure functions, no gRPC.

A confident selection (high score) earns a longer refinement; the table maps score thresholds to token
budgets. The request's deadline then caps that: at the engine's measured speed, only so many tokens fit in
the time left (less a reserve for sending the answer back). A late request still gets a short answer — the
cap never goes below a floor — rather than none.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

DEFAULT_ROWS = ((0.9, 512), (0.8, 384))
DEFAULT_TOKENS = 256


@dataclass(frozen=True)
class BudgetTable:
    rows: tuple[tuple[float, int], ...] = DEFAULT_ROWS  # (score threshold, tokens), highest threshold first
    default: int = DEFAULT_TOKENS  # below every threshold

    def __post_init__(self) -> None:
        rows = tuple((float(threshold), int(tokens)) for threshold, tokens in self.rows)
        for threshold, tokens in rows:
            if not math.isfinite(threshold):
                raise ValueError(f"budget threshold must be a finite number, got {threshold}")
            if tokens < 1:
                raise ValueError(f"budget for threshold {threshold} must be at least 1 token, got {tokens}")
        thresholds = [threshold for threshold, _ in rows]
        if len(set(thresholds)) != len(thresholds):
            raise ValueError(f"budget thresholds must be distinct, got {thresholds}")
        if self.default < 1:
            raise ValueError(f"default budget must be at least 1 token, got {self.default}")
        # Sorted here so that `tokens_for` can take the first match, whatever order the config listed.
        object.__setattr__(self, "rows", tuple(sorted(rows, reverse=True)))

    def tokens_for(self, score: float) -> int:
        """The tokens of the highest threshold at or below `score`; the default when none is."""
        for threshold, tokens in self.rows:
            if threshold <= score:
                return tokens
        return self.default

    @classmethod
    def parse(cls, text: str) -> BudgetTable:
        """A table from ``"0.9:512,0.8:384,default:256"``; without a ``default`` entry, the default is 256."""
        rows: list[tuple[float, int]] = []
        default: int | None = None
        for part in text.split(","):
            entry = part.strip()
            key, sep, value = entry.partition(":")
            key, value = key.strip(), value.strip()
            if not sep or not key or not value:
                raise ValueError(f"budget entry {entry!r}: expected 'threshold:tokens' or 'default:tokens'")
            try:
                tokens = int(value)
            except ValueError:
                raise ValueError(f"budget entry {entry!r}: tokens {value!r} is not a whole number") from None
            if tokens < 1:
                raise ValueError(f"budget entry {entry!r}: tokens must be at least 1")
            if key.lower() == "default":
                if default is not None:
                    raise ValueError(f"budget entry {entry!r}: default given twice")
                default = tokens
                continue
            try:
                threshold = float(key)
            except ValueError:
                raise ValueError(f"budget entry {entry!r}: threshold {key!r} is not a number") from None
            if not math.isfinite(threshold):
                raise ValueError(f"budget entry {entry!r}: threshold must be finite")
            if any(threshold == seen for seen, _ in rows):
                raise ValueError(f"budget entry {entry!r}: threshold {key} given twice")
            rows.append((threshold, tokens))
        return cls(tuple(rows), DEFAULT_TOKENS if default is None else default)


@dataclass(frozen=True)
class Budget:
    tokens: int
    reason: str  # e.g. "score 0.92 → 512 tokens; deadline leaves 3.1 s at 24 tok/s → 62 tokens"


def token_budget(
    score: float,
    table: BudgetTable,
    remaining_s: float | None,
    tokens_per_second: float | None,
    reserve_s: float = 0.5,
    floor: int = 16,
) -> Budget:
    """The table's tokens for `score`, capped by what fits in the time left at the engine's speed.

    The cap is ``floor((remaining_s - reserve_s) * tokens_per_second)``, raised to `floor` when smaller (so a
    late request still gets a short answer) but never above the table's value. Without a deadline or a
    measured speed — or when they make no number (∞ s at 0 tok/s) — the table's value stands.
    """
    if floor < 0:
        raise ValueError(f"floor must not be negative, got {floor}")
    wanted = table.tokens_for(score)
    reason = f"score {score:.2f} → {wanted} tokens"
    if remaining_s is None or tokens_per_second is None:
        return Budget(wanted, reason)
    fits = (remaining_s - reserve_s) * tokens_per_second
    if math.isnan(fits):
        return Budget(wanted, f"{reason}; deadline and speed give no limit")
    deadline = f"deadline leaves {number(remaining_s)} s at {number(tokens_per_second)} tok/s"
    if fits >= wanted:  # also covers an infinite deadline, before math.floor could overflow
        return Budget(wanted, f"{reason}; {deadline}, which fits")
    if fits >= floor:
        allowed = math.floor(fits)
        return Budget(allowed, f"{reason}; {deadline} → {allowed} tokens")
    shown = math.floor(fits) if fits > 0 else 0  # the deadline may have passed already (even at -∞)
    if floor <= wanted:
        return Budget(floor, f"{reason}; {deadline} → {shown} tokens, raised to the floor of {floor}")
    return Budget(wanted, f"{reason}; {deadline} → {shown} tokens, raised to the table's {wanted}")


def number(x: float) -> str:
    """One decimal at most: 3.14 → "3.1", 24.0 → "24"."""
    text = f"{x:.1f}"
    return text[:-2] if text.endswith(".0") else text
