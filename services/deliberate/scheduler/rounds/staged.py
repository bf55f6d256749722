"""A staged round — the cascade and the adaptive round (docs/scheduler.md, "The cascade"): the plan's first stage
(a greedy program and prose draft, for the cascade), then `step` drafts at a time in its order of kinds, each stage
one whole call (`whole`) verified before the next starts, until the stage's drafts settle the answer
(`selection.adaptive.settled`, the rule the replays apply; for a decision, a plan that passes every rule — at the
pack's bound where it has one), the plan's maximum is spent, or the deadline leaves less time than the last stage
took."""

from __future__ import annotations

import time

from opentelemetry import trace

from deliberate_api.common.v1 import common_pb2
from deliberate_api.drafter.v1 import drafter_service_pb2

from ...core import telemetry
from ...selection.adaptive import PROGRAM, settled, trusted
from ..round_plan import RoundPlan
from ..solve import RoundOutcome, Solve
from .draft_stages import DraftStages
from .stopping_rules import decision_reason, scored_against_bound
from .whole import whole_round


async def staged_round(
    stages: DraftStages,
    solve: Solve,
    plan: RoundPlan,
    drafter_request: drafter_service_pb2.GenerateDraftsRequest,
) -> list[common_pb2.DraftVerdict]:
    """Returns the round's verdicts; says how it went in `solve.round_outcome` and on the round's span."""
    assert plan.policy is not None
    policy = plan.policy
    kinds = policy.kinds_for(drafter_request.num_drafts, drafter_request.program_drafts)
    verdicts: list[common_pb2.DraftVerdict] = []
    started, reason, last_stage_s, stages_run = 0, "", 0.0, 0
    for number, step in enumerate(policy.stages(kinds)):
        if number and (left := solve.deadline.left()) < last_stage_s:
            reason = f"deadline: {left:.1f} s left, the last stage took {last_stage_s:.1f} s"
            break
        call = drafter_service_pb2.GenerateDraftsRequest()
        call.CopyFrom(drafter_request)
        call.num_drafts, call.first_index, call.program_drafts = len(step), started, step.count(PROGRAM)
        if number == 0 and policy.greedy and drafter_request.round == 0:
            call.sampling.temperature = 0.0  # the one greedy program and prose draft a user would run alone
        stage_started = time.perf_counter()
        stage_verdicts = await whole_round(stages, solve, call)
        last_stage_s = time.perf_counter() - stage_started
        verdicts += stage_verdicts
        started, stages_run = started + len(step), stages_run + 1
        reason = settled_reason(solve, plan, drafter_request.round, verdicts)
        if reason:
            break
    outcome = RoundOutcome(plan, stages_run, started, reason)
    if drafter_request.round == 0:  # the response's plan is the first round's; a re-draft round says so on its span
        solve.round_outcome = outcome
    trace.get_current_span().set_attributes(
        {
            telemetry.ROUND_WAY: plan.way,
            telemetry.ADAPTIVE_POLICY: policy.name,
            telemetry.ADAPTIVE_DRAFTS: started,
            telemetry.ADAPTIVE_SETTLED: reason,
            telemetry.ROUND_MAX_DRAFTS: plan.max_drafts,
            telemetry.ROUND_STAGES: outcome.stages,
            telemetry.ROUND_STOP_REASON: outcome.stop_reason,
        }
    )
    return verdicts


def settled_reason(solve: Solve, plan: RoundPlan, round_: int, verdicts: list[common_pb2.DraftVerdict]) -> str:
    """Why the round's drafts so far settle it ("" while they do not)."""
    if plan.decision == "bounded":
        return decision_reason(scored_against_bound(verdicts))
    if plan.decision == "unbounded":
        return "a plan passes every rule" if any(v.valid for v in verdicts) else ""
    valid = [
        state.draft
        for state in solve.drafts.values()
        if state.round == round_ and state.verdict is not None and state.verdict.valid
    ]
    assert plan.policy is not None
    answers = [(solve.drafts[d.id].verdict.extracted_answer, d.kind) for d in valid]
    sureness = [(d.kind, d.confidence.min_window if d.HasField("confidence") else None) for d in valid]
    return settled(answers, plan.policy) or trusted(sureness, plan.policy)
