"""What the Scheduler reads from verdicts and adds to them: the default constraints, re-draft feedback, the
answer's status reason, the verdict of a draft verified too late, whether a refined answer may replace the best
draft, and a program answer's computed value. Pure functions over contract messages, no calls.
"""

from __future__ import annotations

from deliberate_api.common.v1 import common_pb2
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb

from ..core.convert import duration
from ..selection import Selection, answer_key

# How many distinct Verifier messages a re-draft prompt carries.
MAX_FEEDBACK_MESSAGES = 3
# The rule pack every request without an output schema gets, unless its plan turns it off (default_arithmetic).
DEFAULT_ARITHMETIC = common_pb2.Constraint(rule_pack="arithmetic")
DEFAULT_PROGRAM = common_pb2.Constraint(rule_pack="program")


def effective_constraints(
    request: pb.SolveRequest, programs: bool = False, default_arithmetic: bool = True
) -> list[common_pb2.Constraint]:
    """The request's constraints, plus by default for a request without an output schema: the arithmetic pack
    (hard) unless the request declared it or its plan turned the default off (`default_arithmetic`), and — when
    the round has program drafts —
    the program check (hard: the program runs in the Verifier's sandbox and its printed value is the answer;
    prose drafts abstain)."""
    constraints = list(request.constraints)
    if request.output_schema.strip():
        return constraints
    declared = {c.rule_pack for c in constraints if c.WhichOneof("kind") == "rule_pack"}
    if programs and "program" not in declared:
        constraints.append(DEFAULT_PROGRAM)
    if not default_arithmetic or "arithmetic" in declared:
        return constraints
    return [*constraints, DEFAULT_ARITHMETIC]


def verifier_feedback(verdicts: list[common_pb2.DraftVerdict], limit: int | None = MAX_FEEDBACK_MESSAGES) -> str:
    """The distinct hard-rule failures of these verdicts, most frequent first, e.g.
    "budget_check failed: total cost 5,023 is 23 over the budget 5,000"."""
    counts: dict[str, int] = {}
    for verdict in verdicts:
        for rule in verdict.rule_results:
            if rule.hard and not rule.passed:
                counts[rule.message] = counts.get(rule.message, 0) + 1
    ordered = sorted(counts, key=lambda m: -counts[m])
    return "; ".join(ordered[:limit])


def status_reason(
    selection: Selection,
    rounds: int,
    verdicts: list[common_pb2.DraftVerdict],
    best: common_pb2.DraftVerdict,
    replaced: str = "",
) -> str:
    """Why the answer has its status, in one line: the selection's reason (`selection.earned_status`), then for an
    UNVERIFIED answer the rounds and every error, for an UNCHECKED one what its best draft was checked on, and last
    `replaced` ("" or why the best draft answers in place of the refined answer)."""
    reason = selection.reason
    if selection.status == "unverified":
        reason += f" after {rounds} round(s); errors: {verifier_feedback(verdicts, limit=None)}"
    elif selection.status == "unchecked":
        reason += unchecked_detail(best)
    return f"{reason}; {replaced}" if replaced else reason


def unchecked_detail(verdict: common_pb2.DraftVerdict) -> str:
    """What the best draft of an UNCHECKED answer was checked on, e.g. "; passed: final_answer,
    numeric_answer; abstained: arithmetic abstained: no equation to recompute"."""
    format_checks = [r.rule_id for r in verdict.rule_results if r.passed and not r.abstained]
    abstained = [r.message for r in verdict.rule_results if r.abstained]
    detail = f"; passed: {', '.join(format_checks)}" if format_checks else ""
    if abstained:
        detail += f"; abstained: {'; '.join(abstained)}"
    return detail + "; the answer is not verified"


def late_verdict(draft_id: str, timeout_s: float) -> common_pb2.DraftVerdict:
    message = f"verification_timeout failed: no verdict within {timeout_s:g}s"
    return common_pb2.DraftVerdict(
        draft_id=draft_id,
        valid=False,
        score=0.0,
        rule_results=[common_pb2.RuleResult(rule_id="verification_timeout", passed=False, message=message, hard=True)],
        latency=duration(timeout_s),
    )


def shared_verdict(original: common_pb2.DraftVerdict, draft_id: str) -> common_pb2.DraftVerdict:
    """A structural duplicate's verdict: the original's, under the duplicate's id."""
    verdict = common_pb2.DraftVerdict()
    verdict.CopyFrom(original)
    verdict.draft_id = draft_id
    return verdict


# Evidence about the plan, not only the arithmetic: the draft's program ran, or a program reached its answer.
# A refined answer's own arithmetic never outweighs it.
PLAN_EVIDENCE = frozenset({"program", "cross_check"})


def refinement_problem(refined: common_pb2.DraftVerdict, best: common_pb2.DraftVerdict) -> str:
    """Why the refined answer may not replace the best draft ("" when it may): it fails a hard rule, or it states
    another final answer than a checked best draft — with no substantive check of its own, or against a best
    draft whose plan was checked (`PLAN_EVIDENCE`). The status rests on the draft's checks, which say nothing
    about a different answer (what refinement changed on recorded solves: docs/eval.md#what-refinement-changed)."""
    if not refined.valid:
        return "; ".join(r.message for r in refined.rule_results if r.hard and not r.passed)
    if not best.evidence or answer_key(refined.extracted_answer) == answer_key(best.extracted_answer):
        return ""
    differs = f"its answer {refined.extracted_answer!r} differs from the checked draft's {best.extracted_answer!r}"
    if plan := sorted(PLAN_EVIDENCE & set(best.evidence)):
        return f"{differs}, whose plan was checked ({', '.join(plan)})"
    if not refined.evidence:
        return f"{differs} and no substantive check applied to it"
    return ""


def with_computed_answer(text: str, verdict: common_pb2.DraftVerdict) -> str:
    """A program's text with the value it printed in the Verifier's sandbox stated after it: the reader of a
    program answer gets the number, not only the code that computes it. Other texts are returned unchanged."""
    line = computed_answer_line(verdict)
    return f"{text.rstrip()}{line}" if line else text


def computed_answer_line(verdict: common_pb2.DraftVerdict) -> str:
    """ "\n\nFinal answer: <value>" where the verdict's program ran and printed a number; "" otherwise."""
    ran = any(r.rule_id == "program" and r.passed and not r.abstained for r in verdict.rule_results)
    return f"\n\nFinal answer: {verdict.extracted_answer}" if ran and verdict.extracted_answer else ""
