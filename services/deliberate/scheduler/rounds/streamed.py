"""The streamed round, every request's default round: drafts arrive token by token through `StreamDrafts`, so a
draft that has already lost is never waited for (docs/scheduler.md, "Early stopping") and a lost Drafter replica's
drafts move to another. Each draft can be stopped alone:

* streaming verification: every delta goes on to the Verifier's `VerifyStream`, which answers a hard rule failed
  on a prefix (a wrong equation on a completed line) at once; the draft is then aborted, its engine slot freed,
  and, where the request asks for it, a replacement draft with the next strategy and the failure in its prompt
  starts while the others run;
* quorum: once `quorum` drafts passed every hard rule and agree on the answer, or the leading answer has more
  votes than the runner-up and every draft still generating together, the drafts still generating (the
  stragglers) are cancelled and the round ends: refinement starts;
* confidence stop: a draft whose token confidence (sent with its deltas) falls below its kind's floor is aborted.

Each is switched off per request (`SolveRequest.disable_streaming_verification`, `disable_quorum`,
`replace_aborted_drafts`); with all three off the round is the whole one (`whole`) — unless the Drafter has
several replicas, whose parts and failover need this streamed round (then every draft is verified whole once it
has finished).

The round talks to the rest of the Scheduler through two narrow parts, not the pipeline: `DrafterCalls` (which call,
on which replica, generates which draft) and `DraftStages` (what happens to every draft: its span, its arrival, its
verification, its verdict). The rules it applies, pure functions, are in `stopping_rules`; what it does when a
Drafter replica is lost, in `failover`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from enum import Enum

import grpc

from deliberate_api.common.v1 import common_pb2
from deliberate_api.drafter.v1 import drafter_service_pb2
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb
from deliberate_api.verifier.v1 import verifier_service_pb2

from ...core import metrics, telemetry
from ..downstream import Downstream, StageError, Stream
from ..replicas import Replica
from ..round_plan import Stopping
from ..solve import DraftState, Solve
from .draft_stages import DraftStages
from .drafter_calls import DrafterCalls
from .failover import Failover
from .stopping_rules import (
    ConfidenceStops,
    cancel_came_too_late,
    decision_reason,
    quorum_reason,
    scored_against_bound,
    stopped_verdict,
)

# A replacement draft is not started with less time than this left of the deadline: it could not finish.
REPLACEMENT_MIN_LEFT_S = 10.0
# How long the calls of a request may take to end by themselves once it is answered, before they are cut.
WIND_DOWN_S = 2.0


class Event(Enum):
    """What the round's loop is woken by."""

    DRAFTER = "drafter"  # a Drafter call's message: a draft's delta, or the whole draft
    DRAFTER_ENDED = "drafter ended"  # a Drafter call ended
    VERIFIER = "verifier"  # a verdict on the Verifier's stream
    ERROR = "error"  # a call failed: (the kind of its messages, DRAFTER or VERIFIER, else None; the error; its stream)
    SETTLED = "settled"  # a draft has its verdict: the round may be done


async def streamed_round(
    downstream: Downstream,
    stages: DraftStages,
    solve: Solve,
    options: Stopping,
    drafter_request: drafter_service_pb2.GenerateDraftsRequest,
) -> list[common_pb2.DraftVerdict]:
    """Runs a streamed round to its end (its calls are ended with the request's, `StreamedRound.close`); returns its
    verdicts."""
    started = time.perf_counter()
    round_ = StreamedRound(downstream, stages, solve, options, drafter_request)
    solve.open_streams.append(round_)
    verdicts = await round_.run()
    solve.timings.add("draft", round_.last_draft_at - started)
    solve.timings.add("verify", max(0.0, time.perf_counter() - round_.last_draft_at))
    return verdicts


class StreamedRound(Failover):
    """One drafting round with streamed drafts. `run` returns when every draft has finished (a stopped draft
    finishes within a decoding step of its cancel, with the text it had) and has its verdict."""

    def __init__(
        self,
        downstream: Downstream,
        stages: DraftStages,
        solve: Solve,
        options: Stopping,
        request: drafter_service_pb2.GenerateDraftsRequest,
    ):
        self.downstream = downstream  # the Verifier's stream; the Drafter's calls go through `calls`
        self.stages = stages
        self.solve = solve
        self.options = options
        self.request = request  # the round's drafter request; replacements copy it
        self.calls = DrafterCalls(downstream, solve.deadline, request)
        self.events: asyncio.Queue = asyncio.Queue()
        # Index → the move's "from", "to", "reason", for drafts re-requested after their replica was lost (at most
        # once each; the draft's span says it).
        self.moves: dict[int, dict[str, str]] = {}
        self.replacing: dict[int, DraftState] = {}  # a replacement's first_index → the draft it replaces
        self.states: list[DraftState] = []  # this round's drafts, in arrival order
        self.verifier: Stream | None = None
        # Early verdicts of drafts still generating: reported once the draft has arrived, so every draft is
        # generated before it is verified in the stream's events (docs/scheduler.md, "SolveStream event order").
        self.early: dict[str, common_pb2.DraftVerdict] = {}
        self.timers: dict[str, asyncio.TimerHandle] = {}  # draft id → its verification timeout
        self.pumps: list[asyncio.Task] = []
        self.ended_streams = 0
        self.stopping = False  # the quorum was reached: the drafts still generating are being cancelled
        self.confidence = ConfidenceStops(options)
        self.last_draft_at = time.perf_counter()

    # ---------------------------------------------------------------------------------------------- the loop

    async def run(self) -> list[common_pb2.DraftVerdict]:
        solve = self.solve
        solve.early_stop.quorum = self.options.quorum
        self.start_round()
        if self.options.streaming:
            self.verifier = self.downstream.verify_stream(
                solve.request_id, solve.checks, solve.deadline, computations=solve.consensus_prefix
            )
            self.pump(self.verifier, Event.VERIFIER)
        while not self.done():
            kind, item = await self.events.get()
            if kind is Event.ERROR:
                self.failed(*item)
            elif kind is Event.DRAFTER:
                self.on_drafter(item)
            elif kind is Event.VERIFIER:
                self.on_verdict(item)
            elif kind is Event.DRAFTER_ENDED:
                self.ended_streams += 1
            if not self.stopping and (reason := self.quorum_reached()):
                self.stop_stragglers(reason)
        return [state.verdict for state in self.states if state.verdict is not None]

    def done(self) -> bool:
        """Every draft finished (a stopped one within a decoding step of its cancel) and judged."""
        return self.ended_streams == len(self.calls.streams) and all(s.verdict is not None for s in self.states)

    def pump(self, stream: Stream, kind: Event) -> None:
        """Reads a call's answers into the round's events; a Drafter call's end counts (the Verifier's ends with the
        round)."""

        async def read() -> None:
            try:
                async for message in stream.responses():
                    self.events.put_nowait((kind, message))
                if kind is Event.DRAFTER:
                    self.events.put_nowait((Event.DRAFTER_ENDED, stream))
            except StageError as error:
                self.events.put_nowait((Event.ERROR, (kind, error, stream)))

        self.pumps.append(asyncio.ensure_future(read()))

    def failed(self, kind: Event | None, error: BaseException, stream: Stream | None = None) -> None:
        """A failed Drafter call fails the request unless its drafts can move to another replica (`fail_over`); a
        failed Verifier stream falls back to verifying each finished draft on its own (VerifyDrafts, which waits
        for a restarting Verifier). Any other error fails the request as it is."""
        if not isinstance(error, StageError):
            raise error
        deadline_passed = error.code == grpc.StatusCode.DEADLINE_EXCEEDED and self.solve.deadline.left() <= 0
        if kind is Event.DRAFTER and error.code == grpc.StatusCode.UNAVAILABLE and stream in self.calls.request_of:
            self.fail_over(stream, error)
            return
        if kind is not Event.VERIFIER or deadline_passed:
            raise error
        self.verifier = None
        for state in self.states:
            if state.finished and state.verdict is None and state.duplicate_of == "":
                if timer := self.timers.pop(state.draft.id, None):
                    timer.cancel()  # VerifyDrafts has the timeout itself
                self.verify_alone(state)

    async def close(self) -> None:
        """Ends the round's calls: the Drafter's at once (they have ended, or the request failed and generating
        must stop now), the Verifier's once it has answered (it ends by itself when its side is closed)."""
        for stream in self.calls.streams:
            stream.cancel()
        if self.verifier is not None:
            self.verifier.close()
            pending = [pump for pump in self.pumps if not pump.done()]
            if pending:
                await asyncio.wait(pending, timeout=WIND_DOWN_S)
            self.verifier.cancel()
        for pump in self.pumps:
            pump.cancel()

    # ------------------------------------------------------------------------------------------ the drafts

    def start_round(self) -> None:
        """The round's drafts: one call, or one per ready Drafter replica (`DrafterCalls.round_parts`)."""
        for request, replica in self.calls.round_parts():
            self.start_drafter(request, replica)

    def start_drafter(
        self, request: drafter_service_pb2.GenerateDraftsRequest, replica: Replica | None = None
    ) -> Stream:
        stream = self.calls.start(request, replica)
        self.pump(stream, Event.DRAFTER)
        return stream

    def on_drafter(self, message: drafter_service_pb2.StreamDraftsResponse) -> None:
        if message.HasField("delta"):
            delta = message.delta
            state = self.solve.drafts.get(delta.draft_id) or self.open_draft(delta.draft_id, delta.index)
            state.draft.text += delta.text  # what a draft stopped before its end is reported with
            state.draft.usage.completion_tokens += delta.tokens
            if self.verifier is not None and state.abort is None and delta.index not in self.moves:
                self.verifier.send(
                    verifier_service_pb2.VerifyStreamRequest(
                        delta=verifier_service_pb2.DraftTextDelta(
                            draft_id=delta.draft_id, text=delta.text, tokens=delta.tokens
                        )
                    )
                )
            if state.abort is None and (abort := self.confidence.check(state.draft, delta)):
                self.stop(state, abort)
                self.solve.early_stop.low_confidence += 1
        else:
            self.on_finished(message.draft)

    def open_draft(self, draft_id: str, index: int) -> DraftState:
        """A draft's state from its first token on; its span starts now."""
        draft = common_pb2.Draft(id=draft_id, index=index, kind=self.calls.kind_of(index))
        state = self.stages.open_draft(self.solve, draft, self.request.round)
        state.finished = False
        state.verification = asyncio.get_running_loop().create_future()  # resolved by its verdict
        self.states.append(state)
        if replica := self.calls.replica_of[self.calls.stream_for(index)]:
            state.place(replica)
        if index in self.moves:  # moved before its first token
            self.record_move(state)
        if replaced := self.replacing.pop(index, None):
            replaced.abort.replaced_by = draft_id
        return state

    def on_finished(self, draft: common_pb2.Draft) -> None:
        state = self.solve.drafts.get(draft.id) or self.open_draft(draft.id, draft.index)
        state.draft = draft
        state.finished = True
        stream = self.calls.stream_for(draft.index)
        self.calls.finished_on(stream)
        if replica := self.calls.replica_of[stream]:
            metrics.REPLICA_DRAFTS.add(1, {"replica": metrics.replica_label(replica), "outcome": "generated"})
        self.last_draft_at = time.perf_counter()
        self.stages.arrived(self, self.solve, state)

    # How a streamed draft is judged (`draft_stages.Round`): a stopped one by its stop, the others on the Verifier's
    # stream, or alone (no stream, or moved off a lost replica: verified whole).

    def settled_on_arrival(self, state: DraftState) -> bool:
        """A draft stopped (on its prefix, its confidence or a quorum) has the verdict of its stop; one whose cancel
        came too late is whole, and verified like any other."""
        solve, draft = self.solve, state.draft
        if self.stopping and state.abort is None and state.verdict is None:  # cancelled before its first token
            self.stop(state, pb.DraftAbort(reason="quorum", message=solve.early_stop.reason))
            solve.early_stop.cancelled += 1
        if cancel_came_too_late(state, draft):
            if state.abort.reason == "quorum":
                solve.early_stop.cancelled -= 1
            else:
                solve.early_stop.low_confidence -= 1
            state.abort = None
            state.span.add_event("cancel too late")
        if state.abort is None:
            return False
        state.span.set_attribute(telemetry.DRAFT_ABORT_REASON, state.abort.reason)
        verdict = self.early.pop(draft.id, None)
        if verdict is None:
            verdict = stopped_verdict(draft.id, state.abort)
            metrics.count_rule_results(verdict.rule_results)  # as a late verdict is counted
        self.record(state, verdict)
        return True

    def verify(self, state: DraftState) -> None:
        draft = state.draft
        if self.verifier is not None and draft.index not in self.moves:  # moved drafts are verified whole
            self.verifier.send(verifier_service_pb2.VerifyStreamRequest(end=draft))
            timeout_s = self.stages.verify_timeout_s
            self.timers[draft.id] = asyncio.get_running_loop().call_later(timeout_s, self.too_late, state)
        else:
            self.verify_alone(state)

    def share(self, state: DraftState, original: DraftState) -> None:
        self.settle_after(state, self.stages.share_verdict(self.solve, state, original))

    def verify_alone(self, state: DraftState) -> None:
        """Verifies a finished draft in its own VerifyDrafts call (no streaming verification)."""
        self.settle_after(state, self.stages.verify(self.solve, state))

    def settle_after(self, state: DraftState, judging: Awaitable[None]) -> None:
        """Settles the draft once `judging` (its verification, or the verdict it shares) has recorded its verdict;
        a failure fails the request, as it does in the whole round."""

        async def judge() -> None:
            await judging
            self.settled(state)

        def fail_on_error(task: asyncio.Task) -> None:
            if not task.cancelled() and task.exception() is not None:
                self.events.put_nowait((Event.ERROR, (None, task.exception())))

        asyncio.ensure_future(judge()).add_done_callback(fail_on_error)

    def too_late(self, state: DraftState) -> None:
        """The verification timeout passed without a verdict: the draft is not waited for any longer."""
        if state.verdict is None:
            self.stages.record_late(self.solve, state)
            self.settled(state)

    # ---------------------------------------------------------------------------------------- the verdicts

    def on_verdict(self, response: verifier_service_pb2.VerifyStreamResponse) -> None:
        state = self.solve.drafts.get(response.verdict.draft_id)
        if state is None or state.verdict is not None:  # already judged late, or not this request's
            return
        if state.draft.index in self.moves:  # about the text it had on the lost replica: it is verified alone
            return
        metrics.count_rule_results(response.verdict.rule_results)
        if response.early and not state.finished:  # a draft that ended meanwhile is simply invalid
            if state.abort is None:  # not stopped already (on its confidence): its verdict is this failure
                self.abort_failed(state, response.verdict)
            self.early[state.draft.id] = response.verdict
            return
        self.record(state, response.verdict)

    def record(self, state: DraftState, verdict: common_pb2.DraftVerdict) -> None:
        self.stages.record_verdict(self.solve, state, verdict)
        self.settled(state)

    def settled(self, state: DraftState) -> None:
        if state.verification is not None and not state.verification.done():
            state.verification.set_result(None)
        self.events.put_nowait((Event.SETTLED, state))  # wakes the loop: the round may be done

    def abort_failed(self, state: DraftState, verdict: common_pb2.DraftVerdict) -> None:
        """A hard rule failed on the draft's prefix: stop it now, and maybe start another in its place."""
        rule = next(r for r in verdict.rule_results if r.hard and not r.passed)
        abort = pb.DraftAbort(reason="hard_rule", rule_id=rule.rule_id, message=rule.message)
        abort.at.CopyFrom(rule.failed_at)
        self.stop(state, abort)
        self.solve.early_stop.aborted += 1
        state.span.set_attributes(
            {
                telemetry.DRAFT_ABORT_RULE: rule.rule_id,
                telemetry.DRAFT_ABORT_CHARS: rule.failed_at.chars,
                telemetry.DRAFT_ABORT_TOKENS: rule.failed_at.tokens,
                telemetry.DRAFT_ABORT_LINE: rule.failed_at.line,
            }
        )
        if self.options.replace:
            self.replace(state, rule.message)

    def stop(self, state: DraftState, abort: pb.DraftAbort) -> None:
        state.abort = abort
        if not state.finished:
            self.calls.cancel(self.calls.stream_for(state.draft.index), state.draft.index)
        state.span.add_event("cancel sent", {telemetry.DRAFT_ABORT_REASON: abort.reason})

    def replace(self, state: DraftState, failure: str) -> None:
        """A new draft with the next strategy and the failure in its prompt, within N and the deadline."""
        replacements = self.calls.asked - self.request.num_drafts
        if self.stopping or replacements >= self.request.num_drafts:
            return
        if self.solve.deadline.left() < REPLACEMENT_MIN_LEFT_S:
            return
        request = self.calls.replacement(state.draft.index, failure)
        self.replacing[request.first_index] = state
        self.solve.early_stop.replacements += 1
        self.start_drafter(request, self.calls.ready_replica())

    # ------------------------------------------------------------------------------------------- the quorum

    def quorum_reached(self) -> str:
        if not self.options.quorum or self.stopping:
            return ""
        passed = [s for s in self.states if s.verdict is not None and s.verdict.valid]
        started = sum(not s.finished and s.abort is None for s in self.states)
        generating = started + len(self.unstarted())
        if not generating:  # nothing left to stop: the round ends by itself
            return ""
        scored = scored_against_bound([s.verdict for s in passed])
        if scored and self.options.default_quorum:
            return decision_reason(scored)
        valid = [s.verdict.extracted_answer for s in passed]
        kinds = [s.draft.kind or "prose" for s in passed] if self.options.cross_modal else []
        return quorum_reason(valid, generating, self.options.quorum, kinds)

    def unstarted(self) -> list[int]:
        """Indexes of the drafts asked for that have not sent a token yet."""
        seen = {s.draft.index for s in self.states}
        return [index for index in range(self.calls.asked) if index not in seen]

    def stop_stragglers(self, reason: str) -> None:
        """Ends the round on a quorum: the drafts still generating are cancelled."""
        self.stopping = True
        early_stop = self.solve.early_stop
        early_stop.reached, early_stop.reason = True, reason
        for state in self.states:
            if not state.finished and state.abort is None:
                self.stop(state, pb.DraftAbort(reason="quorum", message=reason))
                early_stop.cancelled += 1
        for index in self.unstarted():  # not even one token yet: they are not waited for either
            self.calls.cancel(self.calls.stream_for(index), index)
