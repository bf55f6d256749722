"""Turns a request's output schema and declared constraints into one ordered, compiled rule list.

Order is by cost, cheapest first, so fast-fail skips the expensive rules of a broken draft:
completeness → answer extraction (JSON parse, or final answer) → output schema → JSON Schema
constraints → CEL constraints → rule packs → soft style rules. Compiled schemas and CEL programs are
cached by their text. Anything that does not compile is an `InvalidArgument` naming the field, which the
gRPC edge answers with INVALID_ARGUMENT.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from functools import lru_cache

import cel
from pydantic import ValidationError

from ..core.requests import InvalidArgument
from ..core.schemas import compiled_validator, shorten
from ..risk.client import RiskClient
from .cel_fast import INT64_MAX, INT64_MIN, compile_fast, plain
from .cel_fast import evaluate as evaluate_fast
from .packs import Abstained, ReferenceStore, ReferenceUnavailable, RulePack, registry
from .program import PROGRAM, is_program_rule, program_rule
from .rules import (
    ANSWER_RULES,
    JSON_RULES,
    MAX_DETAIL_CHARS,
    Abstain,
    Draft,
    Rule,
    schema_check,
)
from .streaming import ArithmeticPrefix, JsonFencePrefix, PrefixCheck

# How many constraints, how long a CEL expression, how large the context: declared with the request limits
# (core/limits.py CONSTRAINTS) and checked at the edge before anything here compiles.
# Static estimate of CEL evaluation steps (see `cel_cost`); above it the rule fails instead of running.
MAX_CEL_COST = 1_000_000
# What one step copies when a variable is read or `+` concatenates (common-expression-language 0.10 copies a
# value on each read: a step is about a microsecond, a string copies at 1.5-6 GB/s, a list at 15-20 M items/s).
CHARS_PER_STEP = 1_500
ITEMS_PER_STEP = 15

KIND_ORDER = {"json_schema": 0, "cel_expression": 1, "rule_pack": 2}


@dataclass(frozen=True)
class ConstraintSpec:
    """The domain form of deliberate.common.v1.Constraint."""

    index: int
    kind: str  # json_schema | cel_expression | rule_pack
    source: str
    id: str = ""
    soft: bool = False
    params: dict = field(default_factory=dict)
    failure_message: str = ""

    @property
    def field(self) -> str:
        return f"constraints[{self.index}]"

    @property
    def rule_id(self) -> str:
        return self.id or f"{self.kind.removesuffix('_expression')}_{self.index}"


@dataclass(frozen=True)
class RuleSet:
    rules: tuple[Rule, ...]
    output_schema: dict | None
    # What streaming verification checks on a draft's prefix while it is generated (`streaming`).
    prefix_checks: tuple[PrefixCheck, ...] = ()

    @property
    def rule_ids(self) -> list[str]:
        return [rule.rule_id for rule in self.rules]

    @property
    def waits_on_network(self) -> bool:
        return any(rule.waits_on_network for rule in self.rules)


def compile_rules(
    output_schema_text: str,
    constraints: list[ConstraintSpec],
    context: dict,
    reference: ReferenceStore | None = None,
    risk: RiskClient | None = None,
) -> RuleSet:
    """`reference`: the store packs read reference data from; None for their package data. `risk`: the client of
    the risk-model service, for the credit pack."""
    output_schema = validator = None
    if output_schema_text.strip():
        try:
            validator = compiled_validator(output_schema_text)  # first: it refuses JSON nested too deeply to load
            output_schema = json.loads(output_schema_text)
        except ValueError as error:
            raise InvalidArgument("output_schema", str(error)) from None

    ordered = sorted(constraints, key=lambda c: (KIND_ORDER[c.kind], c.index))
    # One for all CEL rules: the context is converted once, and each draft's own variables once per draft.
    cel_environment = CelEnvironment(context) if any(c.kind == "cel_expression" for c in ordered) else None
    rules_by_spec = [(spec, constraint_rule(spec, context, reference, risk, cel_environment)) for spec in ordered]
    constraint_rules = tuple(rule for _, rules in rules_by_spec for rule in rules)
    structured = output_schema is not None or any(reads_answer(c) for c in constraints)
    answer_rules = tuple(
        rule
        for spec, rules in rules_by_spec
        if not spec.soft and reads_answer_alone(spec)
        for rule in rules
        if not rule.waits_on_network
    )
    prefix = prefix_checks(constraints, structured, validator, answer_rules)
    if not structured:  # free text: a numeric final answer, then the constraints, then style
        # The program check hands a program draft's printed answer to final_answer: it runs right after complete.
        programs = tuple(rule for rule in constraint_rules if is_program_rule(rule))
        others = tuple(rule for rule in constraint_rules if not is_program_rule(rule))
        base, style = ANSWER_RULES[:3], ANSWER_RULES[3:]
        return RuleSet((base[0], *programs, *base[1:], *others, *style), None, prefix)
    head = JSON_RULES[:2]  # complete, json_parse
    schema_rules = (Rule("json_schema", True, lambda d: schema_check("json_schema", validator, d.json_value)),)
    return RuleSet((*head, *(schema_rules if output_schema else ()), *constraint_rules), output_schema, prefix)


def prefix_checks(
    constraints: list[ConstraintSpec], structured: bool, validator, answer_rules: tuple[Rule, ...] = ()
) -> tuple[PrefixCheck, ...]:
    """The hard rules that can judge a draft's prefix (`streaming`): the arithmetic pack's recomputation, line by
    line, and for a structured answer its first ```json block once closed: parsed, checked against the output
    schema's `validator` (None: no schema), then by `answer_rules`."""
    checks: list[PrefixCheck] = []
    if any(c.kind == "rule_pack" and c.source == "arithmetic" and not c.soft for c in constraints):
        checks.append(ArithmeticPrefix())
    if structured:
        checks.append(JsonFencePrefix(validator, answer_rules))
    return tuple(checks)


def reads_answer_alone(spec: ConstraintSpec) -> bool:
    """Whether the constraint's verdict depends on the structured answer (and the request) only, not on the
    draft's text: then it is final once the answer's JSON block is."""
    if spec.kind == "json_schema":
        return True
    if spec.kind == "cel_expression":
        try:
            variables = set(_compiled_cel(spec.source).references()["variables"])
        except ValueError:
            return False
        # The names a draft gives values to (CelEnvironment.resolve); the others are `ctx` and comprehension
        # variables. A comprehension variable named `text` only makes this answer no, which is safe.
        return bool({"answer", "plan"} & variables) and "text" not in variables
    pack = registry().get(spec.source)
    return pack is not None and pack.answer_model is not None


def reads_answer(spec: ConstraintSpec) -> bool:
    """Whether the constraint reads a structured answer (then the draft must hold JSON) or only the text."""
    if spec.kind == "json_schema":
        return True
    if spec.kind == "cel_expression":
        try:
            variables = _compiled_cel(spec.source).references()["variables"]
        except ValueError:
            return True  # compile_cel reports it with the field's name
        return bool({"answer", "plan"} & set(variables))
    pack = registry().get(spec.source)
    return pack is not None and pack.answer_model is not None


def constraint_rule(
    spec: ConstraintSpec,
    context: dict,
    reference: ReferenceStore | None,
    risk: RiskClient | None,
    cel_environment: CelEnvironment | None = None,
) -> tuple[Rule, ...]:
    hard = not spec.soft
    if spec.kind == "json_schema":
        try:
            validator = compiled_validator(spec.source)
        except ValueError as error:
            raise InvalidArgument(f"{spec.field}.json_schema", str(error)) from None
        return (Rule(spec.rule_id, hard, lambda d: schema_check(spec.rule_id, validator, d.answer)),)
    if spec.kind == "cel_expression":
        program = compile_cel(spec)
        environment = cel_environment or CelEnvironment(context)
        return (Rule(spec.rule_id, hard, lambda d: cel_check(spec, program, environment, d), substantive=True),)
    return pack_rules(spec, context, reference, risk)


# --------------------------------------------------------------------------------------------------
# CEL
# --------------------------------------------------------------------------------------------------


def compile_cel(spec: ConstraintSpec):
    try:
        return _compiled_cel(spec.source)
    except ValueError as error:
        raise InvalidArgument(f"{spec.field}.cel_expression", shorten(str(error), 400)) from None


@lru_cache(maxsize=1024)
def _compiled_cel(expression: str):
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
            copy = largest // ITEMS_PER_STEP + longest // CHARS_PER_STEP  # copy_steps(answer)
            shape = (largest, copy, is_plain)
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
        return False, f"{spec.rule_id} failed: {reason}"
    return False, f"{spec.rule_id} failed: expression returned {shorten(repr(result), 80)}, not a bool"


@lru_cache(maxsize=4096)
def draft_cel_cost(expression: str, largest: int, context_steps: int, text_steps: int, answer_steps: int) -> int:
    """`cel_cost` with a draft's reads; drafts of one request mostly repeat the same few inputs."""
    reads = {"ctx": context_steps, "text": text_steps, "answer": answer_steps, "plan": answer_steps}
    return cel_cost(expression, largest, reads)


MACRO = re.compile(r"\.(all|exists_one|exists|map|filter)\s*\(|\(|\)|\bin\b|\b(?:ctx|text|answer|plan)\b")
VARIABLES = ("ctx", "text", "answer", "plan")


def cel_cost(expression: str, largest: int, reads: dict[str, int] | None = None) -> int:
    """A conservative static estimate of evaluation steps. Each comprehension macro, and each `in` on a list,
    multiplies by the largest list's length at its nesting depth. Each read of a variable copies what it holds
    (`reads`: steps per read of each, see `copy_steps`) as often as the loops around it run; each `+` of a chain
    may copy the largest of them again, quadratic in the chain's length. Without these two,
    `ctx.l.all(x, ctx.l.all(y, size(text) > 0))` over 900 items and a 1 MB draft ran 133 s, and
    `text + text + …` 290 times 28 s."""
    n = max(largest, 1)
    reads = reads or {}
    loops, variables = loop_depths(expression)
    copying = sum(reads.get(name, 0) * n**depth for name, depth in variables)
    concatenation = plus_signs(expression) ** 2 * max(reads.values(), default=0)
    return len(expression) + sum(n**depth for depth in loops) + copying + concatenation


@lru_cache(maxsize=1024)
def plus_signs(expression: str) -> int:
    return expression.count("+")


def copy_steps(value: object) -> int:
    """What reading `value` in CEL may copy, in steps: its largest list and its longest string."""
    return largest_list(value) // ITEMS_PER_STEP + longest_string(value) // CHARS_PER_STEP


@lru_cache(maxsize=1024)
def loop_depths(expression: str) -> tuple[tuple[int, ...], tuple[tuple[str, int], ...]]:
    """How many loops deep the work runs: for each comprehension macro and `in` operator (counting itself), and
    for each read of a variable (name, depth)."""
    stack: list[bool] = []  # per open parenthesis: does it open a macro?
    loops, reads = [], []
    for match in MACRO.finditer(expression):
        token = match.group(0)
        if token == ")":
            if stack:
                stack.pop()
        elif token == "(":
            stack.append(False)
        elif token in VARIABLES:
            reads.append((token, sum(stack)))
        else:
            loops.append(sum(stack) + 1)
            if token != "in":
                stack.append(True)
    return tuple(loops), tuple(reads)


def largest_list(value: object, budget: int = 10_000) -> int:
    """Length of the longest list inside `value` (visiting at most `budget` nodes)."""
    largest, stack, seen = 0, [value], 0
    while stack and seen < budget:
        item = stack.pop()
        seen += 1
        if isinstance(item, list):
            largest = max(largest, len(item))
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
    return largest


# Leaves of parsed JSON that hold neither a list nor a string: skipped without the isinstance checks.
SCALAR_TYPES = (int, float, bool, type(None))


def answer_sizes(value: object, budget: int = 10_000) -> tuple[int, int, bool]:
    """(largest_list(value), longest_string(value), cel_fast.plain(value)) in one walk instead of three. The walk
    visits keys too, so where it would pass `budget` nodes the three bounded walks decide instead, and the answer
    is always theirs."""
    largest = longest = 0
    is_plain = True
    stack, seen = [value], 0
    while stack:
        item = stack.pop()
        seen += 1
        if seen > budget:
            return largest_list(value, budget), longest_string(value, budget), plain(value, budget)
        kind = type(item)
        if kind in SCALAR_TYPES:
            if kind is int and not INT64_MIN <= item <= INT64_MAX:
                is_plain = False
            continue
        if kind is not str and kind is not list and kind is not dict:
            is_plain = False  # a subclass, a tuple, ...: not what cel_fast models
        if isinstance(item, str):
            longest = max(longest, len(item))
        elif isinstance(item, list):
            largest = max(largest, len(item))
            stack.extend(item)
        elif isinstance(item, dict):
            keys = item.keys()
            if is_plain and any(type(key) is not str for key in keys):
                is_plain = False
            stack.extend(keys)
            stack.extend(item.values())
    return largest, longest, is_plain


def longest_string(value: object, budget: int = 10_000) -> int:
    """Length of the longest string inside `value` (visiting at most `budget` nodes)."""
    longest, stack, seen = 0, [value], 0
    while stack and seen < budget:
        item = stack.pop()
        seen += 1
        if isinstance(item, str):
            longest = max(longest, len(item))
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
    return longest


# --------------------------------------------------------------------------------------------------
# Rule packs
# --------------------------------------------------------------------------------------------------


def pack_rules(
    spec: ConstraintSpec, context: dict, reference: ReferenceStore | None, risk: RiskClient | None = None
) -> tuple[Rule, ...]:
    if spec.source == PROGRAM:  # built into the Verifier, not a plugin: it reads and writes the draft
        if spec.params:
            raise InvalidArgument(f"{spec.field}.params", "the program check takes no parameters")
        return (program_rule(hard=not spec.soft),)
    packs = registry()
    pack_class = packs.get(spec.source)
    if pack_class is None:
        raise InvalidArgument(f"{spec.field}.rule_pack", f"unknown rule pack {spec.source!r}; known: {sorted(packs)}")
    try:
        params = pack_class.params_model.model_validate({**context, **spec.params})
    except ValidationError as error:
        raise InvalidArgument(f"{spec.field}.params", pydantic_summary(error)) from None
    pack = pack_class(params, reference, risk)
    hard = not spec.soft
    rules = []
    if pack_class.answer_model is not None:
        shape_id = spec.id or pack_class.name
        rules.append(Rule(shape_id, hard, lambda d: pack_shape_check(spec, pack, shape_id, d)))
    for rule_id, method in pack_class.checks():
        substantive = getattr(getattr(pack_class, method), "substantive", True)
        rules.append(
            Rule(
                rule_id,
                hard,
                lambda d, r=rule_id, m=method: pack_check(spec, pack, r, m, d),
                substantive=substantive,
                waits_on_network=pack.waits_on_network,
            )
        )
    return tuple(rules)


def pack_shape_check(spec: ConstraintSpec, pack: RulePack, rule_id: str, draft: Draft) -> tuple[bool, str]:
    try:
        draft.pack_answers[spec.index] = pack.answer_model.model_validate(draft.answer)
    except ValidationError as error:
        return False, f"{rule_id} failed: {pydantic_summary(error)}"
    return True, f"{rule_id} passed: answer matches {pack.answer_model.__name__}"


def pack_check(
    spec: ConstraintSpec, pack: RulePack, rule_id: str, method: str, draft: Draft
) -> tuple[bool, str] | Abstain:
    """Runs one check of a pack; it abstains when its input is absent (the answer did not match the
    pack's model, which its soft shape rule already reported) or when the check itself abstains."""
    if pack.answer_model is None:
        subject = draft.text
    elif spec.index in draft.pack_answers:
        subject = draft.pack_answers[spec.index]
    else:
        return Abstain(f"{rule_id} abstained: the answer does not match {pack.answer_model.__name__}")
    snapshot = pack_snapshot(spec, pack, draft)
    if isinstance(snapshot, ReferenceUnavailable):
        return False, f"{rule_id} failed: reference data unavailable: {snapshot}"
    result = getattr(snapshot, method)(subject)
    if isinstance(result, Abstained):
        return Abstain(f"{rule_id} abstained: {result.detail}")
    passed, detail = result
    return passed, f"{rule_id} {'passed' if passed else 'failed'}: {detail}"


def pack_snapshot(spec: ConstraintSpec, pack: RulePack, draft: Draft) -> RulePack | ReferenceUnavailable:
    """The pack as of this draft's verification: taken at its first check and kept on the draft, so every
    check of the draft reads one version of the reference data (and a store failure is read once)."""
    if spec.index not in draft.pack_snapshots:
        try:
            draft.pack_snapshots[spec.index] = pack.snapshot()
        except ReferenceUnavailable as error:
            draft.pack_snapshots[spec.index] = error
    return draft.pack_snapshots[spec.index]


def pydantic_summary(error: ValidationError) -> str:
    first = error.errors()[0]
    location = ".".join(str(part) for part in first["loc"]) or "answer"
    more = f" (+{error.error_count() - 1} more)" if error.error_count() > 1 else ""
    return shorten(f"{location}: {first['msg']}{more}", MAX_DETAIL_CHARS)
