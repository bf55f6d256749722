"""Prints how each fuzz target's cases ended (`pytest -s tests/fuzz`; docs/reliability.md quotes it)."""

from __future__ import annotations

from .harness import PROFILE, Tally


def pytest_terminal_summary(terminalreporter):
    if not Tally.seen:
        return
    terminalreporter.section(f"fuzz cases by status (profile {PROFILE})")
    for target, counts in Tally.seen.items():
        statuses = ", ".join(f"{code} {n}" for code, n in counts.most_common())
        terminalreporter.write_line(f"{target}: {sum(counts.values())} cases: {statuses}")
