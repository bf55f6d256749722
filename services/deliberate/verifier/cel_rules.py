"""CEL constraints as rules: an expression compiled once per text, evaluated per draft over `ctx` (the request's
context), `answer`/`plan` (the draft's structured answer) and `text` (its text), after its estimated cost
(`cel_cost`) is checked against the limit."""

from __future__ import annotations

import math
import threading
from functools import lru_cache

import cel

from ..core.requests import InvalidArgument
from ..core.schemas import shorten
from .cel_cost import (
    CHARS_PER_STEP,
    MAX_CEL_COST,
    answer_sizes,
    copy_steps,
    draft_cel_cost,
    largest_list,
    steps_to_copy,
)
from .cel_explain import explain
from .cel_fast import compile_fast
from .cel_fast import evaluate as evaluate_fast
from .constraint_spec import ConstraintSpec
from .rules import MAX_DETAIL_CHARS, Draft


def cel_sum(values: object) -> int | float:
    """`sum(list)`: the total of a list of numbers (0 for an empty one) — what a budget, a floor on a total or a cap on
    a sum needs, and standard CEL lacks: `sum(plan.selected_ids.map(i, ctx.cost_of[string(i)])) <= ctx.budget`."""
    if not isinstance(values, list):
        raise ValueError(f"sum() takes a list of numbers, not {type(values).__name__}")
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        raise ValueError("sum() takes a list of numbers only")
    if all(isinstance(v, int) for v in values):
        return sum(values)
    return math.fsum(values)  # correctly rounded: 0.05 + 0.04 + 0.01 is 0.1, not 0.09999999999999999


def monthly_payment(amount: object, annual_rate: object, months: object) -> float:
    """`monthly_payment(amount, annual_rate, months)`: an annuity loan's monthly payment (the rate a fraction a year),
    so a request can cap a loan's instalment, which standard CEL (no powers) cannot compute:
    `plan.offers.all(o, monthly_payment(double(o.amount), o.annual_rate, o.term_months) <= 900.0)`."""
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (amount, annual_rate, months)):
        raise ValueError("monthly_payment() takes three numbers: amount, annual rate, months")
    if months <= 0 or not 0 <= annual_rate <= 1:
        raise ValueError("monthly_payment(): months must be positive and the annual rate a fraction in [0, 1]")
    monthly = annual_rate / 12
    return amount / months if monthly == 0 else amount * monthly / (1 - (1 + monthly) ** -months)


# Functions the Verifier adds to CEL; cel_cost counts `sum` as a loop over its list.
FUNCTIONS = {"sum": cel_sum, "monthly_payment": monthly_payment}


def compile_cel(spec: ConstraintSpec):
    try:
        return compiled_cel(spec.source)
    except ValueError as error:
        raise InvalidArgument(f"{spec.field}.cel_expression", shorten(str(error), 400)) from None


@lru_cache(maxsize=1024)
def compiled_cel(expression: str):
    return cel.compile(expression)


class CelEnvironment:
    """The request's context converted to CEL once, for all CEL rules of the rule set; each draft's own variables
    are resolved on demand.

    Converting a 100-id context takes longer than evaluating the expression, so it must not happen per draft. The
    expressions cel_fast can evaluate exactly are evaluated there, on the Python values; the library evaluates the
    rest. Thread-safe: a rule set that reads the reference store verifies its drafts in worker threads.
    """

    def __init__(self, context: dict):
        self.context = context
        self.largest_context_list = largest_list(context)
        self.context_copy_steps = copy_steps(context)
        self.answer_shape_of: tuple[object, tuple[int, int, bool]] = (None, (0, 0, True))
        self.draft: Draft | None = None
        self.cel_context = cel.Context()
        self.cel_context.add_variable("ctx", context)
        for name, function in FUNCTIONS.items():
            self.cel_context.add_function(name, function)
        self.cel_context.set_variable_resolver(self.resolve)
        self.lock = threading.Lock()  # one draft at a time is the resolver's

    def resolve(self, name: str):
        if name in ("answer", "plan"):
            return self.draft.answer
        if name == "text":
            return self.draft.text
        return None

    def execute(self, program, draft: Draft):
        result = self.execute_fast(program.source, draft)
        if result is not None:
            return result
        with self.lock:
            self.draft = draft
            try:
                return program.execute(self.cel_context)
            finally:
                self.draft = None

    def execute_fast(self, expression: str, draft: Draft) -> bool | None:
        """The result of cel_fast's evaluation, or None where the library must decide (see cel_fast)."""
        evaluator = compile_fast(expression)
        if evaluator is None:
            return None
        variables = {"ctx": self.context, "text": draft.text}
        if draft.answer is not None:
            if not self.answer_shape(draft.answer)[2]:
                return None
            variables["answer"] = variables["plan"] = draft.answer
        return evaluate_fast(evaluator, variables)

    def answer_shape(self, answer: object) -> tuple[int, int, bool]:
        """(largest list, copy steps, plain for cel_fast) of a draft's answer, found once for all CEL rules of the
        draft."""
        seen, shape = self.answer_shape_of
        if seen is not answer:
            largest, longest, is_plain = answer_sizes(answer)
            shape = (largest, steps_to_copy(largest, longest), is_plain)
            self.answer_shape_of = (answer, shape)
        return shape


def cel_check(spec: ConstraintSpec, program, environment: CelEnvironment, draft: Draft) -> tuple[bool, str]:
    largest_answer_list, answer, _ = environment.answer_shape(draft.answer)
    largest = max(environment.largest_context_list, largest_answer_list)
    text = len(draft.text) // CHARS_PER_STEP
    cost = draft_cel_cost(spec.source, largest, environment.context_copy_steps, text, answer)
    if cost > MAX_CEL_COST:
        return False, f"{spec.rule_id} failed: estimated cost {cost} > limit {MAX_CEL_COST}"
    try:
        result = environment.execute(program, draft)
    except Exception as error:  # the Rust core raises for missing fields, type errors, …
        return False, f"{spec.rule_id} failed: {shorten(str(error), MAX_DETAIL_CHARS)}"
    if result is True:
        return True, f"{spec.rule_id} passed"
    if result is False:
        reason = spec.failure_message or f"`{shorten(spec.source, 120)}` is false"
        saw = explain(spec.source, lambda source: environment.execute(compiled_cel(source), draft))
        return False, f"{spec.rule_id} failed: {reason}" + (f" ({shorten(saw, MAX_DETAIL_CHARS)})" if saw else "")
    return False, f"{spec.rule_id} failed: expression returned {shorten(repr(result), 80)}, not a bool"
