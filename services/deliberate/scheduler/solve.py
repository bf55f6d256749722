"""The working state of one request as it moves through the stages: plain dataclasses.

The Drafter's `Draft` and the Verifier's `DraftVerdict` are kept as the values they arrived as and never
changed; what the Scheduler learns about a draft (its round, duplicate, score components, selection) lives
in `DraftState`'s own fields. Messages for the client (`DraftReport`, `StageTimings`) are built from this
state only when the response is assembled.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, fields

from opentelemetry.trace import Span

from deliberate_api.common.v1 import common_pb2
from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb

from ..core import telemetry
from ..core.convert import duration
from .downstream import Checks, Deadline
from .events import Emit
from .learning.weights import Weights
from .round_plan import RoundPlan

# Draft indexes restart at 0 each round; ordering by index + ROUND_STRIDE·round keeps earlier rounds first.
ROUND_STRIDE = 100


@dataclass
class DraftState:
    draft: common_pb2.Draft  # as the Drafter sent it
    round: int
    span: Span  # `deliberate.draft`, open from arrival until selected or discarded
    verdict: common_pb2.DraftVerdict | None = None  # as the Verifier gave it (or shared, or late)
    duplicate_of: str = ""  # the earlier draft with the same structural signature, whose verdict it shares
    signals: dict[str, float] | None = None  # every selection signal, by name (set at selection)
    final: float = 0.0  # the selection policy's ranking value
    weights: Weights | None = None  # the weights `final` was computed with
    selected: bool = False
    verification: asyncio.Future | None = None
    finished: bool = True  # the Drafter sent the whole draft (streamed drafts start unfinished)
    abort: pb.DraftAbort | None = None  # set when the Scheduler stopped the draft before its end
    placement: pb.DraftPlacement | None = None  # the Drafter replica it runs on, and any move (`place`)

    @property
    def order(self) -> int:
        return self.draft.index + ROUND_STRIDE * self.round

    def place(self, replica: str, moved_from: str = "", reason: str = "") -> None:
        """The Drafter replica the draft is generated on (after a move: the lost one and why), said alike on its
        span and in the response (`DraftReport.placement`)."""
        self.placement = pb.DraftPlacement(replica=replica, moved_from=moved_from, moved_reason=reason)
        self.span.set_attribute(telemetry.DRAFT_REPLICA, replica)
        if moved_from:
            self.span.set_attribute(telemetry.DRAFT_MOVED_FROM, moved_from)

    def to_report(self) -> pb.DraftReport:
        report = pb.DraftReport(
            draft=self.draft, round=self.round, selected=self.selected, duplicate_of=self.duplicate_of
        )
        if self.verdict is not None:
            report.verdict.CopyFrom(self.verdict)
        if self.abort is not None:
            report.aborted.CopyFrom(self.abort)
        if self.placement is not None:
            report.placement.CopyFrom(self.placement)
        if self.signals is not None and self.weights is not None:
            values, w = self.signals, self.weights
            report.components.CopyFrom(
                pb.ScoreComponents(
                    score=values["score"],
                    agreement=values["agreement"],
                    latency=values["latency"],
                    answer_share=values["answer_share"],
                    final=self.final,
                    alpha=w.alpha,
                    beta=w.beta,
                    gamma=w.gamma,
                    delta=w.delta,
                    signals=values,
                )
            )
        return report


@dataclass
class StageTimes:
    """Seconds per stage; None for a stage the request never reached."""

    draft: float | None = None
    verify: float | None = None
    select: float | None = None
    refine: float | None = None
    total: float | None = None

    def add(self, stage: str, seconds: float) -> None:
        setattr(self, stage, (getattr(self, stage) or 0.0) + seconds)

    def reached(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}

    def to_proto(self) -> pb.StageTimings:
        return pb.StageTimings(**{stage: duration(seconds) for stage, seconds in self.reached().items()})


@dataclass(frozen=True)
class RoundOutcome:
    """How a staged round (the cascade, the adaptive round) went: its plan, the stages and drafts it ran, and what
    settled it ("" when nothing did)."""

    plan: RoundPlan
    stages: int
    drafts_started: int
    settled_as: str

    @property
    def stop_reason(self) -> str:
        if self.settled_as.startswith("deadline:"):
            return self.settled_as
        return f"settled: {self.settled_as}" if self.settled_as else f"not settled: {self.drafts_started} drafts spent"

    @property
    def note(self) -> str:
        """The outcome in the words of `SolveResponse.num_drafts_reason`."""
        assert self.plan.policy is not None
        said = f"settled as {self.settled_as}" if self.settled_as else "not settled"
        if self.settled_as.startswith("deadline:"):
            said = f"stopped by the {self.settled_as}"
        return (
            f"{self.plan.way} ({self.plan.policy.name}): {self.drafts_started} of {self.plan.max_drafts} drafts "
            f"started in {self.stages} stage{'s' * (self.stages != 1)}, {said}"
        )


@dataclass
class Solve:
    """One request: the client's message (read only), its deadline, and everything learned so far."""

    request: pb.SolveRequest
    request_id: str
    deadline: Deadline
    checks: Checks  # what every draft (and the refined answer) is verified against
    emit: Emit  # the stream's events; dropped for a unary Solve
    drafts: dict[str, DraftState] = field(default_factory=dict)  # by draft id, in arrival order
    signatures: dict[str, str] = field(default_factory=dict)  # structural signature → first draft id
    timings: StageTimes = field(default_factory=StageTimes)
    rounds: int = 0
    early_stop: pb.EarlyStop = field(default_factory=pb.EarlyStop)
    round_outcome: RoundOutcome | None = None  # how the last staged round went (`rounds.staged`); None for none
    # From the request's plan (`round_plan.RoundPlan`): how the final text is made, what ranks the drafts, whether
    # refinement starts from the drafts' consensus prefix and whether a thinking-trace marker is made.
    final_text: str = "refine"
    selection_policy: str = "weighted"
    consensus_prefix: bool = False
    thinking_trace: bool = True
    # Streamed rounds whose calls are ended when the request ends (`StreamedRound.close`).
    open_streams: list = field(default_factory=list)
    # A plan a rule pack computed itself (CheckConstraints), offered only beside an UNVERIFIED answer.
    reference_plan: common_pb2.ReferencePlan | None = None
    redraft_feedback: list[str] = field(default_factory=list)  # what each re-draft round was prompted with

    def verdicts(self) -> list[common_pb2.DraftVerdict]:
        return [state.verdict for state in self.drafts.values() if state.verdict is not None]

    def reports(self) -> list[pb.DraftReport]:
        return [state.to_report() for state in self.drafts.values()]
