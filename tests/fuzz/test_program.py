"""Fuzz target: generated programs (ordinary statements, hostile fragments, arbitrary text) through the program
check and the rule set around it. Every case must end in a verdict with a readable `program` message: no
exception, no crash, no hang past the time limit."""

from __future__ import annotations

import time

from hypothesis import given
from hypothesis import strategies as st

from deliberate.verifier.constraints import ConstraintSpec, compile_rules
from deliberate.verifier.hostile_programs import HOSTILE_PROGRAMS
from deliberate.verifier.program import LIMITS
from deliberate.verifier.rules import verify

from .harness import fuzz_settings

RULES = compile_rules("", [ConstraintSpec(0, "rule_pack", "arithmetic"), ConstraintSpec(1, "rule_pack", "program")], {})
NAMES = st.sampled_from(["a", "b", "total", "x"])
NUMBERS = st.integers(-(10**6), 10**6).map(str) | st.floats(allow_nan=True, allow_infinity=True).map(repr)
EXPRESSIONS = st.one_of(
    NUMBERS,
    NAMES,
    st.tuples(NAMES | NUMBERS, st.sampled_from(["+", "-", "*", "/", "//", "%", "**"]), NAMES | NUMBERS).map(" ".join),
)
STATEMENTS = st.one_of(
    st.tuples(NAMES, EXPRESSIONS).map(lambda t: f"{t[0]} = {t[1]}"),
    EXPRESSIONS.map(lambda e: f"print({e})"),
    st.sampled_from(["for i in range(3):\n    a = i", "if a:\n    print(a)", "def f(n):\n    return n * 2"]),
    st.sampled_from([code.strip() for code, _ in HOSTILE_PROGRAMS.values() if len(code) < 2000]),
    st.text(max_size=40),
)
PROGRAMS = st.lists(STATEMENTS, max_size=8).map("\n".join)
FENCES = st.sampled_from(["```python\n{}\n```", "```py\n{}\n```", "```python\n{}", "{}", "```\n{}\n```"])


@fuzz_settings(ci=25, full=1000)
@given(program=PROGRAMS, fence=FENCES, prose=st.text(max_size=60))
def test_every_generated_program_ends_in_a_verdict(program, fence, prose):
    started = time.perf_counter()
    verdict = verify(prose + "\n" + fence.format(program), RULES.rules, "stop", None, {})
    assert time.perf_counter() - started < LIMITS.time_s + 2.0
    outcome = next(o for o in verdict.outcomes if o.rule_id == "program")
    assert outcome.message.split(":")[0] in ("program passed", "program failed", "program abstained")
    assert "crashed" not in outcome.message
    if outcome.passed and not outcome.abstained:
        assert verdict.outcomes[2].message.endswith("(printed by the program)")
        assert verdict.extracted_answer and ("program" in verdict.evidence or not verdict.valid)
