"""An adaptive round (docs/scheduler.md, "Adaptive draft counts, live"): the policy's first drafts, then one at a
time in its order of kinds, each call a whole round (`whole`) verified before the next starts, until the valid
drafts settle the answer (`selection.adaptive.settled`, the rule the replay applies) or the round's N are spent."""

from __future__ import annotations

from functools import cache

from opentelemetry import trace

from deliberate_api.common.v1 import common_pb2
from deliberate_api.drafter.v1 import drafter_service_pb2
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb

from ...core import telemetry
from ...selection.adaptive import PROGRAM, AdaptivePolicy, settled
from ..settings import SchedulerSettings
from ..solve import Solve
from .draft_stages import DraftStages
from .whole import whole_round


def policy_of(request: pb.SolveRequest, settings: SchedulerSettings) -> AdaptivePolicy | None:
    """The adaptive policy of the request's rounds; None where they start all their drafts at once."""
    wanted = request.draft_count or (
        pb.DRAFT_COUNT_ADAPTIVE if settings.draft_count == "adaptive" else pb.DRAFT_COUNT_ALL_AT_ONCE
    )
    return parsed_policy(settings.adaptive_policy) if wanted == pb.DRAFT_COUNT_ADAPTIVE else None


@cache
def parsed_policy(name: str) -> AdaptivePolicy:
    """Parsed once per name (the settings validated it at start-up), not once per request."""
    return AdaptivePolicy.parse(name)


async def adaptive_round(
    stages: DraftStages,
    solve: Solve,
    policy: AdaptivePolicy,
    drafter_request: drafter_service_pb2.GenerateDraftsRequest,
) -> list[common_pb2.DraftVerdict]:
    """Returns the round's verdicts; says how it went in `solve.adaptive_note` and on the round's span."""
    kinds = policy.kinds_for(drafter_request.num_drafts, drafter_request.program_drafts)
    verdicts: list[common_pb2.DraftVerdict] = []
    started, reason = 0, ""
    while started < len(kinds) and not reason:
        step = kinds[started : max(policy.start, started + 1)]
        call = drafter_service_pb2.GenerateDraftsRequest()
        call.CopyFrom(drafter_request)
        call.num_drafts, call.first_index, call.program_drafts = len(step), started, step.count(PROGRAM)
        verdicts += await whole_round(stages, solve, call)
        started += len(step)
        valid = [
            (state.verdict.extracted_answer, state.draft.kind)
            for state in solve.drafts.values()
            if state.round == drafter_request.round and state.verdict.valid
        ]
        reason = settled(valid, policy)
    solve.adaptive_note = f"adaptive ({policy.name}): {started} of {len(kinds)} drafts started, " + (
        f"settled as {reason}" if reason else "not settled"
    )
    trace.get_current_span().set_attributes(
        {telemetry.ADAPTIVE_POLICY: policy.name, telemetry.ADAPTIVE_DRAFTS: started, telemetry.ADAPTIVE_SETTLED: reason}
    )
    return verdicts
