"""Worked examples' request data (used by the README, `deliberate solve --example`, the evaluation and the tests)."""
