"""The events `SolveStream` sends while a request runs, one builder each; `Solve` (unary) drops them."""

from __future__ import annotations

from collections.abc import Callable

from deliberate_api.common.v1 import common_pb2
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb

from ..selection.consensus import Consensus

Emit = Callable[[pb.SolveStreamResponse], None]


def round_started(round_: int, num_drafts: int, reason: str, feedback: str) -> pb.SolveStreamResponse:
    return pb.SolveStreamResponse(
        round_started=pb.RoundStarted(round=round_, num_drafts=num_drafts, reason=reason, feedback=feedback)
    )


def draft_generated(draft: common_pb2.Draft) -> pb.SolveStreamResponse:
    return pb.SolveStreamResponse(draft_generated=pb.DraftGenerated(draft=draft))


def draft_verified(verdict: common_pb2.DraftVerdict) -> pb.SolveStreamResponse:
    return pb.SolveStreamResponse(draft_verified=pb.DraftVerified(verdict=verdict))


def draft_selected(draft_id: str, rank: int, score: float) -> pb.SolveStreamResponse:
    return pb.SolveStreamResponse(draft_selected=pb.DraftSelected(draft_id=draft_id, rank=rank, score=score))


def draft_discarded(draft_id: str, reason: str) -> pb.SolveStreamResponse:
    return pb.SolveStreamResponse(draft_discarded=pb.DraftDiscarded(draft_id=draft_id, reason=reason))


def refine_chunk(text: str) -> pb.SolveStreamResponse:
    return pb.SolveStreamResponse(refine_chunk=pb.RefineChunk(text=text))


def thinking_trace(text: str) -> pb.SolveStreamResponse:
    return pb.SolveStreamResponse(thinking_trace=pb.ThinkingTrace(text=text))


def consensus_prefix(found: Consensus, draft_ids: list[str]) -> pb.SolveStreamResponse:
    """`found` over the drafts `draft_ids` (in the order `consensus` was given them)."""
    return pb.SolveStreamResponse(
        consensus_prefix=pb.ConsensusPrefix(
            text=found.text,
            source_draft_id=draft_ids[found.source],
            supporting_draft_ids=[draft_ids[i] for i in found.supporters],
            basis=found.basis,
            lines=found.lines,
            computations=found.computations,
        )
    )
