"""A streamed round's calls to the Drafter: which call, on which replica, generates which draft.

The round's drafts are asked for in one call, or split over the ready Drafter replicas by free capacity, one call
per replica, each numbered as the one call would number them (`part`). A replacement draft is one more call,
numbered after every draft asked for so far (`replacement`); a draft moved off a lost replica is one more call on
another. A call's sending side is closed once its last draft has ended (`finished_on`). The round itself, which
reads the calls and decides what to stop, replace or move, is `streamed.StreamedRound`.
"""

from __future__ import annotations

from deliberate_api.drafter.v1 import drafter_service_pb2

from ..downstream import Deadline, Downstream, Stream
from ..replicas import DrafterReplicas, Replica


class DrafterCalls:
    def __init__(self, downstream: Downstream, deadline: Deadline, request: drafter_service_pb2.GenerateDraftsRequest):
        self.downstream = downstream
        self.deadline = deadline
        self.request = request  # the round's drafter request; replacements copy it
        # Indexes of the program drafts: the round's last `program_drafts`, and each replacement of one of them.
        self.programs = set(range(request.num_drafts - request.program_drafts, request.num_drafts))
        self.streams: list[Stream] = []
        self.unfinished: dict[Stream, int] = {}  # per call: its drafts that have not ended
        self.request_of: dict[Stream, drafter_service_pb2.GenerateDraftsRequest] = {}
        self.replica_of: dict[Stream, str] = {}  # "" where the balanced channel picked
        self.call_of: dict[int, Stream] = {}  # draft index → the call it is (last) asked on
        self.asked = request.num_drafts  # indexes asked for so far: the round's, then each replacement's

    @property
    def replicas(self) -> DrafterReplicas:
        return self.downstream.stubs.drafter_replicas

    def round_parts(self) -> list[tuple[drafter_service_pb2.GenerateDraftsRequest, Replica | None]]:
        """The round's drafts: split over the ready Drafter replicas by free capacity, else one call."""
        plan = self.replicas.plan(self.request.num_drafts) if self.replicas.active else []
        if len(plan) <= 1:
            return [(self.request, plan[0][0] if plan else None)]
        parts, first = [], 0
        for replica, count in plan:
            parts.append((self.part(self.request, first, count), replica))
            first += count
        return parts

    def part(
        self, request: drafter_service_pb2.GenerateDraftsRequest, first: int, count: int
    ) -> drafter_service_pb2.GenerateDraftsRequest:
        """`count` drafts of `request` from its draft `first` on, as that one call would have made them: the same
        indexes (ids, default strategies), seeds (the engine seeds a call's i-th draft with seed + i) and kinds."""
        part = drafter_service_pb2.GenerateDraftsRequest()
        part.CopyFrom(request)
        part.first_index = request.first_index + first
        part.num_drafts = count
        indexes = range(part.first_index, part.first_index + count)
        part.program_drafts = sum(index in self.programs for index in indexes)  # the part's last ones
        if request.sampling.HasField("seed"):
            part.sampling.seed = request.sampling.seed + first
        return part

    def replacement(self, index: int, failure: str) -> drafter_service_pb2.GenerateDraftsRequest:
        """A request for one new draft in place of draft `index`: numbered after every draft asked for so far, the
        next default strategy, the same kind (a program is replaced by a program, prose by prose), and the failure
        added to the round's feedback."""
        request = drafter_service_pb2.GenerateDraftsRequest()
        request.CopyFrom(self.request)
        request.num_drafts = 1
        request.first_index = self.asked
        self.asked += 1
        del request.strategies[:]
        request.program_drafts = 1 if index in self.programs else 0
        if request.program_drafts:
            self.programs.add(request.first_index)
        request.feedback = "; ".join(part for part in (self.request.feedback, failure) if part)
        return request

    def ready_replica(self, exclude: str = "") -> Replica | None:
        """A ready replica for one more draft (not `exclude`); None where there are none to choose among."""
        plan = self.replicas.plan(1, exclude=exclude) if self.replicas.active else []
        return plan[0][0] if plan else None

    def start(self, request: drafter_service_pb2.GenerateDraftsRequest, replica: Replica | None = None) -> Stream:
        stream = self.downstream.stream_drafts(self.deadline, request, replica.stub if replica else None)
        self.streams.append(stream)
        self.unfinished[stream] = request.num_drafts
        self.request_of[stream] = request
        self.replica_of[stream] = replica.address if replica else ""
        for index in range(request.first_index, request.first_index + request.num_drafts):
            self.call_of[index] = stream
        return stream

    def finished_on(self, stream: Stream) -> None:
        """One more draft of `stream` has ended; after its last, nothing more is sent on it (no cancel can be for
        a draft still generating), so its sending side is closed and the Drafter ends the call."""
        self.unfinished[stream] -= 1
        if self.unfinished[stream] == 0:
            stream.close()

    def kind_of(self, index: int) -> str:
        """What draft `index` is, known before the Drafter's finished draft says it."""
        return "program" if index in self.programs else "prose"

    def stream_for(self, index: int) -> Stream:
        """The call draft `index` is generated on (its replica's part of the round, a replacement's own call, or
        the call it moved to)."""
        return self.call_of[index]

    def cancel(self, stream: Stream, index: int) -> None:
        """Asks the Drafter to stop draft `index` on `stream`: it ends within a decoding step, with the text it had."""
        stream.send(drafter_service_pb2.StreamDraftsRequest(cancel=drafter_service_pb2.CancelDraft(index=index)))
