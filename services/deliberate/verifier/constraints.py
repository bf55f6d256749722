"""Turns a request's output schema and declared constraints into one ordered, compiled rule list.

Order is by cost, cheapest first, so fast-fail skips the expensive rules of a broken draft:
completeness → answer extraction (JSON parse, or final answer) → output schema → JSON Schema
constraints → CEL constraints → rule packs → soft style rules. Compiled schemas and CEL programs are
cached by their text. Anything that does not compile is an `InvalidArgument` naming the field, which the
gRPC edge answers with INVALID_ARGUMENT.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

from ..core.requests import InvalidArgument
from ..core.schemas import compiled_validator
from ..decisions.packs import ReferenceUnavailable, RulePack, decision_data, registry
from .cel_rules import CelEnvironment, cel_check, compile_cel, compiled_cel
from .constraint_spec import ConstraintSpec
from .decision_program import decision_program_rule
from .pack_rules import pack_rules
from .program import PROGRAM, is_program_rule, program_rule
from .rules import ANSWER_RULES, JSON_RULES, Rule, schema_check
from .streaming import ArithmeticPrefix, JsonFencePrefix, PrefixCheck

# How many constraints, how long a CEL expression, how large the context: declared with the request limits
# (core/limits.py CONSTRAINTS) and checked at the edge before anything here compiles.

# The kinds' rules run in this order, cheapest first.
KIND_ORDER = {"json_schema": 0, "cel_expression": 1, "rule_pack": 2}


@dataclass(frozen=True)
class RuleSet:
    rules: tuple[Rule, ...]
    output_schema: dict | None
    # What streaming verification checks on a draft's prefix while it is generated (`streaming`).
    prefix_checks: tuple[PrefixCheck, ...] = ()
    # The rules of a draft that declares itself a program (Draft.kind "program"): never judged on its text alone,
    # its program runs first — a structured request's as a decision program over the request's data.
    program_rules: tuple[Rule, ...] = ()
    # The rule packs of the request, for the plan one of them may compute itself (`reference_plan`).
    packs: tuple[RulePack, ...] = ()

    @property
    def rule_ids(self) -> list[str]:
        return [rule.rule_id for rule in self.rules]

    @property
    def waits_on_network(self) -> bool:
        return any(rule.waits_on_network for rule in (*self.rules, *self.program_rules))

    def rules_for(self, kind: str) -> tuple[Rule, ...]:
        return self.program_rules if kind == PROGRAM and self.program_rules else self.rules

    def reference_plan(self) -> tuple[RulePack, dict] | None:
        """The first plan a pack of the request computes itself, with the pack; None where none can."""
        for pack in self.packs:
            try:
                snapshot = pack.snapshot()
                answer = snapshot.reference_answer()
            except ReferenceUnavailable:
                continue
            if answer is not None:
                return snapshot, answer
        return None


def compile_rules(
    output_schema_text: str,
    constraints: list[ConstraintSpec],
    context: dict,
    services: Mapping[str, object] | None = None,
) -> RuleSet:
    """`services`: what the Verifier offers rule packs, by name (`service.pack_services`); each pack gets those it
    declared. None: nothing, and packs read their package data."""
    services = services or {}
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
    packs: list[RulePack] = []
    rules_by_spec = [(spec, constraint_rule(spec, context, services, cel_environment, packs)) for spec in ordered]
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
        rules = (base[0], *programs, *base[1:], *others, *style)
        program_rules = (base[0], *(programs or (program_rule(),)), *base[1:], *others, *style)
        return RuleSet(rules, None, prefix, program_rules, tuple(packs))
    head = JSON_RULES[:2]  # complete, json_parse
    schema_rules = (Rule("json_schema", True, lambda d: schema_check("json_schema", validator, d.json_value)),)
    tail = (*(schema_rules if output_schema else ()), *constraint_rules)
    # A decision program prints the plan that json_parse then reads: it runs right after complete.
    functions = {name: f for pack in packs for name, f in pack.decision_functions().items()}
    program = decision_program_rule(decision_data(context, ordered), functions)
    return RuleSet((*head, *tail), output_schema, prefix, (head[0], program, head[1], *tail), tuple(packs))


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
    if spec.kind != "cel_expression":
        return reads_answer(spec)
    variables = cel_variables(spec)
    # A comprehension variable named `text` only makes this answer no, which is safe.
    return variables is not None and bool(ANSWER_VARIABLES & variables) and "text" not in variables


def reads_answer(spec: ConstraintSpec) -> bool:
    """Whether the constraint reads a structured answer (then the draft must hold JSON) or only the text."""
    if spec.kind == "json_schema":
        return True
    if spec.kind == "cel_expression":
        variables = cel_variables(spec)
        return variables is None or bool(ANSWER_VARIABLES & variables)  # None: compile_cel reports it, by field
    pack = registry().get(spec.source)
    return pack is not None and pack.answer_model is not None


# The names a draft gives values to (CelEnvironment.resolve); the others are `ctx` and comprehension variables.
ANSWER_VARIABLES = frozenset({"answer", "plan"})


def cel_variables(spec: ConstraintSpec) -> set[str] | None:
    """The variables a CEL constraint reads; None when it does not compile."""
    try:
        return set(compiled_cel(spec.source).references()["variables"])
    except ValueError:
        return None


def constraint_rule(
    spec: ConstraintSpec,
    context: dict,
    services: Mapping[str, object],
    cel_environment: CelEnvironment | None = None,
    packs: list[RulePack] | None = None,
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
    return pack_rules(spec, context, services, packs)
