"""The program check: a draft's last ```python block runs in pydantic-monty's worker processes; its last printed
number is the draft's answer. Hostile programs fail with a readable message and leave the process serving."""

from __future__ import annotations

import threading
import time

import pytest

from deliberate.core.requests import InvalidArgument
from deliberate.verifier.constraints import ConstraintSpec, compile_rules
from deliberate.verifier.hostile_programs import HOSTILE_PROGRAMS, MEMORY_REFUSAL, as_draft, refused_as_expected
from deliberate.verifier.program import LIMITS, ProgramLimits, check_program, find_program, run_program
from deliberate.verifier.rules import verify

ORDINARY = "eggs = 16 - 3 - 4\nprice = 2\nprint(eggs * price)\n"
MEMORY_BOMBS = sorted(name for name, (_, expected) in HOSTILE_PROGRAMS.items() if expected == MEMORY_REFUSAL)


def rules_with(*specs: ConstraintSpec):
    return compile_rules("", list(specs), {}).rules


ARITHMETIC = ConstraintSpec(0, "rule_pack", "arithmetic")
PROGRAM = ConstraintSpec(1, "rule_pack", "program")


def messages(text: str, *specs: ConstraintSpec) -> list[str]:
    return [o.message for o in verify(text, rules_with(*specs), "stop", None, {}).outcomes]


@pytest.mark.parametrize("name", sorted(HOSTILE_PROGRAMS))
def test_each_hostile_program_fails_with_a_readable_message(name):
    code, _ = HOSTILE_PROGRAMS[name]
    started = time.perf_counter()
    verdict = verify(as_draft(code), rules_with(ARITHMETIC, PROGRAM), "stop", None, {})
    elapsed = time.perf_counter() - started
    program = next(o for o in verdict.outcomes if o.rule_id == "program")
    assert not verdict.valid and not program.passed and program.hard and program.substantive
    assert program.message.startswith("program failed: "), program.message
    # A memory bomb may meet the time limit first on a loaded machine; the memory limit is tested on its own below.
    assert refused_as_expected(name, program.message), program.message
    assert verdict.outcomes[-1].rule_id == "program"  # fast-fail: nothing after it ran
    assert verdict.extracted_answer == "" and verdict.evidence == []
    assert elapsed < LIMITS.time_s + 1.0  # bounded by the time limit, whatever the program does


@pytest.mark.parametrize("name", MEMORY_BOMBS)
def test_a_memory_bomb_given_time_to_spare_is_stopped_by_the_memory_limit(name):
    code, _ = HOSTILE_PROGRAMS[name]
    _, error = run_program(code, ProgramLimits(time_s=5.0))
    assert error is not None and MEMORY_REFUSAL in error, error


def test_the_sandbox_still_serves_after_every_hostile_program():
    for code, _ in HOSTILE_PROGRAMS.values():
        check_program(as_draft(code))
    result = check_program(as_draft(ORDINARY))
    assert result.passed and result.answer == "18"


def test_a_program_draft_passes_with_its_printed_answer_through_final_answer():
    verdict = verify(
        "Janet sells the rest.\n```python\n" + ORDINARY + "```", rules_with(ARITHMETIC, PROGRAM), "stop", None, {}
    )
    assert verdict.valid and verdict.extracted_answer == "18" and verdict.evidence == ["program"]
    assert [o.message for o in verdict.outcomes] == [
        "complete passed",
        "program passed: printed 18",
        "final_answer passed: 18 (printed by the program)",
        "numeric_answer passed: 18",
        "arithmetic abstained: no equation to recompute",
        "explicit_final_line abstained: the program printed the answer",
    ]
    assert verdict.score == 1.0


def test_a_prose_draft_is_judged_as_before_and_the_program_check_abstains():
    text = "16 - 3 - 4 = 9\n9 * 2 = 18\nFinal answer: 18"
    with_program = verify(text, rules_with(ARITHMETIC, PROGRAM), "stop", None, {})
    without = verify(text, rules_with(ARITHMETIC), "stop", None, {})
    program = with_program.outcomes[1]
    assert program.message == "program abstained: no python block" and program.abstained and program.passed
    assert [o.message for o in with_program.outcomes if o.rule_id != "program"] == [o.message for o in without.outcomes]
    assert (with_program.valid, with_program.score, with_program.extracted_answer, with_program.evidence) == (
        without.valid,
        without.score,
        without.extracted_answer,
        without.evidence,
    )


def test_the_program_check_runs_after_complete_and_before_final_answer():
    rule_set = compile_rules("", [ARITHMETIC, PROGRAM], {})
    assert rule_set.rule_ids == [
        "complete",
        "program",
        "final_answer",
        "numeric_answer",
        "arithmetic",
        "explicit_final_line",
    ]
    assert rule_set.waits_on_network  # verified off the event loop
    assert rule_set.prefix_checks and all(type(c).__name__ != "program" for c in rule_set.prefix_checks)


def test_the_program_check_takes_no_parameters():
    with pytest.raises(InvalidArgument, match=r"constraints\[0\]\.params"):
        compile_rules("", [ConstraintSpec(0, "rule_pack", "program", params={"x": 1})], {})


def test_a_soft_program_check_that_fails_does_not_stop_the_rules():
    soft = ConstraintSpec(0, "rule_pack", "program", soft=True)
    verdict = verify(as_draft("print(1 / 0)\n"), rules_with(soft), "stop", None, {})
    assert [o.rule_id for o in verdict.outcomes][:3] == ["complete", "program", "final_answer"]
    assert not verdict.outcomes[1].passed and not verdict.outcomes[1].hard


@pytest.mark.parametrize(
    ("code", "detail", "answer"),
    [
        ("print(72)\n", "printed 72", "72"),
        ("print(144 / 2)\n", "printed 72", "72"),
        ("print(5 / 2)\n", "printed 2.5", "2.5"),
        ("print(1e-05)\n", "printed 0.00001", "0.00001"),
        ("print(-3)\n", "printed -3", "-3"),
        ("print('The answer is', 1200)\n", "printed 1200", "1200"),
        ("print(f'${1200:,.2f}')\n", "printed 1200", "1200"),
        ("print(3)\nprint('then 4')\n", "printed 4", "4"),
        ("import math\nprint(math.sqrt(16))\n", "printed 4", "4"),
    ],
)
def test_the_last_printed_line_is_read_with_the_projects_number_parser(code, detail, answer):
    result = check_program(as_draft(code))
    assert (result.passed, result.detail, result.answer) == (True, detail, answer)


@pytest.mark.parametrize(
    ("code", "detail"),
    [
        ("x = 3\n", "printed nothing"),
        ("print('abc')\n", "the last line printed, 'abc', states no number"),
        ("print(float('inf'))\n", "states no number"),
        ("x = 1\ny = 0\nprint(x / y)\n", "ZeroDivisionError at line 3: division by zero"),
        ("def (:\n", "SyntaxError at line 1"),
        ("\n", "the ```python block is empty"),
    ],
)
def test_a_program_that_prints_no_number_or_raises_fails(code, detail):
    result = check_program(as_draft(code))
    assert not result.passed and detail in result.detail


def test_the_last_python_block_is_the_program():
    draft = "First try:\n```python\nprint(1)\n```\nCorrected:\n```py\nprint(2)\n```\n```text\n3\n```"
    assert find_program(draft).code == "print(2)\n"
    assert check_program(draft).answer == "2"


def test_a_draft_without_a_python_block_abstains_and_an_unclosed_one_fails():
    assert check_program("Final answer: 3\n```json\n{}\n```") is None
    assert check_program("```\nprint(1)\n```") is None  # a bare fence is not a program
    result = check_program("Plan:\n```python\nprint(1)\n")
    assert not result.passed and result.detail == "the ```python block opened on line 2 is never closed"


def test_finding_the_block_stays_linear_on_many_unclosed_openings():
    started = time.perf_counter()
    assert check_program("```python\n" * 100_000).passed is False
    assert time.perf_counter() - started < 1.0


def test_one_program_always_gives_one_verdict():
    code = "import random\nprint(random.randint(1, 10**9))\n"
    assert len({check_program(as_draft(code)).answer for _ in range(3)}) == 1


def test_tighter_limits_are_their_own_pool():
    tight = ProgramLimits(time_s=0.05)
    started = time.perf_counter()
    output, error = run_program("while True:\n    pass\n", tight)
    assert error == "exceeded 0.05 s" and time.perf_counter() - started < 0.5


def test_ordinary_programs_are_not_held_up_by_hostile_ones_running_beside_them():
    loops = [
        threading.Thread(target=check_program, args=(as_draft(HOSTILE_PROGRAMS["infinite_loop"][0]),)) for _ in range(2)
    ]
    for thread in loops:
        thread.start()
    time.sleep(0.05)
    started = time.perf_counter()
    result = check_program(as_draft(ORDINARY))
    elapsed = time.perf_counter() - started
    for thread in loops:
        thread.join()
    assert result.passed and elapsed < 0.4, elapsed
