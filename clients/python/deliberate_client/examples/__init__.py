"""Worked examples' request data, used by docs/business-cases.md, `deliberate solve --example`, the evaluation
and the tests."""
