"""How a request's first round drafts, resolved once at the Scheduler's edge: all at once, adaptively, or as the
cascade (docs/scheduler.md, "The cascade"), with its maximum of drafts and whether its stop is a decision's.

The pipeline and the rounds read the plan; the response (`RoundPlan`) and the round's span say what it was and why
the round stopped where it did.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Literal

from deliberate_api.scheduler.v1 import scheduler_service_pb2 as pb

from ..selection.adaptive import PROGRAM, AdaptivePolicy
from .drafter_load import Decision
from .settings import SchedulerSettings

Way = Literal["all_at_once", "adaptive", "cascade"]
WAYS: dict[int, Way] = {
    pb.DRAFT_COUNT_ALL_AT_ONCE: "all_at_once",
    pb.DRAFT_COUNT_ADAPTIVE: "adaptive",
    pb.DRAFT_COUNT_CASCADE: "cascade",
}
# At this controlled utilization (the load monitor's "saturated" band) a cascade runs its first stage only: its
# escalation shrinks before its first stage does.
SATURATED = 0.85


@dataclass(frozen=True)
class RoundPlan:
    way: Way
    policy: AdaptivePolicy | None  # the cascade's or adaptive round's; None all at once
    max_drafts: int  # drafts the first round may start
    max_reason: str
    programs: int  # of those, programs (the round's last ones all at once; in the policy's order otherwise)
    selection: str  # the selection policy that ranks the request's drafts
    # A decision's round ends on a plan, not on agreement: "bounded" at a plan that reaches the pack's optimum,
    # "unbounded" at the first plan that passes every rule; "" for a free-text question.
    decision: Literal["", "bounded", "unbounded"] = ""

    @property
    def staged(self) -> bool:
        return self.policy is not None


@cache
def parsed_policy(name: str) -> AdaptivePolicy:
    """Parsed once per name (the settings validated it at start-up), not once per request."""
    return AdaptivePolicy.parse(name)


def way_of(request: pb.SolveRequest, settings: SchedulerSettings) -> Way:
    return WAYS.get(request.draft_count) or settings.draft_count


def resolve(
    request: pb.SolveRequest,
    settings: SchedulerSettings,
    decision: Decision,
    programs_all_at_once: int,
    decision_kind: Literal["", "bounded", "unbounded"],
    spreads_drafts: bool,
) -> RoundPlan:
    """The request's plan. `decision`: the N the client or the load chose; `programs_all_at_once`: the programs a
    round of that N would hold (`decisions.first_round_programs`); `spreads_drafts`: several Drafter replicas, whose
    rounds start all at once (a staged round runs on one Drafter call per stage)."""
    way = way_of(request, settings)
    selection = request.selection_policy or settings.selection_policy
    if way == "all_at_once" or spreads_drafts:
        n, why = decision.num_drafts, decision.reason
        return RoundPlan("all_at_once", None, n, why, programs_all_at_once, selection, decision_kind)
    if way == "adaptive":
        policy = parsed_policy(settings.adaptive_policy)
        n, why = decision.num_drafts, decision.reason
        return RoundPlan(way, policy, n, why, programs_all_at_once, selection, decision_kind)
    if not decision_kind:  # a free-text cascade ends on agreement: its answer is the one its drafts agree on
        selection = request.selection_policy or settings.cascade_selection_policy
    policy = parsed_policy(settings.decision_cascade_policy if decision_kind else settings.cascade_policy)
    most, reason = cascade_maximum(request, settings, decision, policy)
    programs = policy.order[:most].count(PROGRAM)
    if request.HasField("program_drafts"):
        programs = min(request.program_drafts, most)
    elif programs_all_at_once == 0:  # no programs for this request (its data too large for the sandbox)
        programs = 0
    return RoundPlan(way, policy, most, reason, programs, selection, decision_kind)


def cascade_maximum(
    request: pb.SolveRequest, settings: SchedulerSettings, decision: Decision, policy: AdaptivePolicy
) -> tuple[int, str]:
    """How many drafts a cascade may start, and why: the client's num_drafts where it set one; the first stage
    alone once the Drafters are saturated; else --cascade-max-drafts (never past the policy's order)."""
    longest = len(policy.order)
    if request.num_drafts:
        most = min(request.num_drafts, settings.max_drafts, longest)
        return most, f"at most {most} drafts: {request.num_drafts} requested by the client"
    if decision.utilization >= SATURATED:
        return policy.start, f"first stage only ({policy.start} drafts): {decision.reason}"
    most = min(settings.cascade_max_drafts, settings.max_drafts, longest)
    return most, f"at most {most} drafts (--cascade-max-drafts)"


def to_proto(plan: RoundPlan, stages: int, drafts_started: int, stop_reason: str) -> pb.RoundPlan:
    return pb.RoundPlan(
        way=plan.way,
        policy=plan.policy.name if plan.policy else "",
        max_drafts=plan.max_drafts,
        max_drafts_reason=plan.max_reason,
        stages=stages,
        drafts_started=drafts_started,
        stop_reason=stop_reason,
    )
