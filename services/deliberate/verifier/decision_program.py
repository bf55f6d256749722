"""Decision programs: a structured request's program reads the request's data as `ctx` and prints the JSON plan.

The draft's last ```python block runs in the program check's sandbox (`program.Sandbox`) with the request's data
bound as `ctx`; the JSON it prints last is the draft's answer, which every later rule checks as a JSON draft's.
The program may call host functions run in the Verifier's process: the exact engine `best_rows`, and the functions
the request's rule packs define (`RulePack.decision_functions`, the credit pack's `score_offer`).
"""

from __future__ import annotations

import ast
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..core.convert import field_names, is_table
from ..core.schemas import shorten
from .parsing import parse_json
from .program import PROGRAM, ProgramLimits, ProgramResult, find_program, run_block
from .rules import COMPACT_JSON, Draft, Rule

# A decision program loops over the request's rows (up to MAX_DECISION_DATA_BYTES of them): more time and memory
# than a question's few lines of arithmetic, still far below what a hostile loop over the data would take.
# Calls of one pack function a decision program run may make (a search over a risk model's answers: a few dozen).
HOST_CALLS = 200
# Its host round trips: a pack function's calls (HOST_CALLS, twice over), the solver's and name lookups.
DECISION_LIMITS = ProgramLimits(time_s=0.25, memory_bytes=64 * 2**20, suspensions=2 * HOST_CALLS + 10)


def decision_program_rule(data: dict, functions: Mapping[str, Callable] | None = None) -> Rule:
    """The `program` rule of a structured request's program drafts: the draft's program runs with `data` bound as
    `ctx` (the request's data; each run gets its own copy in the worker, so a program that changes it changes
    nothing the rules read), and the JSON it prints last becomes the draft's answer, which every later rule —
    schema, CEL, rule packs — checks exactly as a JSON draft's. Substantive, as the free-text program rule.
    `functions`: what the request's rule packs define for its programs (`RulePack.decision_functions`), beside
    the exact engine; each at most HOST_CALLS times a run."""
    functions = dict(functions or {})

    def check(draft: Draft) -> tuple[bool, str]:
        block = find_program(draft.text)
        code = block.code if block is not None else None
        if code is not None and (line := binds(code, "ctx")):
            return False, (
                f"{PROGRAM} failed: line {line} assigns ctx; the program must read the request's data in ctx, "
                "not data of its own"
            )
        for name in (BEST_ROWS, *functions):
            if code is not None and (line := binds(code, name)):
                return False, f"{PROGRAM} failed: line {line} defines {name}; it is already defined: call it"
        host = {name: counted(name, function) for name, function in functions.items()}
        host[BEST_ROWS] = counted(BEST_ROWS, SolverCalls(data).best_rows, SOLVER_LIMITS.calls)
        ran = run_block(draft.text, DECISION_LIMITS, {"ctx": data}, host)
        if ran is None:
            return False, f"{PROGRAM} failed: a program draft without a ```python block"
        if isinstance(ran, ProgramResult):
            return False, f"{PROGRAM} failed: {ran.detail}{key_hint(ran.detail, data)}"
        plan = read_plan(ran)
        if isinstance(plan, str):
            return False, f"{PROGRAM} failed: {plan}"
        draft.json_value = plan
        draft.extracted_answer = COMPACT_JSON.encode(plan)
        draft.answer_printed = True
        return True, f"{PROGRAM} passed: printed {shorten(draft.extracted_answer, 80)}"

    return Rule(PROGRAM, True, check, substantive=True, waits_on_network=True)


# The exact engine a decision program may call: `best_rows(rows, maximize, count=None, at_most=None, one_per=None,
# *, minimize, at_least, most_per, least_of, include, exclude)` returns the best rows within the rules
# (`decisions.solver.best_rows`). The model writes the formulation from the question's words; the rules check the
# plan it prints as any other plan.
BEST_ROWS = "best_rows"
RULES = ("minimize", "at_least", "most_per", "least_of", "include", "exclude")  # keyword-only
SIGNATURE = ("count", "at_most", "one_per", *RULES)


@dataclass(frozen=True)
class SolverLimits:
    calls: int = 3  # per program run: a formulation, and a retry or two
    rows: int = 2_000  # a table bigger than any request's data is a hostile program's
    time_s: float = 0.5  # per solve; 100-120 rows take a few milliseconds


SOLVER_LIMITS = SolverLimits()


def counted(name: str, function: Callable, limit: int = HOST_CALLS) -> Callable:
    """`function` for one program run, refusing its call past the `limit`-th."""
    calls = 0

    def call(*args, **kwargs):
        nonlocal calls
        calls += 1
        if calls > limit:
            raise RuntimeError(f"{name} was called more than {limit} times")
        return function(*args, **kwargs)

    return call


class SolverCalls:
    """`best_rows` for one program run (its calls are counted by `counted`, against SOLVER_LIMITS.calls). Runs in
    the Verifier's process on values the sandbox converted (plain lists, dicts, numbers), returns copies of the
    chosen rows."""

    def __init__(self, data: dict, limits: SolverLimits = SOLVER_LIMITS):
        self.tables = [key for key, value in data.items() if is_table(value)]  # named when `rows` is no table
        self.limits = limits

    def best_rows(self, rows, maximize=None, count=None, at_most=None, one_per=None, **rules):
        from ..decisions.solver import SelectionError, best_rows

        if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
            such_as = "".join(f' such as ctx["{table}"]' for table in self.tables[:1])
            if isinstance(rows, list):
                given = "a list of " + type(next(r for r in rows if not isinstance(r, dict))).__name__ + "s"
            else:
                given = f"a {type(rows).__name__}"
            raise TypeError(f"best_rows: rows must be a list of dicts{such_as}, not {given}")
        if len(rows) > self.limits.rows:
            raise ValueError(f"best_rows: {len(rows):,} rows; the limit is {self.limits.rows:,}")
        if at_most is not None and not isinstance(at_most, dict):
            raise TypeError(
                f"best_rows: at_most must be a dict of field -> limit, e.g. {{'cost': 5000}}, not {at_most!r}"
            )
        if unknown := sorted(set(rules) - set(RULES)):
            raise TypeError(f"best_rows: no argument {unknown[0]!r}; it takes {', '.join(('maximize', *SIGNATURE))}")
        try:
            chosen = best_rows(rows, maximize, count, at_most, one_per, self.limits.time_s, **rules)
        except SelectionError as error:
            raise ValueError(f"best_rows: {error}") from None
        return [rows[i] for i in chosen]


def key_hint(detail: str, data: dict) -> str:
    """For a KeyError, the keys the program could have read — feedback a re-draft can act on: "(ctx has keys
    catalog, pool, budget; the rows of ctx["catalog"] have id, category, cost, ctr)"."""
    if not detail.startswith("KeyError"):
        return ""
    tables = [
        f'the rows of ctx["{key}"] have {", ".join(field_names(value))}'
        for key, value in data.items()
        if is_table(value)
    ]
    return f" (ctx has keys {', '.join(data)}{''.join('; ' + t for t in tables)})"


def binds(code: str, name: str) -> int | None:
    """The line of the first statement that binds `name` — assigns it or defines a function of that name (a program
    that types in `ctx` computes a plan for data that is not the request's; one that writes its own `best_rows`
    replaces the exact engine with a stub) —; None when none does or the code is not Python the check can read
    (the sandbox then reports why)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store):
            return node.lineno
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            return node.lineno
    return None


def read_plan(output: str) -> object | str:
    """The JSON value the program printed last (a JSON line, or a Python literal such as print(answer) writes),
    or why there is none."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    if not lines:
        return "printed nothing"
    last = lines[-1]
    parsed = parse_json(last)
    if parsed.error is None and isinstance(parsed.value, dict | list):
        return parsed.value
    try:
        value = ast.literal_eval(last)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return f"the last line printed, {shorten(last, 60)!r}, is not a JSON object"
    if not isinstance(value, dict | list):
        return f"the last line printed, {shorten(last, 60)!r}, is not a JSON object"
    try:
        return json.loads(json.dumps(value))  # tuples to lists; a value JSON cannot hold is refused
    except (TypeError, ValueError):
        return f"the last line printed, {shorten(last, 60)!r}, holds values JSON cannot carry"
