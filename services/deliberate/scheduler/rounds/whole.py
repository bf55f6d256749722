"""The whole round: one GenerateDrafts call of whole drafts, each verified as soon as it arrives while the others are
generated. A request's round is this one where it turns streaming verification, the quorum and the confidence
stop off and one Drafter serves it; the adaptive
round (`adaptive`) runs one per step."""

from __future__ import annotations

import asyncio
import contextlib
import time

from opentelemetry import trace

from deliberate_api.common.v1 import common_pb2
from deliberate_api.drafter.v1 import drafter_service_pb2

from ..solve import DraftState, Solve
from .draft_stages import DraftStages


async def whole_round(
    stages: DraftStages, solve: Solve, drafter_request: drafter_service_pb2.GenerateDraftsRequest
) -> list[common_pb2.DraftVerdict]:
    """Returns the call's verdicts."""
    return await WholeRound(stages, solve).run(drafter_request)


class WholeRound:
    def __init__(self, stages: DraftStages, solve: Solve):
        self.stages = stages
        self.solve = solve

    async def run(self, drafter_request: drafter_service_pb2.GenerateDraftsRequest) -> list[common_pb2.DraftVerdict]:
        solve = self.solve
        started = time.perf_counter()
        before = set(solve.drafts)
        drafts = self.stages.downstream.generate_drafts(solve.deadline, drafter_request)
        async with contextlib.aclosing(drafts):
            async for draft in drafts:
                self.stages.arrived(self, solve, self.stages.open_draft(solve, draft, drafter_request.round))
        drafted = time.perf_counter()
        solve.timings.add("draft", drafted - started)
        new = [solve.drafts[i] for i in solve.drafts if i not in before]
        await asyncio.gather(*(state.verification for state in new))
        solve.timings.add("verify", time.perf_counter() - drafted)
        return [state.verdict for state in new]

    # How a whole draft is judged (`draft_stages.Round`): nothing stops it; its verification runs in the background
    # under its span, so the Verifier's span becomes the draft's child.

    def settled_on_arrival(self, state: DraftState) -> bool:
        return False

    def verify(self, state: DraftState) -> None:
        with trace.use_span(state.span, end_on_exit=False):
            state.verification = asyncio.ensure_future(self.stages.verify(self.solve, state))

    def share(self, state: DraftState, original: DraftState) -> None:
        with trace.use_span(state.span, end_on_exit=False):
            state.verification = asyncio.ensure_future(self.stages.share_verdict(self.solve, state, original))
