"""The `program` check: a draft's ```python block runs in a sandbox, and what it prints last is its answer.

A *program draft* is a draft with a fenced ```python block (also ```py, ```python3). The LAST such block is the
program — as the last ``\\boxed{}`` or the last final-answer line is a prose draft's answer, a later block is the
model's later word. It runs in `pydantic-monty` (a Python-subset interpreter written in Rust), in a pool of `monty`
worker subprocesses: never in the Verifier's own process. The sandbox has no filesystem, network, subprocesses or
imports beyond Monty's own small standard library (`math`, `re`, `datetime`, …); its `os` module is virtual and
its `open` is refused. A crashed worker is replaced by the pool and the draft fails.

Limits (`ProgramLimits`): 0.04 s of execution, 32 MiB of heap, 200 nested calls, 64 KiB of output, a program of
16,000 characters (a longer one is refused before it is sent). Sleeps return at once and `random` is seeded, so
one program always gives one verdict. Outcomes, each a readable detail for the rule's message:

* no ```python block: abstains (``no python block``);
* prints a last line stating a number (the project's number parser and answer identity): passes
  (``printed 72``), and that number is the draft's answer;
* raises (``ZeroDivisionError at line 3: division by zero``), exceeds a limit (``exceeded 0.04 s``,
  ``exceeded 32 MiB of memory``, ``printed more than 64 KiB``), prints nothing or no number: fails.

`run_program` blocks its thread while the worker runs (the GIL released): the Verifier runs rule sets with this
check off its event loop (the pack says it waits, `waits_on_network`).
"""

from __future__ import annotations

import atexit
import os
import re
import threading
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from ..core.schemas import shorten
from ..selection.answers import answer_key, answer_value
from .rules import Abstain, Draft, Rule

PROGRAM = "program"

# ```python / ```py / ```python3 alone on its line opens a program; ``` alone on its line closes it.
OPENING = re.compile(r"^[ \t]*```[ \t]*(?:python3?|py)[ \t]*\r?$", re.IGNORECASE | re.MULTILINE)
CLOSING = re.compile(r"^[ \t]*```[ \t]*\r?$", re.MULTILINE)
# Python's repr of a float in exponent form ("1e-05", "2.5e+20"), which the number parser would misread.
EXPONENT = re.compile(r"-?\d+(?:\.\d+)?e[-+]\d+")
MAX_DETAIL_CHARS = 120


@dataclass(frozen=True)
class ProgramLimits:
    # Ordinary programs finish in under 0.2 ms (deliberate bench program-check); 40 ms bounds a hostile one.
    time_s: float = 0.04
    memory_bytes: int = 32 * 2**20
    recursion_depth: int = 200
    output_bytes: int = 64 * 2**10
    program_chars: int = 16_000
    # Host round trips: name lookups the sandbox asks the host about, and calls of a decision program's `best_rows`.
    suspensions: int = 10
    # Waiting for a free worker when every one is busy; past it the draft fails (closed).
    checkout_s: float = 5.0


LIMITS = ProgramLimits()


@dataclass(frozen=True)
class ProgramBlock:
    code: str | None  # None: the last block was opened and never closed
    line: int  # the draft line of the opening fence (1-based)


@dataclass(frozen=True)
class ProgramResult:
    """What one program did: `answer` is the printed number's text when it passed; `detail` explains."""

    passed: bool
    detail: str
    answer: str | None = None


def find_program(text: str) -> ProgramBlock | None:
    """The draft's last ```python block, or None when it has none. Linear in the draft's length."""
    last = None
    for last in OPENING.finditer(text):  # noqa: B007 (the last one is wanted)
        pass
    if last is None:
        return None
    start = last.end() + 1  # past the newline
    closing = CLOSING.search(text, start)
    line = text.count("\n", 0, last.start()) + 1
    if closing is None:
        return ProgramBlock(None, line)
    return ProgramBlock(text[start : closing.start()], line)


def check_program(text: str, limits: ProgramLimits = LIMITS) -> ProgramResult | None:
    """Runs the draft's program; None when the draft has no ```python block (the check abstains)."""
    ran = run_block(text, limits)
    if ran is None or isinstance(ran, ProgramResult):
        return ran
    return read_answer(ran)


def run_block(
    text: str, limits: ProgramLimits, inputs: dict | None = None, host: dict | None = None
) -> str | ProgramResult | None:
    """What the draft's last ```python block printed, a failed `ProgramResult` saying why it did not run to its end,
    or None when the draft has no such block. `inputs`: globals bound before the program runs (`ctx`); `host`:
    functions of this process the program may call (`best_rows`)."""
    block = find_program(text)
    if block is None:
        return None
    if block.code is None:
        return ProgramResult(False, f"the ```python block opened on line {block.line} is never closed")
    if len(block.code) > limits.program_chars:
        return ProgramResult(
            False, f"the program has {len(block.code):,} characters; the limit is {limits.program_chars:,}"
        )
    if not block.code.strip():
        return ProgramResult(False, "the ```python block is empty")
    output, error = sandbox(limits).run(block.code, inputs, host)
    if error is not None:
        return ProgramResult(False, error)
    return output


def read_answer(output: str) -> ProgramResult:
    """Passes when the last line printed states a number; its normalized text becomes the answer."""
    lines = [line for line in output.splitlines() if line.strip()]
    if not lines:
        return ProgramResult(False, "printed nothing")
    last = lines[-1].strip()
    value = answer_value(plain_float(last))
    if value is None:
        return ProgramResult(False, f"the last line printed, {shorten(last, 60)!r}, states no number")
    answer = number_text(value)
    return ProgramResult(True, f"printed {answer}", answer)


def plain_float(line: str) -> str:
    """``1e-05`` -> ``0.00001``: Python prints small and large floats in exponent form."""
    if not EXPONENT.fullmatch(line):
        return line
    try:
        return format(Decimal(line), "f")
    except InvalidOperation:
        return line


def number_text(value: Fraction) -> str:
    """The printed number as an answer: ``72``, ``2.5``, ``1/3`` (a float's 0.333… stays as printed, exactly)."""
    if value.denominator == 1:
        return str(value.numerator)
    decimal = Decimal(value.numerator) / Decimal(value.denominator)
    if Fraction(decimal) == value:
        return format(decimal.normalize(), "f")
    return answer_key(f"{value.numerator}/{value.denominator}")


def run_program_rule(draft: Draft) -> tuple[bool, str] | Abstain:
    """The `program` rule: abstains without a ```python block; when the program passed, its printed number is the
    draft's answer (final_answer reads it)."""
    result = check_program(draft.text)
    if result is None and draft.kind == PROGRAM:  # it says it is a program: never valid on its text alone
        return False, f"{PROGRAM} failed: a program draft without a ```python block"
    if result is None:
        return Abstain(f"{PROGRAM} abstained: no python block")
    if result.passed:
        draft.program_answer = result.answer
    return result.passed, f"{PROGRAM} {'passed' if result.passed else 'failed'}: {result.detail}"


def program_rule(hard: bool = True) -> Rule:
    """The `program` rule of a request that asks for it (`rule_pack: "program"`). Substantive: the answer is
    computed, not read. It waits on a worker process (up to the time limit), so the Verifier runs the rule set off
    its event loop (`waits_on_network`), and health checks and other calls are answered meanwhile."""
    return Rule(PROGRAM, hard, run_program_rule, substantive=True, waits_on_network=True)


def is_program_rule(rule: Rule) -> bool:
    return rule.check is run_program_rule


# --------------------------------------------------------------------------------------------------
# The sandbox
# --------------------------------------------------------------------------------------------------


class Sandbox:
    """A pool of `monty` worker processes, started on first use and closed when the process exits.

    Thread-safe: each run checks a worker out of the pool for one program and returns it."""

    def __init__(self, limits: ProgramLimits = LIMITS, processes: int | None = None):
        self.limits = limits
        self.processes = processes or max(4, os.cpu_count() or 1)  # a few hostile programs leave workers free
        self.lock = threading.Lock()
        self.pool = None

    def started(self):
        with self.lock:
            if self.pool is None:
                from pydantic_monty import Monty

                pool = Monty(
                    min_processes=self.processes,  # warm: a spawn on demand costs a checkout ~0.4 s
                    max_processes=self.processes,
                    checkout_timeout=self.limits.checkout_s,
                    # Backstops the in-sandbox time limit: a worker hung past it is killed.
                    request_timeout=self.limits.time_s + 2.0,
                    feed_duration_limit_grace=0.5,
                    # A worker that ran hostile code is not trusted with many more.
                    max_checkouts_per_worker=1000,
                )
                pool.__enter__()
                atexit.register(pool.__exit__, None, None, None)
                self.pool = pool
            return self.pool

    def run(self, code: str, inputs: dict | None = None, host: dict | None = None) -> tuple[str, str | None]:
        """(what the program printed, None) or (what it printed, why it failed). `inputs`: globals bound first;
        `host`: functions the program may call, run in this process."""
        from pydantic_monty import CollectString, MontyCrashedError, MontyError, MontyRuntimeError, MontySyntaxError

        limits = self.limits
        output = CollectString(max_bytes=limits.output_bytes)
        try:
            session = self.started().checkout(
                limits={
                    "max_feed_duration_secs": limits.time_s,
                    "max_memory": limits.memory_bytes,
                    "max_recursion_depth": limits.recursion_depth,
                    "max_suspensions": limits.suspensions,
                },
                os_policy={"sleep": "zero", "random_start": {"seed": 0}},
            )
            with session:
                session.feed_run(code, inputs=inputs, external_lookup=host, print_callback=output)
        except (MontyRuntimeError, MontySyntaxError) as error:
            return output.output, describe_error(error, limits)
        except MontyCrashedError as error:
            if error.timed_out:
                return "", f"exceeded {limits.time_s:g} s"
            return "", f"the sandbox's worker died: {shorten(str(error), MAX_DETAIL_CHARS)}"
        except MontyError as error:
            return "", f"{type(error).__name__}: {shorten(str(error), MAX_DETAIL_CHARS)}"
        except TimeoutError:
            return "", f"no sandbox worker was free within {limits.checkout_s:g} s"
        return output.output, None


def describe_error(error, limits: ProgramLimits) -> str:
    """``ZeroDivisionError at line 3: division by zero``; a broken limit in its own words."""
    inner = error.exception()
    kind = type(inner).__name__
    message = error.display(format="msg")
    if kind == "TimeoutError" and "time limit" in message:
        return f"exceeded {limits.time_s:g} s"
    if kind == "MemoryError":
        if f"> {limits.output_bytes} bytes" in message:
            return f"printed more than {limits.output_bytes // 1024} KiB"
        return f"exceeded {limits.memory_bytes // 2**20} MiB of memory"
    frames = error.traceback()
    where = f" at line {frames[-1].line}" if frames else ""
    if kind == "RecursionError":
        return f"RecursionError{where} (calls nested deeper than {limits.recursion_depth})"
    return f"{kind}{where}: {shorten(message, MAX_DETAIL_CHARS)}" if message else f"{kind}{where}"


_SANDBOXES: dict[ProgramLimits, Sandbox] = {}
_SANDBOXES_LOCK = threading.Lock()


def sandbox(limits: ProgramLimits = LIMITS) -> Sandbox:
    """The process's sandbox for `limits` (one pool per distinct limits; the Verifier uses one)."""
    with _SANDBOXES_LOCK:
        if limits not in _SANDBOXES:
            _SANDBOXES[limits] = Sandbox(limits)
        return _SANDBOXES[limits]


def run_program(code: str, limits: ProgramLimits = LIMITS) -> tuple[str, str | None]:
    """Runs `code` in the process's sandbox for `limits`."""
    return sandbox(limits).run(code)
