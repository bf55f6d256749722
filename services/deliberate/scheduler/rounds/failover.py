"""What a streamed round (`streamed`) does when a Drafter replica is lost.

With several Drafter replicas (`replicas`), the round's drafts are split over the ready ones by free capacity, one
call per replica, numbered as one call would number them; when a replica's call fails (UNAVAILABLE: the replica
died or was cut off), its unfinished drafts are re-requested on another ready replica, each at most once and not in
the deadline's last seconds; a draft that had started is generated again from its first token and verified whole.
"""

from __future__ import annotations

import logging

from deliberate_api.common.v1 import common_pb2
from deliberate_api.drafter.v1 import drafter_service_pb2

from ...core import metrics
from ..downstream import StageError, Stream
from ..solve import DraftState, Solve
from .drafter_calls import DrafterCalls

log = logging.getLogger("deliberate.early_stop")

# A lost replica's drafts are not moved to another with less than this left of the deadline.
FAILOVER_MIN_LEFT_S = 1.0


class Failover:
    """The failover part of `streamed.StreamedRound`, which holds these fields and `on_finished`, `start_drafter`."""

    calls: DrafterCalls
    solve: Solve
    states: list[DraftState]
    stopping: bool
    ended_streams: int
    moves: dict[int, dict[str, str]]  # index → the move of a draft re-requested on another replica

    def fail_over(self, stream: Stream, error: StageError) -> None:
        """A replica's call failed: it counts as ended, the replica as down, and each of its drafts that had not
        finished moves to another ready replica — or, stopped already, ends with the text it had. Fails the
        request (the error, as without replicas) when a draft would move a second time, in the deadline's last
        second, or with no other replica ready."""
        if not self.calls.replicas.active:  # one Drafter: nowhere to move to, the request fails as it always did
            raise error
        self.ended_streams += 1
        lost = self.calls.replica_of[stream]
        if lost:
            self.calls.replicas.mark_down(lost, error.message)
        request = self.calls.request_of[stream]
        by_index = {state.draft.index: state for state in self.states}
        for index in range(request.first_index, request.first_index + request.num_drafts):
            state = by_index.get(index)
            if self.calls.call_of.get(index) is not stream or (state is not None and state.finished):
                continue
            if state is not None and (state.abort is not None or self.stopping):
                # Stopped before the loss, or started after a quorum's cancels went out: ends as it stood
                # (`on_finished` stops the latter on the quorum), so the round never waits for it.
                self.on_finished(self.ended_as_it_stood(state))
                continue
            if self.stopping:  # a quorum ended the round: its unstarted drafts are not waited for
                continue
            self.move(index, request, stream, error)

    def record_move(self, state: DraftState) -> None:
        move = self.moves[state.draft.index]
        state.span.add_event("moved", move)
        state.place(move["to"], moved_from=move["from"], reason=move["reason"])

    def ended_as_it_stood(self, state: DraftState) -> common_pb2.Draft:
        draft = common_pb2.Draft()
        draft.CopyFrom(state.draft)
        draft.finish_reason = common_pb2.FINISH_REASON_ABORTED
        return draft

    def move(
        self, index: int, request: drafter_service_pb2.GenerateDraftsRequest, stream: Stream, error: StageError
    ) -> None:
        lost = self.calls.replica_of[stream] or "the Drafter"
        why = ""
        target = None
        if index in self.moves:
            why = "moved once already"
        elif self.solve.deadline.left() < FAILOVER_MIN_LEFT_S:
            why = "the deadline is too near"
        else:
            target = self.calls.ready_replica(exclude=self.calls.replica_of[stream])
            why = "" if target else "no other Drafter replica is ready"
        if target is None:
            raise StageError(error.code, f"{error.message} (draft {index} not moved: {why})")
        part = self.calls.part(request, index - request.first_index, 1)
        state = next((s for s in self.states if s.draft.index == index), None)
        reason = f"replica {lost} lost: {error.message}"
        self.moves[index] = {"from": lost, "to": target.address, "reason": reason}
        discarded = state.draft.usage.completion_tokens if state is not None else 0
        if state is not None:  # started: generated again from its first token, verified whole at its end
            state.draft.text = ""
            state.draft.usage.completion_tokens = 0
            self.record_move(state)
        metrics.REPLICA_DRAFTS.add(1, {"replica": metrics.replica_label(lost), "outcome": "moved"})
        log.warning(
            "draft moved",
            extra={"request_id": self.solve.request_id, "index": index, "from": lost, "to": target.address,
                   "reason": reason, "tokens_discarded": discarded},
        )  # fmt: skip
        self.start_drafter(part, target)
