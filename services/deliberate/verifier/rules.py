"""The first rule set: deterministic checks of one draft, producing an auditable `Verdict`.

Rules run cheapest first. A hard rule that fails stops the run (fast-fail: later rules would only
re-report the same broken draft); soft rules never stop it and only lower the score. Every outcome
carries a short message that starts with the rule id, e.g. ``final_answer passed: 72`` or
``json_schema failed at $.selected_ids: [1, 2] is too short``.

Without an output schema a draft must state a numeric final answer:
``complete`` (soft), ``final_answer`` (hard), ``numeric_answer`` (hard), ``explicit_final_line`` (soft).
With an output schema it must hold JSON valid under that schema:
``complete`` (soft), ``json_parse`` (hard, repairs what LLMs typically break), ``json_schema`` (hard).

``complete`` runs first because it is the cheapest and because it explains the failures after it:
a draft cut off at the token budget often has no final answer or unclosed JSON.

A rule with nothing to check *abstains* (its check returns `Abstain`): ``arithmetic abstained: no
equation to recompute``. An abstention never invalidates a draft, but it is not a pass either: it adds
nothing to the score and is no evidence. A rule is *substantive* when it checks the answer's content
(arithmetic recomputed, a CEL constraint, a rule pack's checks) rather than its format (everything
above, JSON Schema, a pack's answer shape). A draft's *evidence* is the hard substantive rules that
passed without abstaining; SOLVE_STATUS_VERIFIED needs some beyond the computation checks, `arithmetic` and
`program` (see `Verdict.evidence` and `selection.COMPUTATION_EVIDENCE`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

from deliberate.core.schemas import compiled_validator, shorten
from deliberate.selection.answers import stated_number
from deliberate.selection.numbers import extract_number
from deliberate.verifier.parsing import FinalAnswer, find_final_answer, parse_json

if TYPE_CHECKING:
    from deliberate.decisions.packs import Quality as PackQuality

HARD_RULE_WEIGHT = 1.0
SOFT_RULE_WEIGHT = 0.5
# Messages quote parts of the draft; keep them readable and bounded.
MAX_QUOTE_CHARS = 60
MAX_DETAIL_CHARS = 200
# What json.dumps(value, ensure_ascii=False, separators=(",", ":")) builds on every call, built once.
COMPACT_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class Abstain:
    """What a rule's check returns when it had nothing to check; the message starts with the rule id."""

    message: str


class RuleOutcome(NamedTuple):  # a named tuple, not a frozen dataclass: built for every rule of every draft, 4x faster
    rule_id: str
    passed: bool  # True for an abstention too: it never invalidates a draft
    message: str
    hard: bool
    duration_s: float
    abstained: bool = False
    substantive: bool = False

    @property
    def is_evidence(self) -> bool:
        """A hard substantive rule that ran and passed: evidence that the answer's content holds."""
        return self.hard and self.substantive and self.passed and not self.abstained


@dataclass(frozen=True)
class Verdict:
    valid: bool
    score: float
    outcomes: list[RuleOutcome]
    extracted_answer: str  # the final answer, or the parsed JSON re-serialized compactly; "" if none
    # How good the plan is, where a rule pack scores plans and all its checks passed (`RulePack.quality`).
    quality: PackQuality | None = None

    @property
    def evidence(self) -> list[str]:
        """Rule ids of the hard substantive rules that passed without abstaining, in order, once each;
        empty when only the format was checked (or the draft is invalid)."""
        if not self.valid:
            return []
        return list(dict.fromkeys(o.rule_id for o in self.outcomes if o.is_evidence))


def verify_text(text: str, output_schema: dict | None, finish_reason: str = "stop") -> Verdict:
    """Check one draft with the built-in rule set (no declared constraints); see `verify`."""
    return verify(text, ANSWER_RULES if output_schema is None else JSON_RULES, finish_reason, output_schema)


def verify(
    text: str,
    rules: tuple[Rule, ...],
    finish_reason: str = "stop",
    output_schema: dict | None = None,
    context: dict | None = None,
    kind: str = "",
) -> Verdict:
    """Check one draft with `rules` (in order, fast-fail) and return its verdict. Never raises.

    ``valid`` is False exactly when a hard rule failed (or crashed). ``score`` is the weighted share
    of the rules that ran and passed, in [0, 1], abstentions left out: hard rules weigh
    ``HARD_RULE_WEIGHT`` (1.0), soft rules ``SOFT_RULE_WEIGHT`` (0.5); see `score_outcomes`. The same
    input always yields the same outcomes (durations aside).
    """
    draft = Draft(text=text, finish_reason=finish_reason, output_schema=output_schema, context=context or {})
    draft.kind = kind
    outcomes = run_rules(rules, draft)
    valid = all(outcome.passed for outcome in outcomes if outcome.hard)
    return Verdict(
        valid=valid,
        score=score_outcomes(outcomes),
        outcomes=outcomes,
        extracted_answer=draft.extracted_answer,
        quality=draft.quality if valid else None,
    )


def score_outcomes(outcomes: list[RuleOutcome]) -> float:
    """Weighted share of passed rules: sum(weight of passed) / sum(weight of run), abstentions being
    neither; 0.0 if none ran."""
    total = passed = 0.0
    for outcome in outcomes:
        if not outcome.abstained:
            weight = HARD_RULE_WEIGHT if outcome.hard else SOFT_RULE_WEIGHT
            total += weight
            if outcome.passed:
                passed += weight
    return passed / total if total else 0.0


# --------------------------------------------------------------------------------------------------
# The rule engine
# --------------------------------------------------------------------------------------------------


@dataclass
class Draft:
    """One draft under verification; rules leave what they extracted here for the rules after them."""

    text: str
    finish_reason: str
    output_schema: dict | None
    context: dict = field(default_factory=dict)
    final_answer: FinalAnswer | None = None
    json_value: object = None
    extracted_answer: str = ""
    # Answers validated by rule packs, by constraint index.
    pack_answers: dict[int, object] = field(default_factory=dict)
    # Each pack as of this draft's verification (or why its reference data is unavailable), by constraint index.
    pack_snapshots: dict[int, object] = field(default_factory=dict)
    # What a program draft's program printed, as a number's text, once the `program` check passed (program.py).
    program_answer: str | None = None
    # "program" for a draft that declares itself a program (Draft.kind), else "prose" or "".
    kind: str = ""
    # A decision program printed the JSON answer (`json_value`): there is no text to parse.
    answer_printed: bool = False
    # The plan's quality, left by the rule pack that scores plans once its last check passed (pack_rules.py).
    quality: PackQuality | None = None

    @property
    def answer(self) -> object:
        """What constraints read: the parsed JSON when there is one, else the final answer's text."""
        if self.json_value is not None:
            return self.json_value
        return self.final_answer.text if self.final_answer else None


@dataclass(frozen=True)
class Rule:
    rule_id: str
    hard: bool
    # Returns (passed, message), or `Abstain` when there was nothing to check; the message starts with the rule id.
    check: Callable[[Draft], tuple[bool, str] | Abstain] = field(repr=False)
    # Checks the answer's content, not only its format (see the module docstring).
    substantive: bool = False
    # Reads the reference store or calls a service: it may wait on the network, up to that timeout.
    waits_on_network: bool = False


def run_rules(rules: tuple[Rule, ...], draft: Draft) -> list[RuleOutcome]:
    """Run rules in order until the first hard failure; a rule that raises counts as a hard failure."""
    outcomes = []
    for rule in rules:
        started = time.perf_counter()
        abstained = False
        try:
            result = rule.check(draft)
            if isinstance(result, Abstain):
                passed, abstained, message = True, True, result.message
            else:
                passed, message = result
            hard = rule.hard
        except Exception as exc:  # a buggy rule or hostile input must not take the Verifier down
            passed, hard = False, True
            message = f"{rule.rule_id} crashed: {type(exc).__name__}: {shorten(str(exc), MAX_DETAIL_CHARS)}"
        duration_s = time.perf_counter() - started
        outcomes.append(RuleOutcome(rule.rule_id, passed, message, hard, duration_s, abstained, rule.substantive))
        if hard and not passed:
            break
    return outcomes


# --------------------------------------------------------------------------------------------------
# Rules
# --------------------------------------------------------------------------------------------------


def _check_complete(draft: Draft) -> tuple[bool, str]:
    if draft.finish_reason == "length":
        return False, "complete failed: draft was cut off at the token budget"
    return True, "complete passed"


def _check_final_answer(draft: Draft) -> tuple[bool, str]:
    if draft.program_answer is not None:  # a program draft: its answer is what its program printed
        draft.final_answer = FinalAnswer(draft.program_answer, from_final_line=False)
        draft.extracted_answer = draft.program_answer
        return True, f"final_answer passed: {_quote(draft.program_answer, quotes='')} (printed by the program)"
    draft.final_answer = find_final_answer(draft.text)
    if draft.final_answer is None:
        return False, "final_answer failed: no final-answer line and no number in the draft"
    draft.extracted_answer = draft.final_answer.text
    return True, f"final_answer passed: {_quote(draft.final_answer.text, quotes='')}"


def _check_numeric_answer(draft: Draft) -> tuple[bool, str]:
    answer = _require_final_answer(draft)
    value = extract_number(answer.text)
    if value is None:
        return False, f"numeric_answer failed: final answer {_quote(answer.text)} is not a number"
    stated = stated_number(answer.text)  # what the vote reads: "48 + 24 = 72" states 72
    return True, f"numeric_answer passed: {value if stated is None else stated}"


def _check_explicit_final_line(draft: Draft) -> tuple[bool, str] | Abstain:
    if draft.program_answer is not None:
        return Abstain("explicit_final_line abstained: the program printed the answer")
    if not _require_final_answer(draft).from_final_line:
        return False, "explicit_final_line failed: no 'Final answer:' line; used the last number in the draft"
    return True, "explicit_final_line passed"


def _check_json_parse(draft: Draft) -> tuple[bool, str]:
    if draft.answer_printed:
        return True, "json_parse passed: the JSON the program printed"
    parsed = parse_json(draft.text)
    if parsed.error is not None:
        return False, f"json_parse failed: {parsed.error}"
    draft.json_value = parsed.value
    draft.extracted_answer = COMPACT_JSON.encode(parsed.value)
    if parsed.repairs:
        return True, f"json_parse passed after repair: {', '.join(parsed.repairs)}"
    return True, "json_parse passed"


def _check_json_schema(draft: Draft) -> tuple[bool, str]:
    schema_text = json.dumps(draft.output_schema, sort_keys=True)
    try:
        validator = compiled_validator(schema_text)
    except ValueError as exc:
        return False, f"json_schema failed: output schema {exc}"
    return schema_check("json_schema", validator, draft.json_value)


def schema_check(rule_id: str, validator, value: object) -> tuple[bool, str]:
    """Validates `value`, naming the path of the most relevant error."""
    error = validator.first_error(value)
    if error is not None:
        return False, f"{rule_id} failed at {error.json_path}: {shorten(error.message, MAX_DETAIL_CHARS)}"
    return True, f"{rule_id} passed"


def _require_final_answer(draft: Draft) -> FinalAnswer:
    # Guaranteed by the hard final_answer rule running first; fail loudly if the order ever changes.
    if draft.final_answer is None:
        raise RuntimeError("final_answer must run before this rule")
    return draft.final_answer


COMPLETE = Rule("complete", hard=False, check=_check_complete)
ANSWER_RULES = (
    COMPLETE,
    Rule("final_answer", hard=True, check=_check_final_answer),
    Rule("numeric_answer", hard=True, check=_check_numeric_answer),
    Rule("explicit_final_line", hard=False, check=_check_explicit_final_line),
)
JSON_RULES = (
    COMPLETE,
    Rule("json_parse", hard=True, check=_check_json_parse),
    Rule("json_schema", hard=True, check=_check_json_schema),
)


# --------------------------------------------------------------------------------------------------
# Message helpers
# --------------------------------------------------------------------------------------------------


def _quote(text: str, quotes: str = "'") -> str:
    return f"{quotes}{shorten(text, MAX_QUOTE_CHARS)}{quotes}"
