"""A drafting round: how a request's drafts are started, judged as they arrive, and stopped.

- `streamed`: every request's default round — drafts streamed token by token, verified as they stream, stopped
  when they have lost (early stopping), split over the Drafter replicas with failover;
- `whole`: one call of whole drafts, each verified as it arrives (early stopping turned off, one Drafter);
- `staged`: the cascade and the adaptive round — a first stage, then a few drafts at a time until the valid ones
  settle the answer (the plan's stop rule), its maximum is spent or the deadline is near;
- `stopping_rules`: the rules of early stopping, pure functions (the quorum, the confidence stop, a stop's verdict);
- `drafter_calls`: which Drafter call, on which replica, generates which draft of a streamed round;
- `draft_stages`: what happens to every draft whatever its round, with the one path of a draft's arrival.

`run_round` picks the round a request gets. A new kind of round is one module here and its line in `run_round`.
"""

from __future__ import annotations

from deliberate_api.common.v1 import common_pb2
from deliberate_api.drafter.v1 import drafter_service_pb2

from ..downstream import Downstream
from ..round_plan import RoundPlan
from ..solve import Solve
from .draft_stages import DraftStages
from .staged import staged_round
from .streamed import streamed_round
from .whole import whole_round


async def run_round(
    downstream: Downstream,
    stages: DraftStages,
    solve: Solve,
    plan: RoundPlan,
    drafter_request: drafter_service_pb2.GenerateDraftsRequest,
) -> list[common_pb2.DraftVerdict]:
    """The round's drafts, started as the request's plan says — in stages (the cascade, adaptive), streamed, or
    whole — each verified as soon as it arrives. Returns this round's verdicts."""
    if plan.staged:
        return await staged_round(stages, solve, plan, drafter_request)
    if plan.stopping.active or downstream.spreads_drafts:  # several replicas: streamed parts, failover
        return await streamed_round(downstream, stages, solve, plan.stopping, drafter_request)
    return await whole_round(stages, solve, drafter_request)
