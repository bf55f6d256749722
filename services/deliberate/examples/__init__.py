"""Worked examples shipped with the project (used by the README, the CLI and the tests)."""
