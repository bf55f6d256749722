"""What happens to every draft, whatever its round: its state and `deliberate.draft` span are opened, and once it
has arrived whole (`DraftStages.arrived`, the one arrival path) it is verified — as its round verifies — or shares
the verdict of the draft it duplicates; its verdict is recorded on the span and in the stream; selection reads it
as a `candidate`, and once selected or discarded it is announced and its span ends (`announce`).

Every kind of round uses `DraftStages`: the whole round (`whole`), the adaptive one (`adaptive`, a whole round per
step), and the streamed one (`streamed`), which opens a draft at its first token and verifies it as it streams.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

import grpc
from opentelemetry import trace

from deliberate_api.common.v1 import common_pb2

from ...core import metrics, telemetry
from ...selection import Candidate, Selection
from ...selection.confidence import ConfidenceSummary
from ...selection.duplicates import duplicate_key
from .. import events
from ..downstream import Downstream, StageError
from ..learning.weights import latency_fraction
from ..solve import DraftState, Solve
from ..verdicts import late_verdict, shared_verdict

tracer = trace.get_tracer("deliberate.scheduler")


class Round(Protocol):
    """How a kind of round judges a draft that has arrived (`DraftStages.arrived`)."""

    def settled_on_arrival(self, state: DraftState) -> bool:
        """Whether the round has settled the draft already (it stopped it): it is then neither verified nor shared."""

    def verify(self, state: DraftState) -> None:
        """Starts the draft's verification."""

    def share(self, state: DraftState, original: DraftState) -> None:
        """Starts sharing the verdict of `original`, which the draft structurally duplicates."""


class DraftStages:
    def __init__(self, downstream: Downstream, verify_timeout_s: float):
        self.downstream = downstream
        self.verify_timeout_s = verify_timeout_s  # how long a draft's verification is waited for

    def open_draft(self, solve: Solve, draft: common_pb2.Draft, round_: int) -> DraftState:
        """The draft's state and its `deliberate.draft` span."""
        span = tracer.start_span(
            "deliberate.draft",
            attributes={
                telemetry.REQUEST_ID: solve.request_id,
                telemetry.DRAFT_ID: draft.id,
                telemetry.DRAFT_INDEX: draft.index,
                telemetry.DRAFT_STRATEGY: draft.strategy,
                telemetry.DRAFT_TOKENS: draft.usage.completion_tokens,
                telemetry.DRAFT_ROUND: round_,
            },
        )
        state = DraftState(draft, round_, span)
        solve.drafts[draft.id] = state
        return state

    def arrived(self, round_: Round, solve: Solve, state: DraftState) -> None:
        """A draft has arrived whole, whatever its round: its span and the stream say it was generated; the round may
        settle it at once (a draft it stopped); a structural duplicate of an earlier draft shares that one's verdict;
        any other is verified, as its round verifies."""
        draft = state.draft
        state.span.set_attribute(telemetry.DRAFT_TOKENS, draft.usage.completion_tokens)
        state.span.set_attribute(telemetry.DRAFT_STRATEGY, draft.strategy)
        state.span.add_event("generated")
        metrics.DRAFTS.add(1, {"outcome": "generated"})
        solve.emit(events.draft_generated(draft))
        if round_.settled_on_arrival(state):
            return
        structured = bool(solve.request.output_schema.strip())
        original = solve.signatures.setdefault(duplicate_key(draft.text, draft.kind, structured), draft.id)
        if original == draft.id:
            round_.verify(state)
        else:
            state.duplicate_of = original
            metrics.DRAFTS.add(1, {"outcome": "duplicate"})
            round_.share(state, solve.drafts[original])

    async def verify(self, solve: Solve, state: DraftState) -> None:
        try:
            verdict = await self.downstream.verify(
                solve.request_id,
                state.draft,
                solve.checks,
                solve.deadline,
                "verification",
                computations=solve.consensus_prefix,
            )
        except StageError as error:
            if error.code != grpc.StatusCode.DEADLINE_EXCEEDED or solve.deadline.left() <= 0:
                raise
            self.record_late(solve, state)  # never waited for past its verification timeout
            return
        metrics.count_rule_results(verdict.rule_results)  # a duplicate's shared verdict is not counted again
        self.record_verdict(solve, state, verdict)

    def record_late(self, solve: Solve, state: DraftState) -> None:
        """No verdict within the verification timeout: the draft is not waited for any longer."""
        metrics.DRAFTS.add(1, {"outcome": "timed_out"})
        verdict = late_verdict(state.draft.id, self.verify_timeout_s)
        metrics.count_rule_results(verdict.rule_results)
        self.record_verdict(solve, state, verdict)

    async def share_verdict(self, solve: Solve, state: DraftState, original: DraftState) -> None:
        """A structural duplicate is not verified again: it shares the earlier draft's verdict."""
        await asyncio.shield(original.verification)
        state.span.set_attribute("deliberate.draft.duplicate_of", original.draft.id)
        self.record_verdict(solve, state, shared_verdict(original.verdict, state.draft.id))

    def record_verdict(self, solve: Solve, state: DraftState, verdict: common_pb2.DraftVerdict) -> None:
        state.verdict = verdict
        state.span.add_event("verified")
        state.span.set_attributes({telemetry.DRAFT_VALID: verdict.valid, telemetry.DRAFT_SCORE: verdict.score})
        state.span.set_attributes(telemetry.quality_attributes(verdict))
        if failed := [r.rule_id for r in verdict.rule_results if r.hard and not r.passed]:
            state.span.set_attribute(telemetry.DRAFT_FAILED_RULES, failed)
        metrics.DRAFTS.add(1, {"outcome": "valid" if verdict.valid else "invalid"})
        solve.emit(events.draft_verified(verdict))


def candidate(state: DraftState, verify_timeout_s: float) -> Candidate:
    """The verdicted draft as selection reads it."""
    draft, verdict = state.draft, state.verdict
    return Candidate(
        draft_id=draft.id,
        index=state.order,
        valid=verdict.valid,
        score=verdict.score,
        latency=latency_fraction(verdict.latency.ToTimedelta().total_seconds(), verify_timeout_s),
        answer=verdict.extracted_answer,
        evidence=tuple(verdict.evidence),
        text=draft.text,
        completion_tokens=draft.usage.completion_tokens,
        finish_reason=common_pb2.FinishReason.Name(draft.finish_reason).removeprefix("FINISH_REASON_"),
        kind=draft.kind or "prose",
        confidence=confidence_summary(draft),
        objective=verdict.quality.objective if verdict.HasField("quality") else None,
        objective_ratio=verdict.quality.ratio if verdict.quality.HasField("ratio") else None,
    )


def confidence_summary(draft: common_pb2.Draft) -> ConfidenceSummary | None:
    """The draft's confidence numbers as selection reads them; None where the engine reported none."""
    if not draft.HasField("confidence"):
        return None
    c = draft.confidence
    answer = c.answer if c.HasField("answer") else None
    return ConfidenceSummary(c.tokens, c.mean_logprob, c.min_window, c.last_window, answer, c.window_tokens)


def announce(solve: Solve, selection: Selection) -> None:
    """Each draft selected or discarded: said in the stream, and its span ends."""
    ranks = {d.draft_id: rank for rank, d in enumerate(selection.selected)}
    for draft_id, state in solve.drafts.items():
        if draft_id in ranks:
            state.selected = True
            event = events.draft_selected(draft_id, ranks[draft_id], state.verdict.score)
            outcome = "selected"
        elif state.abort is not None:
            event = events.draft_discarded(draft_id, f"aborted ({state.abort.reason}): {state.abort.message}")
            outcome = "aborted"  # its span already has an "aborted" event; this one says it is settled
        else:
            reason = "failed a hard rule" if not state.verdict.valid else "outscored by the selected drafts"
            event = events.draft_discarded(draft_id, reason)
            outcome = "discarded"
        state.span.set_attribute(telemetry.DRAFT_OUTCOME, outcome)
        state.span.set_attribute(telemetry.DRAFT_FINAL, state.final)
        state.span.set_attributes(
            {telemetry.DRAFT_SIGNAL_PREFIX + name: value for name, value in (state.signals or {}).items()}
        )
        state.span.add_event(outcome)
        state.span.end()
        metrics.DRAFTS.add(1, {"outcome": outcome})
        solve.emit(event)
